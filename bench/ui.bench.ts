/**
 * Dashboard first render: a run with 50 metric keys, opened in Chromium (Debian's, headless, via
 * playwright-core); the app's performance marks time navigation start → every chart drawn.
 * Target: ≤ 1 s for 50 charts.
 */
import { spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { GLOBAL_RANK } from "../src/store/schema.js";
import { StoreWriter } from "../src/store/writer.js";
import { defaultWebDir, startDashboard } from "../src/ui/server.js";
import { tempDir } from "../test/helpers.js";
import { launchChromium } from "../test/ui/browser.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
if (!existsSync(join(defaultWebDir(), "index.html"))) {
  spawnSync(
    process.execPath,
    [join(repo, "node_modules/vite/bin/vite.js"), "build", "--config", "src/ui/web/vite.config.ts"],
    { cwd: repo, stdio: "inherit" },
  );
}

const KEYS = 50;
const ROUNDS = 7;

function seed(root: string, trial: string, pointsPerKey: number, ranks: number[]): void {
  const writer = StoreWriter.open({
    runDir: join(root, "bench", trial),
    role: "controller",
    rank: GLOBAL_RANK,
    rankName: "controller",
    experiment: "bench",
    trial,
  });
  const t0 = Date.now() - pointsPerKey * 1000;
  for (let k = 0; k < KEYS; k++) {
    for (const rank of ranks) {
      const steps = new Float64Array(pointsPerKey);
      const walls = new Float64Array(pointsPerKey);
      const values = new Float64Array(pointsPerKey);
      for (let i = 0; i < pointsPerKey; i++) {
        steps[i] = i;
        walls[i] = t0 + i * 1000;
        values[i] = Math.exp(-i / (pointsPerKey / 4)) + 0.1 * Math.sin(i / 7 + k + rank) + 0.01 * k;
      }
      writer.writeSeries(`group${k % 5}/metric_${String(k).padStart(2, "0")}`, steps, walls, values, { rank });
    }
  }
  writer.finish();
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

const loadBefore = loadavg()[0] ?? NaN;
const root = tempDir("rankscope-bench-ui-");
const cases = [
  { trial: "k50-p2000", label: "50 charts × 1 line × 2,000 points", points: 2000, ranks: [GLOBAL_RANK] },
  {
    trial: "k50-p20000",
    label: "50 charts × 1 line × 20,000 points (downsampled on the server)",
    points: 20_000,
    ranks: [GLOBAL_RANK],
  },
  { trial: "k50-r4", label: "50 charts × 4 per-rank lines × 2,000 points", points: 2000, ranks: [0, 1, 2, 3] },
];
for (const c of cases) seed(root, c.trial, c.points, c.ranks);
const dashboard = await startDashboard({ root, port: 0 });
const browser = await launchChromium();
const rows: string[] = [];
try {
  for (const c of cases) {
    const firstRender: number[] = [];
    const dataToDraw: number[] = [];
    const mainThread: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const page = await browser.context.newPage();
      // The renderer's main-thread busy time (script, style, layout, paint) does not grow with
      // other processes' load the way wall time does on a shared 2-core machine.
      const cdp = await page.context().newCDPSession(page);
      await cdp.send("Performance.enable");
      await page.goto(`${dashboard.url}#run=bench/${c.trial}&tab=metrics`);
      // Charts draw when on screen (issue 14): the mark says how many were on screen at load.
      await page.waitForSelector("body[data-charts-rendered]", { timeout: 60_000 });
      const [total, grid] = await page.evaluate(() => {
        const measure = performance.getEntriesByName("rankscope:first-render")[0];
        const start = performance.getEntriesByName("rankscope:charts-start")[0];
        const end = performance.getEntriesByName("rankscope:charts-rendered")[0];
        return [measure?.duration ?? NaN, (end?.startTime ?? NaN) - (start?.startTime ?? NaN)];
      });
      const { metrics } = await cdp.send("Performance.getMetrics");
      mainThread.push((metrics.find((m) => m.name === "TaskDuration")?.value ?? NaN) * 1000);
      firstRender.push(total);
      dataToDraw.push(grid);
      await page.close();
    }
    rows.push(
      `| ${c.label} | ${firstRender[0]?.toFixed(0)} | ${median(firstRender).toFixed(0)} | ${Math.min(...firstRender).toFixed(0)} | ${median(dataToDraw).toFixed(0)} | ${median(mainThread).toFixed(0)} |`,
    );
  }
} finally {
  await browser.close();
  await dashboard.close();
  rmSync(root, { recursive: true, force: true });
}

process.stdout.write(
  `Chromium, ${ROUNDS} page loads per case (the first with a cold cache); times in ms, target ≤ 1000 from navigation to every chart on screen drawn (charts off screen draw when scrolled to). ` +
    `${cpus().length} CPUs, load average ${loadBefore.toFixed(1)} → ${(loadavg()[0] ?? NaN).toFixed(1)} during the run.\n\n`,
);
process.stdout.write(
  "| case | first load: navigation → charts on screen drawn | median | best | median: keys known → drawn | median renderer main-thread busy |\n|---|---:|---:|---:|---:|---:|\n",
);
process.stdout.write(`${rows.join("\n")}\n`);
