/**
 * The identity model's one naming rule (docs/DESIGN.md, "Identity"): every recorder has a line of
 * its own, the line decodes back to its recorder, and labels and order follow from it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  compareLines,
  CONTROLLER_LINE,
  GLOBAL_LINE,
  lineDisplayLabel,
  lineLabel,
  lineOf,
  recorderJsonFields,
  recorderOf,
  recorderOfLine,
  recorderPath,
  THREAD_LINE_SPAN,
  type Recorder,
} from "../../../src/core/rank-identity.js";

const recorder = fc.record({
  role: fc.constantFrom("controller" as const, "rank" as const),
  rank: fc.integer({ min: 0, max: 2 ** 28 }),
  thread: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: THREAD_LINE_SPAN - 1 })),
});

test("every recorder has a line of its own, which decodes back to it (the controller's rank reads 0)", () => {
  fc.assert(
    fc.property(recorder, recorder, (a, b) => {
      const same = a.role === b.role && a.thread === b.thread && (a.role === "controller" || a.rank === b.rank);
      assert.equal(lineOf(a) === lineOf(b), same);
      const decoded = recorderOfLine(lineOf(a));
      assert.deepEqual(decoded.kind === "recorder" ? [decoded.role, decoded.rank, decoded.thread] : decoded.kind, [
        a.role,
        a.role === "controller" ? 0 : a.rank,
        a.thread,
      ]);
      assert.ok(Number.isSafeInteger(lineOf(a)));
    }),
  );
});

test("the fixed lines and their labels", () => {
  const controller = recorderOf({
    rank: 0,
    rankName: "Learner",
    processName: "Learner",
    localRank: 0,
    localWorldSize: 1,
    role: "controller",
  });
  const rank0 = recorderOf({
    rank: 0,
    rankName: "Rollout_AAAA_r0",
    processName: "Rollout",
    localRank: 0,
    localWorldSize: 2,
  });
  assert.equal(lineOf(controller), CONTROLLER_LINE);
  assert.equal(lineOf(rank0), 0);
  assert.notEqual(lineOf(controller), lineOf(rank0), "the controller is never rank 0");
  const worker: Recorder = { ...rank0, thread: 7 };
  assert.deepEqual(
    [GLOBAL_LINE, CONTROLLER_LINE, 0, 3, lineOf(worker), lineOf({ ...controller, thread: 2 })].map(lineLabel),
    ["global", "controller", "rank 0", "rank 3", "rank 0 · thread 7", "controller · thread 2"],
  );
  assert.equal(lineDisplayLabel(CONTROLLER_LINE, "Learner"), "controller (Learner)");
  assert.equal(lineDisplayLabel(0, "Rollout_AAAA_r0"), "rank 0 (Rollout_AAAA_r0)");
  assert.equal(lineDisplayLabel(1, "rank1"), "rank 1", "a name that says nothing more is left out");
  assert.equal(lineDisplayLabel(lineOf(worker), recorderPath(worker)), "rank 0 · thread 7 (Rollout_AAAA_r0)");
  assert.equal(recorderPath(worker), "Rollout_AAAA_r0/thread-7");
  assert.deepEqual(
    [recorderJsonFields(controller), recorderJsonFields(rank0), recorderJsonFields(worker)],
    ['"role":"controller"', '"rank":0', '"rank":0,"thread":7'],
  );
  assert.throws(
    () => lineOf({ role: "rank", rank: 0, thread: THREAD_LINE_SPAN }),
    /thread must be an integer in \[0, 16777216\)/,
  );
});

test("line order: global, ranks ascending, the controller, then thread lines", () => {
  const lines = [
    lineOf({ role: "rank", rank: 1, thread: 3 }),
    2,
    CONTROLLER_LINE,
    0,
    GLOBAL_LINE,
    lineOf({ role: "controller", rank: 0, thread: 5 }),
  ];
  assert.deepEqual(lines.sort(compareLines), [
    GLOBAL_LINE,
    0,
    2,
    CONTROLLER_LINE,
    lineOf({ role: "controller", rank: 0, thread: 5 }),
    lineOf({ role: "rank", rank: 1, thread: 3 }),
  ]);
});
