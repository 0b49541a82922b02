/**
 * Step timings as they travel: a late answer's merged into the next, many ranks in columns (what a
 * host agent forwards), and the checks a receiver applies to timings that arrive over the wire.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  appendRankTiming,
  appendTimingColumns,
  emptyTimingColumns,
  MAX_ANSWER_TRACERS,
  MAX_TRACER_PHASES,
  mergeTracerTimings,
  StepTimings,
  timingSlot,
} from "../../src/core/step-timing.js";
import { hostTimingProblem, rankTimingProblem } from "../../src/transport/protocol/validate.js";

describe("step timings", () => {
  it("sum per slot until taken, grouped by Tracer", () => {
    const timings = new StepTimings();
    const run = timingSlot("t");
    const fwd = timingSlot("t", "fwd");
    timings.add(run, 10.0004);
    timings.add(fwd, 4);
    timings.add(fwd, 5);
    timings.add(-1, 99); // the slot table was full: not timed
    assert.deepEqual(timings.take(), [
      { prefix: "t", steps: 1, totalMs: 10, phases: [{ name: "fwd", kind: "phase", count: 2, totalMs: 9 }] },
    ]);
    assert.ok(timings.empty);
  });

  it("merge a late answer's into the next one's", () => {
    const a = [
      { prefix: "t", steps: 1, totalMs: 10, phases: [{ name: "ar", kind: "barrier" as const, count: 1, totalMs: 2 }] },
    ];
    const b = [
      { prefix: "t", steps: 2, totalMs: 30, phases: [{ name: "ar", kind: "barrier" as const, count: 2, totalMs: 6 }] },
      { prefix: "u", steps: 1, totalMs: 1, phases: [] },
    ];
    assert.deepEqual(mergeTracerTimings(a, b), [
      { prefix: "t", steps: 3, totalMs: 40, phases: [{ name: "ar", kind: "barrier", count: 3, totalMs: 8 }] },
      { prefix: "u", steps: 1, totalMs: 1, phases: [] },
    ]);
  });

  it("line up many ranks in columns, a rank without a Tracer or phase holding zeros", () => {
    const host = emptyTimingColumns();
    appendRankTiming(host, "r0", 0, "h", 1.5, [{ prefix: "t", steps: 1, totalMs: 10, phases: [] }]);
    appendRankTiming(host, "r1", 1, "h", 2.5, [
      { prefix: "t", steps: 1, totalMs: 12, phases: [{ name: "fwd", kind: "phase", count: 1, totalMs: 7 }] },
    ]);
    const all = emptyTimingColumns();
    appendRankTiming(all, "d0", 7, "x", 0.5, []);
    appendTimingColumns(all, host);
    assert.deepEqual(all, {
      rankNames: ["d0", "r0", "r1"],
      ranks: [7, 0, 1],
      hosts: ["x", "h", "h"],
      arrivalMs: [0.5, 1.5, 2.5],
      tracers: [
        {
          prefix: "t",
          steps: [0, 1, 1],
          totalMs: [0, 10, 12],
          phases: [{ name: "fwd", kind: "phase", count: [0, 0, 1], totalMs: [0, 0, 7] }],
        },
      ],
    });
  });

  it("are refused when forged or oversized", () => {
    const ok = {
      rank: 1,
      host: "h",
      tracers: [{ prefix: "t", steps: 1, totalMs: 3, phases: [{ name: "ar", kind: "barrier", count: 1, totalMs: 1 }] }],
    };
    assert.equal(rankTimingProblem(ok), undefined);
    const tracer = ok.tracers[0];
    for (const bad of [
      { ...ok, rank: -1 },
      { ...ok, host: "h".repeat(1000) },
      { ...ok, tracers: [{ ...tracer, totalMs: -5 }] },
      { ...ok, tracers: [{ ...tracer, totalMs: Infinity }] },
      { ...ok, tracers: [{ ...tracer, totalMs: NaN }] },
      { ...ok, tracers: [{ ...tracer, steps: 1.5 }] },
      { ...ok, tracers: [tracer, tracer] },
      { ...ok, tracers: [{ ...tracer, phases: [...(tracer?.phases ?? []), ...(tracer?.phases ?? [])] }] },
      { ...ok, host: "" },
      { ...ok, tracers: [{ ...tracer, phases: [{ name: "ar", kind: "sleep", count: 1, totalMs: 1 }] }] },
      { ...ok, tracers: Array.from({ length: MAX_ANSWER_TRACERS + 1 }, () => tracer) },
      {
        ...ok,
        tracers: [
          {
            ...tracer,
            phases: Array.from({ length: MAX_TRACER_PHASES + 1 }, (_, i) => ({
              name: `p${i}`,
              kind: "phase",
              count: 1,
              totalMs: 1,
            })),
          },
        ],
      },
      "timing",
    ]) {
      assert.notEqual(rankTimingProblem(bad), undefined, JSON.stringify(bad).slice(0, 80));
    }
    const host = {
      rows: [0, 2],
      ranks: [4, 6],
      arrivalMs: [1, 2],
      tracers: [{ prefix: "t", steps: [1, 1], totalMs: [3, 4], phases: [] }],
    };
    assert.equal(hostTimingProblem(host, 3), undefined);
    assert.match(String(hostTimingProblem({ ...host, rows: [2, 0] }, 3)), /increasing/);
    assert.match(String(hostTimingProblem(host, 2)), /rows must be increasing indexes of the answer's rank list/);
    assert.match(String(hostTimingProblem({ ...host, arrivalMs: [1] }, 3)), /one number per row/);
    assert.match(
      String(hostTimingProblem({ ...host, tracers: [{ prefix: "t", steps: [1], totalMs: [3, 4], phases: [] }] }, 3)),
      /per row/,
    );
  });
});
