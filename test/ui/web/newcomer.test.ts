/**
 * The dashboard as a newcomer sees it (issue 37 item 5), in Debian's Chromium over runs written by
 * the real store writer and a real controller's logger:
 * - the runs list with ordinary trial names shows its Start and Duration cells and a run's
 *   `1 rank lost` badge whole, inside the table and the sidebar;
 * - the Ranks view of a run whose rank 2 stopped reporting at flush 7 has a colour legend, draws
 *   its lowest figure in a colour that is neither white nor the grey of a missing figure, and
 *   says `2 ranks` at the newest flush (which counted 2), not the window's 3;
 * - a 10-step run's bold (smoothed) line at the default smoothing goes through its last value, and
 *   its card says it was drawn unsmoothed (`not smoothed (10 points)`).
 * Screenshots: test-artifacts/newcomer-runs.png, newcomer-ranks.png, newcomer-ten-steps.png.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { appendRankTiming, emptyTimingColumns } from "../../../src/core/step-timing.js";
import type { RankGroupHandle, RankGroupSnapshot } from "../../../src/pipeline/rank-handle.js";
import { RUN_META_FILE } from "../../../src/run/run-files.js";
import { closeStores } from "../../../src/store/reader.js";
import { startDashboard, type Dashboard } from "../../../src/ui/server.js";
import { tempDir } from "../../helpers.js";
import { launchChromium, type LaunchedBrowser } from "../browser.js";
import { lossAt, openRun } from "../seed.js";
import { card, ensureWebBuilt, shot, writeRun } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

/** A 10-step reward that climbs and falls back at the end: an EMA of 0.6 would draw its last step near 0.73. */
const TEN_STEPS = [0.2, 0.5, 0.7, 0.9, 0.95, 0.9, 0.95, 0.9, 0.85, 0.53];
const NAMES = ["Trainer_0_r0", "Trainer_0_r1", "Trainer_0_r2"];

/** One host's handle of 3 ranks tracing their steps; rank 2 stops reporting from flush 7 on. */
function threeThenTwo(): RankGroupHandle {
  return {
    rankName: "host:node-0",
    memberRanks: () => NAMES,
    init: async () => undefined,
    shutdown: async () => undefined,
    flush: async (step: number): Promise<RankGroupSnapshot> => {
      const timing = emptyTimingColumns();
      const n = step < 7 ? 3 : 2;
      for (let r = 0; r < n; r++) {
        const compute = 100 + r * 20 + (step % 3) * 5;
        appendRankTiming(timing, NAMES[r] ?? "", r, "node-0", 0.5 + r, [
          {
            prefix: "train_step",
            steps: 1,
            totalMs: compute + 10,
            phases: [
              { name: "compute", kind: "phase", count: 1, totalMs: compute },
              { name: "allreduce", kind: "barrier", count: 1, totalMs: 10 },
            ],
          },
        ]);
      }
      return {
        rankName: "host:node-0",
        step,
        states: [],
        droppedKeyRecords: 0,
        group: { reporting: n, missing: n === 3 ? [] : [NAMES[2] ?? ""], timing },
      };
    },
  };
}

async function seed(root: string): Promise<void> {
  const t0 = Date.now() - 3 * 3_600_000;
  for (const [i, trial] of ["20261207-052210", "lr3e-4-bs256", "baseline-seed1"].entries()) {
    const w = openRun(root, "llama-8b-sft", trial);
    w.write({
      scalars: Array.from({ length: 100 }, (_, s) => ({
        key: "train/loss",
        step: s,
        wall: t0 + i * 600_000 + s * 10_000,
        value: lossAt(s, i),
        reduce: "mean" as const,
      })),
    });
    // As `rankscope demo` and W&B users label runs: a group and tags, shown as chips after the trial.
    writeFileSync(
      join(root, "llama-8b-sft", trial, RUN_META_FILE),
      JSON.stringify({ tags: ["sft", "bf16"], group: "lr-sweep" }),
    );
    if (i === 0)
      w.write({
        lostRanks: [{ rank: 3, rankName: "Trainer_0_r3", step: 60, wall: t0 + 600_000, reason: "exited" }],
      });
    w.finish("finished");
  }
  writeRun(root, "short", "ten-steps", 10, { "train/reward": (s) => TEN_STEPS[s] ?? NaN });
  const logger = new MetricLogger({
    processName: "Controller",
    runDir: join(root, "ranks", "three-then-two"),
    experiment: "ranks",
    trial: "three-then-two",
    quiet: true,
  });
  await logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } });
  await logger.registerRank(threeThenTwo());
  for (let step = 0; step < 10; step++) await logger.flush(step);
  await logger.shutdown();
}

/** How far each of the selector's elements reaches past its cell's or the sidebar's visible box (0 when whole). */
function overflowOf(page: Page, selector: string): Promise<number[]> {
  return page.$$eval(selector, (els) =>
    els.map((e) => {
      const box = e.getBoundingClientRect();
      const cell = e.closest("td") ?? e;
      const sidebar = document.querySelector("#sidebar")?.getBoundingClientRect();
      const within = cell.getBoundingClientRect();
      const right = Math.min(within.right, sidebar?.right ?? Infinity);
      return Math.max(0, box.right - right, cell.scrollWidth - cell.clientWidth);
    }),
  );
}

describe("the dashboard as a newcomer sees it, in Chromium", () => {
  let root: string;
  let dashboard: Dashboard;
  let launched: LaunchedBrowser;
  let page: Page;
  const errors: string[] = [];

  before(async () => {
    ensureWebBuilt();
    root = tempDir("rankscope-ui-newcomer-");
    await seed(root);
    closeStores();
    dashboard = await startDashboard({ root, port: 0 });
    launched = await launchChromium();
    page = await launched.context.newPage();
    page.on("pageerror", (e) => errors.push(e.message));
  });

  after(async () => {
    await launched?.close();
    await dashboard?.close();
  });

  it("shows the runs list's Start and Duration and the lost-rank badge whole with ordinary trial names", async () => {
    await page.goto(`${dashboard.url}#run=llama-8b-sft/20261207-052210`);
    await page.waitForSelector('#runs tr[data-run="ranks/three-then-two"]', { timeout: PAGE_WAIT_MS });
    const cells = "#runs tbody tr.run td:nth-child(5), #runs tbody tr.run td:nth-child(6)";
    assert.equal(await page.locator(cells).count(), 10, "a Start and a Duration cell per run");
    assert.deepEqual(await overflowOf(page, cells), new Array(10).fill(0), "no Start or Duration cell is cut");
    assert.deepEqual(await overflowOf(page, "#runs thead th"), new Array(6).fill(0), "no heading is cut");
    const badge = page.locator('#runs tr[data-run="llama-8b-sft/20261207-052210"] .chip.lost');
    assert.equal(await badge.innerText(), "1 rank lost");
    assert.deepEqual(await overflowOf(page, "#runs .chip.lost"), [0], "the badge is whole");
    const badgeBox = await badge.boundingBox();
    const rowBox = await page.locator('#runs tr[data-run="llama-8b-sft/20261207-052210"]').boundingBox();
    assert.ok(badgeBox !== null && rowBox !== null);
    assert.ok(
      badgeBox.y >= rowBox.y && badgeBox.y + badgeBox.height <= rowBox.y + rowBox.height + 0.5,
      "inside its row",
    );
    const namesCut = await page.$$eval("#runs tbody tr.run td:nth-child(3)", (cells) =>
      cells.map((td) => {
        const range = document.createRange();
        range.selectNodeContents(td.firstChild ?? td);
        return Math.max(0, range.getBoundingClientRect().right - td.getBoundingClientRect().right);
      }),
    );
    assert.deepEqual(namesCut, new Array(5).fill(0), "ordinary trial names are whole (their chips may end in …)");
    await shot(page, "newcomer-runs.png", "#sidebar");
  });

  it("gives the Ranks view a legend, a lowest colour apart from white and missing, and the flush's own rank count", async () => {
    await page.goto(`${dashboard.url}#run=ranks/three-then-two&tab=ranks`);
    await page.waitForSelector("#ranks-body[data-drawn]", { timeout: PAGE_WAIT_MS });
    assert.match(await page.locator("#ranks-summary").innerText(), /^2 ranks \(3 over the heatmap's flushes\) · /);
    const legend = await page.locator("#ranks-legend").innerText();
    assert.match(legend, /step time: ≤ [\d.]+ ms/);
    assert.match(legend, /≥ [\d.]+ ms/);
    assert.match(legend, /no figure/);
    // Rank 0 (the top row) at flush 0 is the lowest step time; rank 2 (the bottom row) has none at flush 9.
    const [lowest, missing] = await page.$eval("#ranks-heatmap", (canvas) => {
      if (!(canvas instanceof HTMLCanvasElement)) return [];
      const ctx = canvas.getContext("2d");
      const rows = Number(canvas.dataset["rows"]);
      const cols = Number(canvas.dataset["cols"]);
      return [
        [0, 0],
        [cols - 1, rows - 1],
      ].map(([col = 0, row = 0]) => [
        ...(ctx?.getImageData(
          Math.floor(((col + 0.5) * canvas.width) / cols),
          Math.floor(((row + 0.5) * canvas.height) / rows),
          1,
          1,
        ).data ?? []),
      ]);
    });
    const swatch = await page.$eval(".legend-missing", (e) => getComputedStyle(e).backgroundColor);
    assert.equal(`rgb(${missing?.slice(0, 3).join(", ")})`, swatch, "a missing figure is the legend's grey");
    assert.ok(lowest !== undefined && missing !== undefined);
    const distance = (a: number[], b: number[]): number =>
      Math.max(...[0, 1, 2].map((k) => Math.abs((a[k] ?? 0) - (b[k] ?? 0))));
    assert.ok(distance(lowest, [255, 255, 255]) > 60, `the lowest figure is not white: ${lowest.join(",")}`);
    assert.ok(distance(lowest, missing) > 60, `the lowest figure is not the missing grey: ${lowest.join(",")}`);
    await shot(page, "newcomer-ranks.png");
    assert.deepEqual(errors, []);
  });

  it("draws a 10-step run's smoothed line through its values at the default smoothing", async () => {
    await page.goto(`${dashboard.url}#run=short/ten-steps&tab=metrics`);
    await page.reload();
    const reward = card("train/reward");
    await page.waitForSelector(`${reward}[data-drawn]`, { timeout: PAGE_WAIT_MS });
    assert.equal(await page.locator("#smoothing-value").innerText(), "0.60", "the default smoothing");
    assert.equal(
      await page.locator(`${reward} .smoothing-note`).innerText(),
      "not smoothed (10 points)",
      "the card says the weight it drew with",
    );
    const over = await page.locator(`${reward} .u-over`).boundingBox();
    assert.ok(over !== null);
    await page.mouse.move(over.x + over.width - 1, over.y + over.height / 2);
    const row = page.locator(`${reward} .tooltip .tip-row`).first();
    await row.waitFor({ timeout: PAGE_WAIT_MS });
    const text = await row.innerText();
    assert.match(text, /0\.53/, text);
    assert.doesNotMatch(text, /smoothed (?!0\.53)/, `the bold line is drawn at the value: ${text}`);
    await shot(page, "newcomer-ten-steps.png");
    await page.mouse.move(0, 0);
    assert.deepEqual(errors, []);
  });
});
