/**
 * What the dashboard's browser tests share: building the web app, seeding runs with the real
 * store writer, card selectors, reading canvases, screenshots into test-artifacts/, the two
 * sources a test serves its root from (`SOURCES`: `rankscope ui`, and a team server synced to),
 * and a page in a fresh Chromium that collects the page's errors (`openPage`, and
 * `dashboardInChromium` for a describe's tests over one source).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { RunSync } from "../../../src/sync/run-sync.js";
import { defaultWebDir, startDashboard } from "../../../src/ui/server.js";
import { Postgres, postgresMissing } from "../../server/postgres.js";
import { serverWithTokens } from "../../server/support.js";
import { isPageError, launchChromium, type LaunchedBrowser } from "../browser.js";
import { openRun } from "../seed.js";
import { PAGE_WAIT_MS } from "../browser.js";

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
export const artifacts = join(repo, "test-artifacts");

/** The web app is part of `npm run build`; build just it when a test run starts without it. */
export function ensureWebBuilt(): void {
  if (existsSync(join(defaultWebDir(), "index.html"))) return;
  const result = spawnSync(
    process.execPath,
    [join(repo, "node_modules/vite/bin/vite.js"), "build", "--config", "src/ui/web/vite.config.ts"],
    { cwd: repo, stdio: "inherit" },
  );
  assert.equal(result.status, 0, "vite build of the dashboard failed");
}

export const card = (key: string): string => `.chart[data-key=${JSON.stringify(key)}]`;

export async function canvasOf(page: Page, key: string): Promise<string> {
  return page.$eval(`${card(key)} canvas`, (c) => (c as HTMLCanvasElement).toDataURL());
}

/** Save a screenshot of the page (or one element) as a test artifact. */
export async function shot(page: Page, name: string, selector?: string): Promise<void> {
  mkdirSync(artifacts, { recursive: true });
  if (selector === undefined) await page.screenshot({ path: join(artifacts, name) });
  else
    await page
      .locator(selector)
      .first()
      .screenshot({ path: join(artifacts, name) });
}

/** A card's CSV download (its `button.csv`): per line label, its values by step. */
export async function csvOf(page: Page, selector: string): Promise<Map<string, Map<number, number>>> {
  const [download] = await Promise.all([page.waitForEvent("download"), page.click(`${selector} button.csv`)]);
  const rows = readFileSync(await download.path(), "utf8")
    .trim()
    .split("\n");
  assert.equal(rows[0], "line,step,time_ms,value");
  const lines = new Map<string, Map<number, number>>();
  for (const row of rows.slice(1)) {
    const [label = "", step = "", , value = ""] = row.split(",");
    const line = lines.get(label) ?? new Map<number, number>();
    line.set(Number(step), Number(value));
    lines.set(label, line);
  }
  return lines;
}

/** Write one global series per key: `values(step)` at steps 0..n-1, a second apart from `t0`. */
export function writeRun(
  root: string,
  experiment: string,
  trial: string,
  n: number,
  keys: Record<string, (step: number) => number>,
  hyperparams?: Record<string, unknown>,
  t0 = Date.now() - n * 1000 - 60_000,
): void {
  const writer = openRun(root, experiment, trial);
  if (hyperparams !== undefined) writer.write({ hyperparams });
  for (const [key, f] of Object.entries(keys)) {
    const steps = Float64Array.from({ length: n }, (_, i) => i);
    writer.writeSeries(
      key,
      steps,
      steps.map((s) => t0 + s * 1000),
      steps.map((s) => f(s)),
    );
  }
  writer.finish();
}

/** How many pixels of the card's canvas are close to `rgb`. */
export async function pixelsNear(page: Page, key: string, rgb: [number, number, number]): Promise<number> {
  return page.$eval(
    `${card(key)} canvas`,
    (c, target) => {
      const canvas = c as HTMLCanvasElement;
      const data = canvas.getContext("2d")?.getImageData(0, 0, canvas.width, canvas.height).data;
      if (data === undefined) return 0;
      let n = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (
          Math.abs((data[i] ?? 0) - target[0]) < 24 &&
          Math.abs((data[i + 1] ?? 0) - target[1]) < 24 &&
          Math.abs((data[i + 2] ?? 0) - target[2]) < 24 &&
          (data[i + 3] ?? 0) > 200
        )
          n++;
      }
      return n;
    },
    rgb,
  );
}

/** The runs the runs table shows now (rows in view; spacer rows left out), in order. */
export function tableRuns(page: Page): Promise<string[]> {
  return page.$$eval("table.runs-table tbody tr[data-run]", (rows) =>
    rows.map((r) => r.getAttribute("data-run") ?? ""),
  );
}

/** Wait until the runs table shows exactly `ids`, in order (sorting and filtering are a server round trip). */
export async function waitForTableRuns(page: Page, ids: readonly string[]): Promise<void> {
  await page.waitForFunction(
    (want) =>
      JSON.stringify(
        [...document.querySelectorAll("table.runs-table tbody tr[data-run]")].map((r) => r.getAttribute("data-run")),
      ) === JSON.stringify(want),
    ids,
    { timeout: PAGE_WAIT_MS },
  );
}

/** Type into the runs list's filter box and wait until the server's answer shows `n` runs. */
export async function filterRunsList(page: Page, text: string, n: number): Promise<void> {
  await page.fill("#run-filter", text);
  await page.waitForSelector(`#runs-count[data-total="${n}"]`, { timeout: PAGE_WAIT_MS });
  await page.waitForFunction(
    (want) => document.querySelectorAll("#runs tbody tr.run[data-run]").length === want,
    Math.min(n, 20),
    { timeout: PAGE_WAIT_MS },
  );
}

/** Where a browser test's page is served from: the local root's dashboard, or a team server the root's runs were synced to. */
export interface Served {
  /** The dashboard's address (with the read token the team server needs); a test appends `#…`. */
  readonly url: string;
  /** After the test wrote to a local store: make the source see it (the team server: sync every run again). */
  readonly wrote: () => Promise<void>;
  close(): Promise<void>;
}

/** The sources every dashboard test in Chromium runs against, and why one is skipped where it is. */
export const SOURCES = [
  ["local root", serveLocal, false],
  ["team server over PostgreSQL", serveTeam, postgresMissing() ?? false],
] as const;

/** The root served by `rankscope ui`'s dashboard. */
export async function serveLocal(root: string): Promise<Served> {
  const dashboard = await startDashboard({ root, port: 0 });
  return { url: dashboard.url, wrote: async () => undefined, close: () => dashboard.close() };
}

/** Every run under the root (`experiment/trial` folders holding a store) synced to a team server over a fresh PostgreSQL, opened with a read token. */
export async function serveTeam(root: string): Promise<Served> {
  const pg = await Postgres.start();
  const { server, write, read } = await serverWithTokens(pg);
  const runDirs = readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) =>
      readdirSync(join(root, e.name), { withFileTypes: true })
        .filter((t) => t.isDirectory())
        .map((t) => join(root, e.name, t.name)),
    )
    .filter((dir) => existsSync(join(dir, "metrics.db")));
  const syncs = runDirs.map((runDir) => new RunSync({ runDir, url: server.url, token: write }));
  const wrote = async (): Promise<void> => {
    for (const s of syncs) await s.pass(true);
  };
  await wrote();
  return {
    url: `${server.url}/?token=${encodeURIComponent(read)}`,
    wrote,
    close: async () => {
      await server.close();
      await pg.close();
    },
  };
}

/** How `openPage` sets its page up. */
export interface PageOptions {
  /** The page's console errors of its own (`isPageError`) are errors too (default true); uncaught ones always are. */
  readonly consoleErrors?: boolean;
  /** Give the page the helper tsx names a test's `page.evaluate` functions with (default true). */
  readonly nameHelper?: boolean;
  /** The page's size (default: the browser's, 1400 × 900). */
  readonly viewport?: { readonly width: number; readonly height: number };
}

/** Chromium launched fresh, and a page in it whose errors go into `errors`. */
export async function openPage(
  errors: string[],
  options: PageOptions = {},
): Promise<{ launched: LaunchedBrowser; page: Page }> {
  const launched = await launchChromium();
  try {
    const page = await launched.context.newPage();
    if (options.viewport !== undefined) await page.setViewportSize(options.viewport);
    // tsx names the functions a test hands to page.evaluate with a helper the page lacks.
    if (options.nameHelper ?? true) await page.addInitScript("window.__name = (f) => f");
    page.on("pageerror", (e) => errors.push(e.message));
    if (options.consoleErrors ?? true)
      page.on("console", (m) => {
        if (isPageError(m)) errors.push(m.text());
      });
    return { launched, page };
  } catch (error) {
    await launched.close();
    throw error;
  }
}

/** What `dashboardInChromium` opens for the tests of its describe. */
export interface DashboardInChromium {
  readonly dashboard: Served;
  readonly launched: LaunchedBrowser;
  readonly page: Page;
  /** The page's errors: uncaught ones, and its console errors (unless `consoleErrors` is false). */
  readonly errors: string[];
}

/**
 * In the describe it is called in: before its tests, serve `root()` from `serve` and open a page
 * in a fresh Chromium (`openPage`); after them, close both. The fields are there once the hook ran.
 */
export function dashboardInChromium(
  serve: (root: string) => Promise<Served>,
  root: () => string,
  options: PageOptions = {},
): DashboardInChromium {
  const errors: string[] = [];
  let dashboard: Served | undefined;
  let opened: { launched: LaunchedBrowser; page: Page } | undefined;
  before(async () => {
    dashboard = await serve(root());
    opened = await openPage(errors, options);
  });
  after(async () => {
    await opened?.launched.close();
    await dashboard?.close();
  });
  const ran = (): never => assert.fail("dashboardInChromium opens its page in the describe's before hook");
  return {
    errors,
    get dashboard() {
      return dashboard ?? ran();
    },
    get launched() {
      return opened?.launched ?? ran();
    },
    get page() {
      return opened?.page ?? ran();
    },
  };
}
