/**
 * `rankscope report` at issue 39's size: 20 charts × 10 runs × 10,000 steps (10 runs overlaid in
 * each chart), written by the store writer. Measured: the time to write the report (reading the
 * store, downsampling, inlining, gzip), its size (target ≤ 2 MB), and in Chromium (Debian's,
 * headless, every request refused) navigation of the file → every chart on screen drawn (the app's
 * `rankscope:first-render` measure; target ≤ 1 s), the median of 3 opens, and the requests made
 * (must be 0); beside it, the same view in the live dashboard (`rankscope ui` over the root), the
 * same measure, at the same machine load.
 *
 * Run: `npm run bench -- report` (needs the web app built: `npm run build`).
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { GLOBAL_RANK } from "../src/store/schema.js";
import { StoreWriter } from "../src/store/writer.js";
import { collectReport, reportHtml } from "../src/ui/report.js";
import { DashboardApi } from "../src/ui/routes.js";
import { startDashboard } from "../src/ui/server.js";
import { createStoreSource } from "../src/ui/store-source.js";
import { defaultWebDir } from "../src/ui/web-dir.js";
import { tempDir } from "../test/helpers.js";
import { launchChromium } from "../test/ui/browser.js";
import { median, printTable } from "./harness.js";

const RUNS = 10;
const KEYS = 20;
const STEPS = 10_000;
const ROUNDS = 3;

function seedRun(root: string, trial: string, r: number): void {
  const w = StoreWriter.open({
    runDir: join(root, "sweep", trial),
    role: "controller",
    rank: GLOBAL_RANK,
    rankName: "controller",
    experiment: "sweep",
    trial,
  });
  w.write({ hyperparams: { lr: 0.001 * (r + 1), seed: r } });
  const t0 = Date.now() - STEPS * 1000;
  const s = Float64Array.from({ length: STEPS }, (_, i) => i);
  const walls = s.map((i) => t0 + i * 1000);
  for (let k = 0; k < KEYS; k++) {
    // A noisy decaying curve: full-precision doubles, as a loss is.
    const values = s.map((i) => Math.exp(-i / 2500) + 0.1 * Math.sin(i * 12.9898 + k * 78.233 + r) + 0.01 * k);
    w.writeSeries(`train/metric_${String(k).padStart(2, "0")}`, s, walls, values);
  }
  w.finish();
}

const loadBefore = loadavg()[0] ?? NaN;
const root = tempDir("rankscope-bench-report-");
const runs = Array.from({ length: RUNS }, (_, r) => `run${String(r).padStart(2, "0")}`);
runs.forEach((trial, r) => seedRun(root, trial, r));

const source = createStoreSource(root);
await source.index.update();
const webDir = defaultWebDir();
const writeMs: number[] = [];
let html = "";
for (let round = 0; round < ROUNDS; round++) {
  const start = performance.now();
  const data = await collectReport(source, new DashboardApi(source, "bench", webDir), {
    runs: runs.map((t) => `sweep/${t}`),
    webDir,
    version: "bench",
  });
  html = reportHtml(data, { webDir });
  writeMs.push(performance.now() - start);
}
await source.close?.();
const file = join(root, "report.html");
writeFileSync(file, html);

const browser = await launchChromium();
const dashboard = await startDashboard({ root, port: 0 });
const openMs: number[] = [];
const dashboardMs: number[] = [];
const asked: string[] = [];
let drawn = 0;

/** Navigation → every chart on screen drawn (the app's `rankscope:first-render`), and how many. */
async function firstRender(url: string, offline: boolean): Promise<{ ms: number; drawn: number }> {
  const page = await browser.context.newPage();
  if (offline)
    await page.route("**/*", (route) => {
      const asking = route.request().url();
      if (asking === url) return route.continue();
      asked.push(asking);
      return route.abort();
    });
  await page.goto(url);
  await page.waitForSelector("body[data-charts-rendered]", { state: "attached", timeout: 60_000 });
  const result = await page.evaluate(() => ({
    ms: performance.getEntriesByName("rankscope:first-render")[0]?.duration ?? NaN,
    drawn: Number(document.body.dataset["chartsRendered"]),
  }));
  await page.close();
  return result;
}

try {
  const view = runs.map((t) => `run=sweep%2F${t}`).join("&");
  for (let round = 0; round < ROUNDS; round++) {
    const report = await firstRender(`file://${file}`, true);
    openMs.push(report.ms);
    drawn = report.drawn;
    dashboardMs.push((await firstRender(`${dashboard.url}#tab=metrics&${view}`, false)).ms);
  }
} finally {
  await browser.close();
  await dashboard.close();
}

printTable(
  ["report", "value", "target"],
  [
    ["runs × charts × steps", `${RUNS} × ${KEYS} × ${STEPS.toLocaleString("en-US")}`, ""],
    ["file size", `${(Buffer.byteLength(html) / 1e6).toFixed(2)} MB`, "≤ 2 MB"],
    ["write (read store, downsample, inline, gzip), median", `${median(writeMs).toFixed(0)} ms`, ""],
    ["open → charts on screen drawn, median of 3", `${median(openMs).toFixed(0)} ms (${drawn} charts)`, "≤ 1 s"],
    ["the same view in the live dashboard, median of 3", `${median(dashboardMs).toFixed(0)} ms`, ""],
    ["requests made", String(asked.length), "0"],
  ],
);
console.log(`load average ${loadBefore.toFixed(1)} before, ${(loadavg()[0] ?? NaN).toFixed(1)} after`);
