/**
 * The attribution itself, on timings built by hand (no clock): which ranks are named on which
 * measure, the bar they must pass, the chronic window, the Tracer analysed, the phase hint, the
 * internal keys, and the options' checks.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StragglerTracker, stragglerStates } from "../../../src/controller/stragglers.js";
import { DEFAULT_STRAGGLER_OPTIONS, resolveStragglerOptions } from "../../../src/controller/straggler-options.js";
import {
  appendRankTiming,
  emptyTimingColumns,
  type TimingColumns,
  type TracerTiming,
} from "../../../src/core/step-timing.js";

interface Rank {
  readonly stepMs?: number;
  readonly arrivalMs?: number;
  readonly waitMs?: number;
  readonly computeMs?: number;
  readonly steps?: number;
}

/** One flush's columns: rank i is `R{i}` on host `h{i % 2}`, one `train_step` run (or `steps`) of `stepMs`. */
function flush(ranks: readonly Rank[]): TimingColumns {
  const columns = emptyTimingColumns();
  ranks.forEach((r, i) => {
    const steps = r.steps ?? 1;
    const phases: TracerTiming["phases"][number][] = [];
    if (r.computeMs !== undefined)
      phases.push({ name: "compute", kind: "phase", count: steps, totalMs: r.computeMs * steps });
    if (r.waitMs !== undefined)
      phases.push({ name: "allreduce", kind: "barrier", count: steps, totalMs: r.waitMs * steps });
    const tracers: TracerTiming[] =
      r.stepMs === undefined ? [] : [{ prefix: "train_step", steps, totalMs: r.stepMs * steps, phases }];
    appendRankTiming(columns, `R${i}`, i, `h${i % 2}`, r.arrivalMs ?? 1, tracers);
  });
  return columns;
}

const healthy = (n: number, stepMs = 100): Rank[] =>
  Array.from({ length: n }, (_, i) => ({ stepMs: stepMs + (i % 3), arrivalMs: 1 + (i % 2) * 0.2, computeMs: 60 }));

describe("straggler attribution", () => {
  it("names nobody when every rank is alike, and the slow one when one is", () => {
    const tracker = new StragglerTracker();
    const even = tracker.observe(0, 0, flush(healthy(8)));
    assert.deepEqual(even?.report.slowest, []);
    assert.equal(even?.report.tracer, "train_step");
    const ranks = healthy(8);
    ranks[5] = { stepMs: 180, arrivalMs: 1, computeMs: 140 };
    const one = tracker.observe(1, 0, flush(ranks));
    assert.deepEqual(
      one?.report.slowest.map((s) => [s.rankName, s.rank, s.host, s.by, s.phase?.name, s.chronic]),
      [["R5", 5, "h1", ["step"], "compute", false]],
    );
    assert.ok(Math.abs((one?.report.skew ?? 0) - 180 / 101) < 1e-9, "skew is the slowest step over the median step");
  });

  it("a rank must pass every bar: minExcessMs, tolerance × the median step, and the ranks' own spread", () => {
    const tracker = new StragglerTracker({ ...DEFAULT_STRAGGLER_OPTIONS, tolerance: 0.25, minExcessMs: 20 });
    const ranks = healthy(8);
    ranks[2] = { stepMs: 120, arrivalMs: 1 }; // +19 ms: under the 20 ms floor, and under 25 % of a 101 ms step
    ranks[3] = { stepMs: 124, arrivalMs: 1 }; // +23 ms: over the floor, under 25 % of the median step
    assert.deepEqual(tracker.observe(0, 0, flush(ranks))?.report.slowest, []);
    // Ranks that vary a lot anyway: 40 ms over the median is within their spread.
    const noisy = Array.from({ length: 8 }, (_, i) => ({ stepMs: 100 + (i % 2 === 0 ? -30 : 30), arrivalMs: 1 }));
    noisy[7] = { stepMs: 170, arrivalMs: 1 };
    assert.deepEqual(new StragglerTracker().observe(0, 0, flush(noisy))?.report.slowest, []);
  });

  it("names a late answer, and the rank the others waited for at a barrier", () => {
    const tracker = new StragglerTracker();
    const late = healthy(6);
    late[1] = { stepMs: 101, arrivalMs: 90, computeMs: 60 };
    assert.deepEqual(
      tracker.observe(0, 0, flush(late))?.report.slowest.map((s) => [s.rankName, s.by]),
      [["R1", ["lateness"]]],
    );
    // All-reduce: every step as long; R4 computed longest, so it waited least and the others waited for it.
    const reduce = Array.from({ length: 6 }, () => ({ stepMs: 200, waitMs: 90, computeMs: 110, arrivalMs: 1 }));
    reduce[4] = { stepMs: 200, waitMs: 2, computeMs: 198, arrivalMs: 1 };
    const report = tracker.observe(1, 0, flush(reduce))?.report;
    assert.deepEqual(
      report?.slowest.map((s) => [s.rankName, s.by, s.causedWaitMs, s.phase?.name]),
      [["R4", ["wait"], 88, "compute"]],
    );
    assert.equal(report?.medianWaitMs, 90);
  });

  it("names at most topK ranks per measure, the slowest first", () => {
    const ranks = healthy(12);
    for (const [i, ms] of [
      [1, 300],
      [4, 500],
      [7, 400],
      [9, 350],
    ] as const)
      ranks[i] = { stepMs: ms, arrivalMs: 1 };
    const report = new StragglerTracker({ ...DEFAULT_STRAGGLER_OPTIONS, topK: 3 }).observe(0, 0, flush(ranks))?.report;
    assert.deepEqual(
      report?.slowest.map((s) => s.rankName),
      ["R4", "R7", "R9"],
    );
  });

  it("compares nobody with fewer than three ranks, and reports nothing without timings", () => {
    const tracker = new StragglerTracker();
    assert.deepEqual(tracker.observe(0, 0, flush([{ stepMs: 100 }, { stepMs: 900 }]))?.report.slowest, []);
    assert.equal(tracker.observe(1, 0, emptyTimingColumns()), undefined);
  });

  it("is chronic when named in at least half of the window, transient otherwise; the window forgets", () => {
    const tracker = new StragglerTracker({ ...DEFAULT_STRAGGLER_OPTIONS, chronicWindow: 4 });
    const slowAt = (flushIndex: number): Rank[] => {
      const ranks = healthy(6);
      ranks[0] = { stepMs: 400, arrivalMs: 1 }; // every flush
      if (flushIndex % 4 === 1) ranks[3] = { stepMs: 400, arrivalMs: 1 }; // one flush in four
      return ranks;
    };
    const chronic: string[][] = [];
    for (let f = 0; f < 8; f++)
      chronic.push(
        tracker
          .observe(f, 0, flush(slowAt(f)))
          ?.report.chronic.map((c) => `${c.rankName}:${c.slowFlushes}/${c.window}`) ?? [],
      );
    // Half of a window of 4 is 2 flushes: R0 from its second; R3 (1 in 4) never.
    assert.deepEqual(chronic, [[], ["R0:2/4"], ["R0:3/4"], ["R0:4/4"], ["R0:4/4"], ["R0:4/4"], ["R0:4/4"], ["R0:4/4"]]);
    // R0 recovers: still chronic while the window remembers two slow flushes, then not.
    const after: number[] = [];
    for (let f = 8; f < 12; f++) after.push(tracker.observe(f, 0, flush(healthy(6)))?.report.chronic.length ?? -1);
    assert.deepEqual(after, [1, 1, 0, 0]);
  });

  it("analyses the Tracer the ranks spent the most time in, or the one named", () => {
    const columns = emptyTimingColumns();
    for (let i = 0; i < 4; i++) {
      appendRankTiming(columns, `R${i}`, i, "h", 1, [
        { prefix: "reward_fn", steps: 10, totalMs: 10 * (i === 2 ? 90 : 5), phases: [] },
        { prefix: "train_step", steps: 1, totalMs: 1000, phases: [] },
      ]);
    }
    assert.equal(new StragglerTracker().observe(0, 0, columns)?.report.tracer, "train_step");
    const named = new StragglerTracker({ ...DEFAULT_STRAGGLER_OPTIONS, tracer: "reward_fn" }).observe(
      0,
      0,
      columns,
    )?.report;
    assert.equal(named?.tracer, "reward_fn");
    assert.deepEqual(
      named?.slowest.map((s) => s.rankName),
      ["R2"],
    );
  });

  it("reports under rankscope/stragglers/ with each named rank's name and host", () => {
    const ranks = healthy(6);
    ranks[1] = { stepMs: 400, arrivalMs: 1 };
    const tracker = new StragglerTracker({ ...DEFAULT_STRAGGLER_OPTIONS, chronicWindow: 1 });
    const flushed = tracker.observe(0, 0, flush(ranks));
    assert.ok(flushed !== undefined);
    assert.deepEqual(
      stragglerStates(flushed.report).map((s) => s.key),
      [
        "rankscope/stragglers/skew",
        "rankscope/stragglers/median_step_ms",
        "rankscope/stragglers/slow_ranks",
        "rankscope/stragglers/chronic_ranks",
        "rankscope/stragglers/step_ms/R1@h1",
        "rankscope/stragglers/chronic/R1@h1",
      ],
    );
    assert.deepEqual([...flushed.record.rankNames], ["R0", "R1", "R2", "R3", "R4", "R5"]);
    assert.equal(flushed.record.stepMs[1], 400);
  });

  it("checks its options and says what is valid", () => {
    assert.equal(resolveStragglerOptions(false), null);
    assert.deepEqual(resolveStragglerOptions(undefined), DEFAULT_STRAGGLER_OPTIONS);
    assert.deepEqual(resolveStragglerOptions({ topK: 5, tracer: "train" }), {
      ...DEFAULT_STRAGGLER_OPTIONS,
      topK: 5,
      tracer: "train",
    });
    assert.throws(
      () => resolveStragglerOptions({ topK: 0 }),
      /stragglers\.topK must be an integer from 1 to 100, got 0/,
    );
    assert.throws(
      () => resolveStragglerOptions({ chronicWindow: 31 }),
      /stragglers\.chronicWindow must be an integer from 1 to 30/,
    );
    assert.throws(
      () => resolveStragglerOptions({ tolerance: -1 }),
      /stragglers\.tolerance must be a number from 0 to 100/,
    );
    assert.throws(() => resolveStragglerOptions({ windows: 3 }), /windows/);
    assert.throws(() => resolveStragglerOptions("on"), /stragglers must be false or an object of options/);
  });
});
