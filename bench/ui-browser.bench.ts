/**
 * The dashboard in Chromium (Debian's, headless, via playwright-core) at the sizes of issue 14:
 *
 * 1. a run of 1,000 keys × 20,000 steps: navigation → every chart on screen drawn (the app's
 *    `rankscope:first-render` measure), how many of the 1,000 cards loaded and hold a canvas, and
 *    the page's JS heap after a GC (target ≤ 1 s, only on-screen charts, ≤ 300 MB);
 * 2. 50 runs × 20 keys overlaid (50 lines per chart): navigation → charts on screen drawn
 *    (target ≤ 2 s);
 * 3. a live run of 200 keys written at 10 steps/s, watched: the page's JS heap over the watch
 *    (after a GC) and the bytes each poll downloads per new point (target: bounded, ≤ 100 MB;
 *    polls carry new points only). Time is compressed: the writer writes 10 steps every
 *    `1000 / SPEEDUP` ms, so a watch of WATCH_S seconds covers SPEEDUP × WATCH_S seconds of the
 *    run (what a user watching that long would have received), while the page polls every second
 *    as it always does.
 *
 * Run: `npm run bench -- ui-browser`.
 */
import { spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
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

const BIG_KEYS = 1000;
const BIG_STEPS = 20_000;
const OVERLAY_RUNS = 50;
const OVERLAY_KEYS = 20;
const OVERLAY_STEPS = 2000;
const LIVE_KEYS = 200;
const SPEEDUP = Number(process.env["RANKSCOPE_BENCH_SPEEDUP"] ?? 30);
const WATCH_S = Number(process.env["RANKSCOPE_BENCH_WATCH_S"] ?? 60);
const ROUNDS = 3;

function writer(root: string, experiment: string, trial: string): StoreWriter {
  return StoreWriter.open({
    runDir: join(root, experiment, trial),
    role: "controller",
    rank: GLOBAL_RANK,
    rankName: "controller",
    experiment,
    trial,
  });
}

function seedRun(root: string, experiment: string, trial: string, keys: number, steps: number, offset = 0): void {
  const w = writer(root, experiment, trial);
  const t0 = Date.now() - steps * 1000;
  const s = Float64Array.from({ length: steps }, (_, i) => i);
  const walls = s.map((i) => t0 + i * 1000);
  for (let k = 0; k < keys; k++) {
    const values = s.map(
      (i) => Math.exp(-i / (steps / 4)) + 0.1 * Math.sin(i / 7 + k + offset) + 0.01 * k + 0.05 * offset,
    );
    w.writeSeries(`group${String(k % 20).padStart(2, "0")}/metric_${String(k).padStart(4, "0")}`, s, walls, values);
  }
  w.finish();
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

const mb = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);

/** The page's JS heap in use after a full GC, bytes. */
async function heapAfterGc(page: Page): Promise<number> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("HeapProfiler.collectGarbage");
  await cdp.send("Performance.enable");
  const { metrics } = await cdp.send("Performance.getMetrics");
  await cdp.detach();
  return metrics.find((m) => m.name === "JSHeapUsedSize")?.value ?? NaN;
}

/** Load a view and time navigation → charts on screen drawn; also count cards, loaded cards and canvases. */
async function load(
  page: Page,
  url: string,
): Promise<{ ms: number; drawn: number; cards: number; loaded: number; canvases: number }> {
  await page.goto(url);
  await page.waitForSelector("body[data-charts-rendered]", { timeout: 120_000 });
  return page.evaluate(() => ({
    ms: performance.getEntriesByName("rankscope:first-render")[0]?.duration ?? NaN,
    drawn: Number(document.body.dataset["chartsRendered"]),
    cards: document.querySelectorAll(".chart").length,
    loaded: document.querySelectorAll('.chart[data-loaded="1"]').length,
    canvases: document.querySelectorAll(".chart canvas").length,
  }));
}

const loadBefore = loadavg()[0] ?? NaN;
const root = tempDir("rankscope-bench-ui-browser-");
const seedStart = performance.now();
seedRun(root, "bench", "k1000", BIG_KEYS, BIG_STEPS);
for (let r = 0; r < OVERLAY_RUNS; r++)
  seedRun(root, "overlay", `run${String(r).padStart(2, "0")}`, OVERLAY_KEYS, OVERLAY_STEPS, r);
const seedS = (performance.now() - seedStart) / 1000;
const dashboard = await startDashboard({ root, port: 0 });
const browser = await launchChromium();
const out: string[] = [];
try {
  // 1. 1,000 keys × 20,000 steps.
  const big: Awaited<ReturnType<typeof load>>[] = [];
  const bigHeap: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const page = await browser.context.newPage();
    big.push(await load(page, `${dashboard.url}#run=bench/k1000&tab=metrics`));
    bigHeap.push(await heapAfterGc(page));
    // Scroll through the whole grid: cards load as they pass and drop their canvas after.
    if (round === 0) {
      const scrolled = await page.evaluate(async () => {
        for (let y = 0; y < document.documentElement.scrollHeight; y += 2000) {
          window.scrollTo(0, y);
          await new Promise((r) => setTimeout(r, 30));
        }
        await new Promise((r) => setTimeout(r, 2000));
        return {
          loaded: document.querySelectorAll('.chart[data-loaded="1"]').length,
          canvases: document.querySelectorAll(".chart canvas").length,
        };
      });
      bigHeap.push(await heapAfterGc(page));
      out.push(
        `after scrolling the whole grid: ${scrolled.loaded} cards loaded, ${scrolled.canvases} canvases, heap ${mb(bigHeap[bigHeap.length - 1] ?? NaN)} MB`,
      );
    }
    await page.close();
  }
  const b0 = big[0];
  // 2. 50 runs × 20 keys overlaid.
  const runs = Array.from({ length: OVERLAY_RUNS }, (_, r) => `run=overlay%2Frun${String(r).padStart(2, "0")}`).join(
    "&",
  );
  const overlay: Awaited<ReturnType<typeof load>>[] = [];
  let overlayHeap = NaN;
  for (let round = 0; round < ROUNDS; round++) {
    const page = await browser.context.newPage();
    overlay.push(await load(page, `${dashboard.url}#${runs}&tab=metrics`));
    if (round === ROUNDS - 1) overlayHeap = await heapAfterGc(page);
    await page.close();
  }

  // 3. A live run of 200 keys at 10 steps/s, watched.
  const live = writer(root, "live", "watch");
  const t0 = Date.now();
  let step = 0;
  const writeSteps = (n: number): void => {
    const s = Float64Array.from({ length: n }, (_, i) => step + i);
    const walls = s.map((i) => t0 + i * 100);
    for (let k = 0; k < LIVE_KEYS; k++)
      live.writeSeries(
        `group${String(k % 20).padStart(2, "0")}/live_${String(k).padStart(3, "0")}`,
        s,
        walls,
        s.map((i) => Math.sin(i / 50 + k)),
      );
    step += n;
  };
  writeSteps(10);
  const page = await browser.context.newPage();
  const polls: { url: string; bytes: number }[] = [];
  page.on("response", (response) => {
    const url = response.url();
    if (
      !url.includes("/api/lines") ||
      !JSON.parse(new URL(url).searchParams.get("lines") ?? "[]").some((l: unknown[]) => l[2] !== null)
    )
      return;
    void response
      .body()
      .then((body) => polls.push({ url, bytes: body.length }))
      .catch(() => undefined);
  });
  await load(page, `${dashboard.url}#run=live/watch&tab=metrics`);
  const heapSeries: [number, number][] = [[0, await heapAfterGc(page)]];
  const started = Date.now();
  const timer = setInterval(() => writeSteps(10), 1000 / SPEEDUP);
  while (Date.now() - started < WATCH_S * 1000) {
    await new Promise((r) => setTimeout(r, 10_000));
    heapSeries.push([step / 10, await heapAfterGc(page)]);
  }
  clearInterval(timer);
  const onScreen = await page.evaluate(() => document.querySelectorAll('.chart[data-onscreen="1"]').length);
  const pointsHeld = await page.evaluate(() =>
    [...document.querySelectorAll('.chart[data-loaded="1"]')].reduce(
      (n, c) => n + Number(c.getAttribute("data-points") ?? 0),
      0,
    ),
  );
  live.finish();
  await page.close();
  const pollBytes = polls.map((p) => p.bytes);
  const pollLines = polls.map(
    (p) => (JSON.parse(new URL(p.url).searchParams.get("lines") ?? "[]") as unknown[]).length,
  );
  const newPointsPerPoll = SPEEDUP * 10 * (pollLines.length > 0 ? median(pollLines) : 0);

  process.stdout.write(
    `Chromium headless (software raster), viewport 1400×900; ${cpus().length} CPUs, load average ${loadBefore.toFixed(1)} → ${(loadavg()[0] ?? NaN).toFixed(1)}. ` +
      `Seeding ${BIG_KEYS}×${BIG_STEPS.toLocaleString("en")} + ${OVERLAY_RUNS}×${OVERLAY_KEYS}×${OVERLAY_STEPS} points took ${seedS.toFixed(0)} s. ${ROUNDS} page loads per case (the first with a cold cache).\n\n`,
  );
  process.stdout.write(
    "| case | navigation → charts on screen drawn (first / median) | charts drawn | cards loaded of all | canvases | JS heap after GC | target |\n|---|---:|---:|---:|---:|---:|---|\n",
  );
  process.stdout.write(
    `| 1 run × 1,000 keys × 20,000 steps | ${b0?.ms.toFixed(0)} / ${median(big.map((b) => b.ms)).toFixed(0)} ms | ${b0?.drawn} | ${b0?.loaded} of ${b0?.cards} | ${b0?.canvases} | ${mb(median(bigHeap.slice(0, 1).concat(bigHeap.slice(2))))} MB | ≤ 1 s, ≤ 300 MB |\n`,
  );
  const o0 = overlay[0];
  process.stdout.write(
    `| 50 runs × 20 keys overlaid (50 lines per chart) | ${o0?.ms.toFixed(0)} / ${median(overlay.map((b) => b.ms)).toFixed(0)} ms | ${o0?.drawn} | ${o0?.loaded} of ${o0?.cards} | ${o0?.canvases} | ${mb(overlayHeap)} MB | ≤ 2 s |\n\n`,
  );
  for (const line of out) process.stdout.write(`- 1,000 keys, ${line}\n`);
  process.stdout.write(
    `\nLive: ${LIVE_KEYS} keys at 10 steps/s, watched ${WATCH_S} s at ${SPEEDUP}× speed (= ${((WATCH_S * SPEEDUP) / 60).toFixed(0)} min of the run, ${step} steps written per key); ${onScreen} charts on screen, ${pointsHeld} points held by loaded charts at the end.\n\n`,
  );
  process.stdout.write("| run time watched (s at 10 steps/s) | JS heap after GC |\n|---:|---:|\n");
  for (const [t, h] of heapSeries) process.stdout.write(`| ${t.toFixed(0)} | ${mb(h)} MB |\n`);
  process.stdout.write(
    `\nPolls: ${polls.length} (incremental, each with a cursor per line), median ${median(pollBytes)} bytes for ${median(pollLines)} lines (~${newPointsPerPoll} new points per poll at this speed: ${(median(pollBytes) / Math.max(1, newPointsPerPoll)).toFixed(1)} bytes per new point), largest ${Math.max(...pollBytes)} bytes.\n`,
  );
} finally {
  await browser.close();
  await dashboard.close();
  rmSync(root, { recursive: true, force: true });
}
