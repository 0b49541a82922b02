/**
 * The dashboard in a real browser (Debian's Chromium via playwright-core), over both sources of
 * one contract: a local root (`rankscope ui`) and the team server over a real PostgreSQL
 * (`rankscope server`, the runs sent by the sync). What a user sees and does — runs list, charts
 * and their lines, x-axis, smoothing, a live run growing, hostile strings shown as text, and the
 * token flow off loopback.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import type { StoreWriter } from "../../../src/store/writer.js";
import { defaultWebDir, startDashboard } from "../../../src/ui/server.js";
import { tempDir } from "../../helpers.js";
import { launchChromium, type LaunchedBrowser, isPageError } from "../browser.js";
import { XSS_KEY, openRun, seedFinishedRun, trainingPoints } from "../seed.js";
import { filterRunsList, SOURCES, type Served } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const artifacts = join(repo, "test-artifacts");

/** The web app is part of `npm run build`; build just it when a test run starts without it. */
function ensureWebBuilt(): void {
  if (existsSync(join(defaultWebDir(), "index.html"))) return;
  const result = spawnSync(
    process.execPath,
    [join(repo, "node_modules/vite/bin/vite.js"), "build", "--config", "src/ui/web/vite.config.ts"],
    { cwd: repo, stdio: "inherit" },
  );
  assert.equal(result.status, 0, "vite build of the dashboard failed");
}

const card = (key: string): string => `.chart[data-key=${JSON.stringify(key)}]`;

async function canvasOf(page: Page, key: string): Promise<string> {
  return page.$eval(`${card(key)} canvas`, (c) => (c as HTMLCanvasElement).toDataURL());
}

async function waitForGrid(page: Page): Promise<void> {
  await page.waitForSelector("body[data-charts-rendered]", { timeout: PAGE_WAIT_MS });
}

for (const [name, serve, skip] of SOURCES) {
  describe(`dashboard in Chromium (${name})`, { skip }, () => {
    let root: string;
    let dashboard: Served;
    let launched: LaunchedBrowser;
    let page: Page;
    let live: StoreWriter;
    const liveStart = Date.now() - 60_000;
    const dialogs: string[] = [];
    const consoleErrors: string[] = [];
    const requests: string[] = [];

    before(async () => {
      ensureWebBuilt();
      root = tempDir("rankscope-ui-browser-");
      seedFinishedRun(root);
      const big = openRun(root, "exp", "big");
      const n = 20_000;
      big.writeSeries(
        "signal",
        Array.from({ length: n }, (_, i) => i),
        Array.from({ length: n }, (_, i) => liveStart - 600_000 + i),
        Array.from({ length: n }, (_, i) => Math.sin(i / 50) + (i % 97 === 0 ? 3 : 0)),
      );
      big.finish();
      live = openRun(root, "exp", "live");
      live.write({ scalars: trainingPoints(0, 30, liveStart) });
      dashboard = await serve(root);
      launched = await launchChromium();
      page = await launched.context.newPage();
      page.on("dialog", (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      page.on("console", (m) => {
        if (isPageError(m)) consoleErrors.push(m.text());
      });
      page.on("pageerror", (e) => consoleErrors.push(e.message));
      page.on("request", (r) => requests.push(r.url()));
    });

    after(async () => {
      await launched?.close();
      await dashboard?.close();
      live?.close();
      rmSync(root, { recursive: true, force: true });
    });

    it("shows the runs list with experiment, trial and status", async () => {
      await page.goto(`${dashboard.url}#run=exp/base`);
      const base = page.locator('tr[data-run="exp/base"]');
      await base.waitFor();
      assert.match(await base.innerText(), /exp\s+base\s+finished/);
      assert.match(await page.locator('tr[data-run="exp/live"]').innerText(), /exp\s+live\s+running/);
      await filterRunsList(page, "live", 1);
      assert.equal(await page.locator("tr[data-run]").count(), 1);
      await page.fill("#run-filter", "");
    });

    it("draws one chart per key with a line per rank and the global line", async () => {
      await waitForGrid(page);
      assert.deepEqual(
        await page.$$eval(".chart", (cards) => cards.map((c) => c.getAttribute("data-key")).sort()),
        [XSS_KEY, "loss", "lr"].sort(),
      );
      assert.equal(await page.getAttribute(card("loss"), "data-lines"), "3");
      assert.deepEqual(await page.$$eval(`${card("loss")} .legend-label`, (l) => l.map((x) => x.textContent)), [
        "all ranks",
        "rank 0",
        "rank 1 (Trainer_0_r1)",
      ]);
      // Smoothing is on by default: each line is drawn raw (faint) and smoothed.
      assert.equal(await page.getAttribute(card("loss"), "data-series"), "6");
      assert.equal(await page.getAttribute(card("lr"), "data-lines"), "1");
      assert.equal(await page.getAttribute(card("loss"), "data-points"), String(3 * 120));
      await page.fill("#key-search", "lo");
      await page.waitForFunction(() => document.querySelectorAll(".chart").length === 1);
      await page.fill("#key-search", "");
      await page.waitForFunction(() => document.querySelectorAll(".chart[data-drawn]").length === 3);
      await page.uncheck("#per-rank");
      await page.waitForFunction(
        (sel) => document.querySelector(sel)?.getAttribute("data-lines") === "1",
        card("loss"),
      );
      await page.check("#per-rank");
      await page.waitForFunction(
        (sel) => document.querySelector(sel)?.getAttribute("data-lines") === "3",
        card("loss"),
      );
      await page.waitForSelector(`${card("loss")}[data-drawn]`);
    });

    it("redraws when the x-axis, smoothing and log scale change", async () => {
      const byStep = await canvasOf(page, "loss");
      await page.selectOption("#x-mode", "wall");
      await page.waitForSelector(`${card("loss")}[data-x-mode="wall"]`);
      const byWall = await canvasOf(page, "loss");
      assert.notEqual(byWall, byStep, "switching to wall time must change the drawing (time ticks)");
      await page.selectOption("#x-mode", "relative");
      await page.waitForSelector(`${card("loss")}[data-x-mode="relative"]`);
      assert.notEqual(await canvasOf(page, "loss"), byWall);
      await page.selectOption("#x-mode", "step");
      await page.waitForSelector(`${card("loss")}[data-x-mode="step"]`);
      assert.equal(await canvasOf(page, "loss"), byStep, "back to step draws the same chart again");

      await page.$eval("#smoothing", (input) => {
        (input as HTMLInputElement).value = "0";
        input.dispatchEvent(new Event("input"));
      });
      await page.waitForSelector(`${card("loss")}[data-series="3"]`);
      const raw = await canvasOf(page, "loss");
      assert.notEqual(raw, byStep, "smoothing 0 must draw the raw lines only");
      await page.$eval("#smoothing", (input) => {
        (input as HTMLInputElement).value = "0.95";
        input.dispatchEvent(new Event("input"));
      });
      await page.waitForSelector(`${card("loss")}[data-series="6"]`);
      const heavy = await canvasOf(page, "loss");
      assert.notEqual(heavy, raw);
      assert.notEqual(heavy, byStep, "a heavier smoothing draws a different smoothed line");
      await page.check("#log-scale");
      assert.notEqual(await canvasOf(page, "loss"), heavy, "log scale must change the drawing");
      await page.uncheck("#log-scale");
      await page.$eval("#smoothing", (input) => {
        (input as HTMLInputElement).value = "0.6";
        input.dispatchEvent(new Event("input"));
      });
    });

    it("overlays several runs, one set of lines per run", async () => {
      await page.check('tr[data-run="exp/live"] input[type="checkbox"]');
      await page.waitForFunction(
        (sel) => document.querySelector(sel)?.getAttribute("data-lines") === "6",
        card("loss"),
      );
      const labels = await page.$$eval(`${card("loss")} .legend-label`, (l) => l.map((x) => x.textContent));
      assert.ok(
        labels.includes("exp/base · rank 0") && labels.includes("exp/live · all ranks"),
        JSON.stringify(labels),
      );
      await page.waitForSelector(`${card("loss")}[data-drawn]`);
      mkdirSync(artifacts, { recursive: true });
      await page.screenshot({ path: join(artifacts, "dashboard-main.png") });
    });

    it("shows a metric key, sample text and config values made of HTML as text, running nothing", async () => {
      await page.goto(`${dashboard.url}#run=exp/base&tab=metrics`);
      await page.reload();
      await waitForGrid(page);
      assert.equal(await page.textContent(`${card(XSS_KEY)} h3`), XSS_KEY);
      assert.equal(await page.locator('img[src="x"]').count(), 0);
      await page.click('button[data-tab="samples"]');
      await page.waitForSelector("table.samples");
      assert.match(await page.innerText("table.samples"), /<script>alert\(2\)<\/script>/);
      assert.equal(await page.locator("#view script").count(), 0);
      await page.click('button[data-tab="config"]');
      await page.waitForSelector("table.params");
      assert.match(await page.innerText("table.params"), /<b>tiny<\/b>/);
      assert.equal(await page.locator("#view b").count(), 0);
      assert.deepEqual(dialogs, [], "no alert may run");
    });

    it("lists trace files with a download link and says how to open them in Perfetto", async () => {
      await page.click('button[data-tab="traces"]');
      const link = page.locator("a.trace-link");
      await link.waitFor();
      assert.equal(await link.textContent(), "rank-0.jsonl");
      assert.match(await page.innerText("#view .note"), /ui\.perfetto\.dev.*Open trace file/s);
      const download = await page.request.get(
        new URL((await link.getAttribute("href")) ?? "", dashboard.url).toString(),
      );
      assert.equal(download.status(), 200);
      assert.match(await download.text(), /"ph":"X"/);
    });

    it("shows stream values as a scatter per rank, and system metrics", async () => {
      await page.click('button[data-tab="streams"]');
      await page.waitForSelector(`${card("probe/grad_norm")}[data-drawn]`);
      assert.equal(await page.getAttribute(card("probe/grad_norm"), "data-lines"), "2");
      assert.equal(await page.getAttribute(card("probe/grad_norm"), "data-points"), "40");
      await page.click('button[data-tab="system"]');
      await page.waitForSelector(`${card("gpu/0/util")}[data-drawn]`);
      assert.equal(await page.getAttribute(card("gpu/0/util"), "data-points"), "30");
    });

    it("draws a histogram key at a chosen step and switches to an earlier one", async () => {
      await page.click('button[data-tab="histograms"]');
      await page.waitForSelector(`${card("grad/hist")}[data-mode="heatmap"]`);
      await page.selectOption(`${card("grad/hist")} select.hist-step`, { label: "step 10" });
      await page.waitForSelector(`${card("grad/hist")}[data-step="10"]`);
      assert.equal(await page.getAttribute(card("grad/hist"), "data-buckets"), "5");
      const newest = await canvasOf(page, "grad/hist");
      await page.selectOption(`${card("grad/hist")} select.hist-step`, { label: "step 3" });
      await page.waitForSelector(`${card("grad/hist")}[data-step="3"]`);
      assert.notEqual(await canvasOf(page, "grad/hist"), newest);
    });

    it("extends a live run's chart by asking only for points after its cursor", async () => {
      await page.goto(`${dashboard.url}#run=exp/live&tab=metrics`);
      await page.reload();
      await waitForGrid(page);
      assert.equal(await page.getAttribute(card("loss"), "data-points"), String(3 * 30));
      requests.length = 0;
      live.write({ scalars: trainingPoints(30, 45, liveStart) });
      await dashboard.wrote();
      await page.waitForFunction(
        (sel) => document.querySelector(sel)?.getAttribute("data-points") === String(3 * 45),
        card("loss"),
        { timeout: PAGE_WAIT_MS },
      );
      // Polls ask for many lines at once: [key, rank, cursor] each; every loss line must carry its cursor.
      const lossLines = requests
        .filter((u) => new URL(u).pathname.endsWith("/api/lines"))
        .flatMap(
          (u) => JSON.parse(new URL(u).searchParams.get("lines") ?? "[]") as [string, number | null, string | null][],
        )
        .filter(([key]) => key === "loss");
      assert.ok(lossLines.length >= 3, JSON.stringify(lossLines));
      for (const line of lossLines)
        assert.ok(line[2] !== null, `a live chart re-downloaded its history: ${JSON.stringify(line)}`);

      // A zoom the user dragged stays while new points arrive.
      const box = await page.locator(`${card("lr")} .u-over`).boundingBox();
      assert.ok(box !== null);
      await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
      await page.mouse.down();
      await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, { steps: 5 });
      await page.mouse.up();
      const zoomed = await page.getAttribute(card("lr"), "data-x-range");
      const [zoomMin, zoomMax] = (zoomed ?? "").split(",").map(Number);
      assert.ok(zoomMin !== undefined && zoomMax !== undefined && zoomMin > 0 && zoomMax < 44, `zoomed to ${zoomed}`);
      live.write({ scalars: trainingPoints(45, 50, liveStart) });
      await dashboard.wrote();
      await page.waitForFunction(
        (sel) => document.querySelector(sel)?.getAttribute("data-points") === "50",
        card("lr"),
        { timeout: PAGE_WAIT_MS },
      );
      assert.equal(await page.getAttribute(card("lr"), "data-x-range"), zoomed);
    });

    it("asks for finer points when the user zooms into a downsampled chart", async () => {
      await page.goto(`${dashboard.url}#run=exp/big&tab=metrics`);
      await page.reload();
      await waitForGrid(page);
      const before = Number(await page.getAttribute(card("signal"), "data-points"));
      assert.ok(before > 0 && before < 2000, `first load is thinned to the chart's width: ${before}`);
      const box = await page.locator(`${card("signal")} .u-over`).boundingBox();
      assert.ok(box !== null);
      const y = box.y + box.height / 2;
      await page.mouse.move(box.x + box.width * 0.4, y);
      await page.mouse.down();
      await page.mouse.move(box.x + box.width * 0.5, y, { steps: 5 });
      await page.mouse.up();
      await page.waitForSelector(`${card("signal")}[data-refined="1"]`, { timeout: PAGE_WAIT_MS });
      const inWindowBefore = Number(await page.getAttribute(card("signal"), "data-window-points-before"));
      const inWindow = Number(await page.getAttribute(card("signal"), "data-window-points"));
      assert.ok(
        inWindow > inWindowBefore * 2,
        `zooming in fetched finer points for the window: ${inWindowBefore} → ${inWindow}`,
      );
      assert.ok(Number(await page.getAttribute(card("signal"), "data-points")) > before, "the rest of the line stays");
      mkdirSync(artifacts, { recursive: true });
      await page.locator(card("signal")).screenshot({ path: join(artifacts, "dashboard-zoomed.png") });
    });

    it("refuses traversal in the browser too", async () => {
      for (const path of ["api/keys?run=../../etc", "api/trace?run=exp/base&file=..%2Fmetrics.db"]) {
        const answer = await page.request.get(new URL(path, dashboard.url).toString());
        assert.ok(answer.status() >= 400 && answer.status() < 500, `${path}: ${answer.status()}`);
      }
    });

    it(
      "off loopback, a page without the token gets 401 and the printed URL works",
      { skip: name !== "local root" && "the team server always needs a token (test/server/server.test.ts)" },
      async () => {
        const exposed = await startDashboard({ root, host: "127.0.0.2", port: 0 });
        try {
          const other = await launched.context.newPage();
          const denied = await other.goto(`http://127.0.0.2:${exposed.port}/`);
          assert.equal(denied?.status(), 401);
          const api = await other.request.get(`http://127.0.0.2:${exposed.port}/api/runs`);
          assert.equal(api.status(), 401);
          await other.goto(exposed.url);
          await other.locator('tr[data-run="exp/base"]').waitFor();
          // The token moved into a cookie and out of the address bar.
          assert.doesNotMatch(other.url(), /token=/);
          await other.close();
        } finally {
          await exposed.close();
        }
      },
    );

    it("logged no errors in the page (no CSP violations, no failed requests)", () => {
      assert.deepEqual(
        consoleErrors.filter((e) => !/401/.test(e)),
        [],
      );
    });
  });
}
