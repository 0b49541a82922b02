/**
 * The Ranks view's answer (`ranksView`, what `/api/ranks` sends every source's way): rows per rank
 * up to the bound, per host past it — each cell the host's most straggling rank (largest step time
 * and lateness, smallest wait) — missing figures as null, hosts in natural order, and the newest
 * report's slow and chronic ranks.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { RankTimingWindow } from "../../src/store/read-types.js";
import type { StragglerReport } from "../../src/core/straggler-report.js";
import { emptyRanksView, ranksView } from "../../src/ui/ranks-view.js";

const report = (step: number, slow: string[]): StragglerReport => ({
  step,
  ranks: 4,
  tracer: "train_step",
  medianStepMs: 100,
  skew: 2,
  medianWaitMs: 50,
  slowest: slow.map((rankName) => ({
    rank: 3,
    rankName,
    host: "node-10",
    stepMs: 200,
    latenessMs: 1,
    waitMs: 0,
    causedWaitMs: 50,
    by: ["step", "wait"],
    phase: null,
    chronic: true,
  })),
  chronic: [],
});

// 4 ranks on two hosts (node-2 and node-10), 2 flushes; rank 3 (node-10) slow, rank 1 without figures at the first flush.
const window: RankTimingWindow = {
  ranks: [
    { rank: 0, rankName: "T_r0", host: "node-2" },
    { rank: 1, rankName: "T_r1", host: "node-2" },
    { rank: 2, rankName: "T_r2", host: "node-10" },
    { rank: 3, rankName: "T_r3", host: "node-10" },
  ],
  steps: [5, 6],
  walls: [1, 2],
  stepMs: [100, 101, NaN, 99, 100, 100, 200, 210],
  latenessMs: [0, 0.1, NaN, 0, 0.2, 0, 3, 4],
  waitMs: [50, 49, NaN, 51, 50, 50, 0, 1],
  reports: [report(5, []), report(6, ["T_r3"])],
};

test("up to the bound, one row per rank, missing figures null, the newest report's slow ranks", () => {
  const view = ranksView(window);
  assert.equal(view.rowsAre, "rank");
  assert.deepEqual(
    view.rows.map((r) => [r.label, r.host, r.rank]),
    [
      ["T_r0", "node-2", 0],
      ["T_r1", "node-2", 1],
      ["T_r2", "node-10", 2],
      ["T_r3", "node-10", 3],
    ],
  );
  assert.deepEqual(view.stepMs, [100, 101, null, 99, 100, 100, 200, 210]);
  assert.deepEqual(
    view.slowest.map((s) => [s.rankName, s.host, s.chronic]),
    [["T_r3", "node-10", true]],
  );
  assert.deepEqual(
    [view.skew, view.medianStepMs, view.tracer, view.totalRanks, view.available],
    [2, 100, "train_step", 4, true],
  );
});

test("past the bound, one row per host: the largest step time and lateness, the smallest wait", () => {
  const view = ranksView(window, 2);
  assert.equal(view.rowsAre, "host");
  assert.deepEqual(
    view.rows.map((r) => [r.label, r.ranks, r.rank]),
    [
      ["node-2", 2, null],
      ["node-10", 2, null],
    ],
    "natural order: node-2 before node-10",
  );
  assert.deepEqual(view.stepMs, [100, 101, 200, 210]);
  assert.deepEqual(view.latenessMs, [0, 0.1, 3, 4]);
  assert.deepEqual(view.waitMs, [50, 49, 0, 1]);
  assert.equal(view.totalRanks, 4);
});

test("a source without per-rank timings says why", () => {
  assert.deepEqual(
    [emptyRanksView("not synced").available, emptyRanksView("not synced").reason],
    [false, "not synced"],
  );
  assert.deepEqual(
    ranksView({ ranks: [], steps: [], walls: [], stepMs: [], latenessMs: [], waitMs: [], reports: [] }),
    emptyRanksView(),
  );
});

test("each flush's rank count is the ranks that flush counted, not every rank of the window", () => {
  // Three ranks at flush 7, then rank 2 gone: flushes 8 and 9 counted two.
  const three = (step: number, ranks: number): StragglerReport => ({ ...report(step, []), ranks });
  const lost: RankTimingWindow = {
    ranks: [
      { rank: 0, rankName: "T_r0", host: "node-0" },
      { rank: 1, rankName: "T_r1", host: "node-0" },
      { rank: 2, rankName: "T_r2", host: "node-0" },
    ],
    steps: [7, 8, 9],
    walls: [1, 2, 3],
    stepMs: [100, 100, 100, 110, 110, 110, 120, NaN, NaN],
    latenessMs: [0, 0, 0, 1, 1, 1, 2, NaN, NaN],
    waitMs: [10, 10, 10, 10, 10, 10, 10, NaN, NaN],
    reports: [three(7, 3), three(8, 2), three(9, 2)],
  };
  const view = ranksView(lost);
  assert.equal(view.totalRanks, 3);
  assert.deepEqual(view.flushRanks, [3, 2, 2]);
  // A window without its reports: the ranks with a figure at each flush.
  assert.deepEqual(ranksView({ ...lost, reports: [] }).flushRanks, [3, 2, 2]);
  assert.deepEqual(emptyRanksView().flushRanks, []);
});
