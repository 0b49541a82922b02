/**
 * The dashboard against the API of issue 14 in Chromium, all through the real server and store:
 * runs with tags and a group (`run.json`, as `initBackends(config, { tags, group })` writes it)
 * and flattened hyperparameters, keys the server flags `internal`, `/api/summary`, `/api/lines`
 * with `before`, and runs whose folder names are any UTF-8 (accents, `=`, `(`, `+`, CJK, a bidi
 * override).
 */
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { RUN_META_FILE } from "../../../src/run/run-files.js";
import { startDashboard, type Dashboard } from "../../../src/ui/server.js";
import { tempDir } from "../../helpers.js";
import type { LaunchedBrowser } from "../browser.js";
import { card, ensureWebBuilt, filterRunsList, openPage, shot, waitForTableRuns, writeRun } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

/** Names W&B and AReaL users give runs; the last one holds a right-to-left override. */
const HOSTILE = ["café", "lr=3e-4,bs=256", "2026-11-24T00:45:00", "ablation (v2)", "run+1", "实验1", "tri\u202Eal"];

const META: Record<string, { tags: string[]; group?: string }> = {
  a: { tags: ["baseline"], group: "sweep-1" },
  b: { tags: ["wide", "fp8"], group: "sweep-1" },
  c: { tags: ["wide"] },
};

describe("dashboard against the issue-14 API in Chromium", () => {
  let root: string;
  let dashboard: Dashboard;
  let launched: LaunchedBrowser;
  let page: Page;
  const errors: string[] = [];

  before(async () => {
    ensureWebBuilt();
    root = tempDir("rankscope-ui-contract-");
    for (const [i, trial] of ["a", "b", "c"].entries()) {
      const hyperparams = {
        lr: [0.1, 0.01, 0.001][i],
        model: { width: 256 * (i + 1) },
        optimizer: i === 0 ? "sgd" : "adam",
      };
      writeRun(
        root,
        "sweep",
        trial,
        80,
        { "train/loss": (s) => (i + 1) * Math.exp(-s / 30), loss__count: () => 4 },
        hyperparams,
      );
      writeFileSync(join(root, "sweep", trial, RUN_META_FILE), JSON.stringify(META[trial]));
    }
    for (const name of HOSTILE) writeRun(root, "hostile", name, 30, { loss: (s) => 1 / (s + 1) });
    writeRun(root, "exp", "long", 20_000, { signal: (s) => Math.sin(s / 40) + (s === 13_337 ? 5 : 0) });
    dashboard = await startDashboard({ root, port: 0 });
    ({ launched, page } = await openPage(errors, { nameHelper: false }));
  });

  after(async () => {
    await launched?.close();
    await dashboard?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("shows groups and tags in the runs list and filters by them", async () => {
    await page.goto(`${dashboard.url}#run=sweep/a`);
    const b = page.locator('#runs tr[data-run="sweep/b"]');
    await b.waitFor();
    assert.match(await b.innerText(), /sweep-1/);
    assert.match(await b.innerText(), /wide/);
    assert.match(await b.innerText(), /fp8/);
    await filterRunsList(page, "fp8", 1);
    assert.equal(await page.locator("#runs tr[data-run]").count(), 1);
    await page.fill("#run-filter", "");
  });

  it("hides keys the server flags internal", async () => {
    await page.waitForSelector("body[data-charts-rendered]");
    assert.equal(await page.locator(card("loss__count")).count(), 0);
    assert.match(await page.innerText("#internal-note"), /1 hidden/);
  });

  it("filters the runs table by tag and group and sorts by a flattened parameter", async () => {
    await page.goto(`${dashboard.url}#tab=runs&run=sweep/a`);
    await page.reload();
    await page.waitForSelector("table.runs-table");
    await page.fill("#table-filter", "tag:wide");
    await page.waitForSelector('table.runs-table[data-rows="2"]');
    await page.fill("#table-filter", "group:sweep-1 tag:wide");
    await page.waitForSelector('table.runs-table[data-rows="1"]');
    await page.fill("#table-filter", "sweep/");
    await page.waitForSelector('table.runs-table[data-rows="3"]');
    await page.click('button.sort[data-col="p:model.width"]');
    await waitForTableRuns(page, ["sweep/a", "sweep/b", "sweep/c"]);
    await page.click('button.sort[data-col="p:model.width"]');
    await waitForTableRuns(page, ["sweep/c", "sweep/b", "sweep/a"]);
  });

  it("shows the last value of each metric as summary columns and plots it in parallel coordinates", async () => {
    const cell = await page.$$eval("table.runs-table th.summary button", (b) =>
      b.map((x) => x.getAttribute("data-col")),
    );
    assert.ok(cell.includes("s:train/loss"), `summary columns: ${JSON.stringify(cell)}`);
    await page.selectOption("#pc-metric", "train/loss");
    await page.waitForSelector('svg.parcoords[data-runs="3"]');
    assert.equal(await page.locator("svg.parcoords polyline.pc-line").count(), 3);
    await shot(page, "dashboard-parcoords.png", "svg.parcoords");
  });

  it("zooms into the middle of a 20,000-step line and gets its raw points", async () => {
    await page.goto(`${dashboard.url}#run=exp/long&tab=metrics&smooth=0&zoom=13000,13600`);
    await page.reload();
    const signal = card("signal");
    await page.waitForSelector(`${signal}[data-refined]`, { timeout: PAGE_WAIT_MS });
    assert.equal(await page.getAttribute(signal, "data-window-raw"), "1");
    assert.ok(
      Number(await page.getAttribute(signal, "data-window-points")) >= 600,
      "every step of the window is there",
    );
    await shot(page, "dashboard-zoom-raw.png", signal);
  });

  it("lists runs with any UTF-8 name, a bidi override shown as an escape and never raw", async () => {
    await page.goto(`${dashboard.url}#run=sweep/a`);
    await page.reload();
    for (const name of HOSTILE) {
      const row = page.locator(`#runs tr[data-run=${JSON.stringify(`hostile/${name}`)}]`);
      await row.waitFor();
      const text = await row.innerText();
      if (name.includes("\u202E")) assert.match(text, /tri\\u\{202E\}al/);
      else assert.ok(text.includes(name), `${JSON.stringify(text)} shows ${name}`);
    }
    assert.ok(!(await page.innerText("body")).includes("\u202E"), "no raw bidi override anywhere in the page");
    await shot(page, "dashboard-hostile-names.png", "#sidebar");
  });

  it("asks for the keys of the runs its address names while the runs list is on its way", async () => {
    const fresh = await launched.context.newPage();
    try {
      // The runs list is held until the keys are asked (or 10 s pass): a page that waited for the
      // list before asking for keys would ask them only after the 10 s.
      let release = (): void => undefined;
      const held = new Promise<void>((resolve) => (release = resolve));
      const deadline = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 10_000).unref());
      await fresh.route("**/api/runs?**", async (route) => {
        await Promise.race([held, deadline()]);
        await route.continue();
      });
      const keyRequests: string[] = [];
      fresh.on("request", (r) => {
        if (!new URL(r.url()).pathname.endsWith("/api/keys")) return;
        keyRequests.push(new URL(r.url()).searchParams.get("runs") ?? "");
        release();
      });
      // `exp/none` does not exist: the runs list drops it, so the keys asked early (for three runs)
      // are not the selection's, and the page asks again for the two that remain.
      await fresh.goto(`${dashboard.url}#run=sweep%2Fa&run=sweep%2Fb&run=exp%2Fnone&tab=metrics&q=train%2Floss`);
      await fresh.waitForSelector(`${card("train/loss")}[data-lines="2"]`, { timeout: PAGE_WAIT_MS });
      assert.deepEqual(
        keyRequests.map((r) => JSON.parse(r) as unknown),
        [
          ["sweep/a", "sweep/b", "exp/none"],
          ["sweep/a", "sweep/b"],
        ],
      );
      assert.equal(await fresh.innerText("#error"), "");
      // With every run named existing, the keys asked early are the ones used: one request.
      keyRequests.length = 0;
      await fresh.goto("about:blank");
      await fresh.goto(`${dashboard.url}#run=sweep%2Fa&run=sweep%2Fc&tab=metrics&q=train%2Floss`);
      await fresh.waitForSelector(`${card("train/loss")}[data-lines="2"]`, { timeout: PAGE_WAIT_MS });
      assert.deepEqual(keyRequests, [JSON.stringify(["sweep/a", "sweep/c"])]);
    } finally {
      await fresh.close();
    }
  });

  it("opens runs with any UTF-8 name", async () => {
    for (const name of HOSTILE) {
      await page.click(`#runs tr[data-run=${JSON.stringify(`hostile/${name}`)}]`);
      await page.waitForFunction(
        (id) => new URLSearchParams(location.hash.slice(1)).getAll("run").join() === id,
        `hostile/${name}`,
      );
      await page.waitForSelector(`${card("loss")}[data-points="30"]`, { timeout: PAGE_WAIT_MS });
      assert.equal(await page.innerText("#error"), "");
    }
  });
});
