/**
 * A host's flush-answer header is checked before anything in it is used: forged or oversized step
 * timings (rows outside the host's rank list, columns of the wrong length, negative durations)
 * make the frame malformed — counted and ignored by the controller like any other.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { hostEnvelope, validateHostStatesHeader } from "../../../src/transport/host/messages.js";

const header = {
  ...hostEnvelope("run-1"),
  t: "hostStates",
  id: 3,
  step: 7,
  host: "h0",
  reporting: 2,
  missing: [],
  mv: 2,
  ranks: ["a", "b"],
  dropped: 0,
  timing: {
    rows: [0, 1],
    ranks: [0, 1],
    arrivalMs: [0.4, 0.9],
    tracers: [
      {
        prefix: "t",
        steps: [1, 1],
        totalMs: [10, 30],
        phases: [{ name: "ar", kind: "barrier", count: [1, 1], totalMs: [20, 1] }],
      },
    ],
  },
};

test("a host's step timings are checked with its header", () => {
  assert.equal(validateHostStatesHeader(header), undefined);
  const t = header.timing;
  const tracer = t.tracers[0];
  const forged: unknown[] = [
    { ...t, rows: [0, 5] },
    { ...t, rows: [0, 1, 1] },
    { ...t, arrivalMs: [0.4, "soon"] },
    { ...t, tracers: [{ ...tracer, totalMs: [10, -30] }] },
    { ...t, tracers: [{ ...tracer, steps: [1] }] },
    { ...t, tracers: [{ ...tracer, phases: [{ name: "ar", kind: "barrier", count: [1, 1], totalMs: [20] }] }] },
    { ...t, tracers: Array.from({ length: 100 }, () => tracer) },
    [1, 2, 3],
  ];
  for (const timing of forged)
    assert.notEqual(validateHostStatesHeader({ ...header, timing }), undefined, JSON.stringify(timing).slice(0, 60));
});

test("a rack's answer names its ranks' racks as runs covering exactly its ranks: forged runs are refused", () => {
  assert.equal(validateHostStatesHeader({ ...header, racks: [["r1", 2]] }), undefined);
  const forged: unknown[] = [
    [["r1", 1]],
    [["r1", 3]],
    [["r1", 1, 1]],
    [["r1", -2]],
    [["", 2]],
    [["r\u0000", 2]],
    { r1: 2 },
    "r1",
  ];
  for (const racks of forged)
    assert.notEqual(validateHostStatesHeader({ ...header, racks }), undefined, JSON.stringify(racks));
  const { ranks: _ranks, ...withoutRanks } = header;
  assert.notEqual(validateHostStatesHeader({ ...withoutRanks, racks: [["r1", 2]] }), undefined, "racks without ranks");
});
