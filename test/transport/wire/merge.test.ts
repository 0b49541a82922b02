/**
 * A host agent's column merge of its ranks' frames (`FrameMerger`) gives exactly what
 * `mergeRankKeyStates` gives for the same states in the same order, bit for bit (Object.is: NaN,
 * -0, ±Infinity), flush after flush with one merger; a key recorded with two reductions is left to
 * `mergeRankKeyStates`, which names the ranks.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { Collector } from "../../../src/core/collector.js";
import type { QuantilesState } from "../../../src/core/accumulators/quantiles.js";
import type { KeyState } from "../../../src/core/key-state.js";
import { mergeRankKeyStates } from "../../../src/pipeline/reduce-states.js";
import {
  FrameMerger,
  frameKeyStates,
  StateDecoder,
  StateEncoder,
  type DecodedFrame,
} from "../../../src/transport/wire/codec.js";

const REDUCES = ["mean", "sum", "max", "min", "std", "quantiles", "histogram"] as const;
const HEADER = { proto: "rankscope", v: 1, run: "r1", t: "reply" };
const value = fc.oneof(
  { weight: 8, arbitrary: fc.double({ noNaN: false }) },
  { weight: 2, arbitrary: fc.integer({ min: -50, max: 50 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(NaN, Infinity, -Infinity, 0, -0, 1e308, -5e-324, Number.MAX_VALUE, -1e300, 2e154),
  },
);
const records = fc.array(fc.record({ key: fc.integer({ min: 0, max: 25 }), value }), { maxLength: 40 });

test("merging frames column by column equals mergeRankKeyStates of their states, bit for bit, over flushes", () => {
  fc.assert(
    fc.property(
      fc.array(fc.array(records, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 3 }),
      (flushes) => {
        const ranks = Array.from({ length: 5 }, () => ({
          collector: new Collector(),
          encoder: new StateEncoder(),
          decoder: new StateDecoder(),
        }));
        const merger = new FrameMerger();
        for (const [step, perRank] of flushes.entries()) {
          const frames: DecodedFrame[] = perRank.map((recorded, r) => {
            const rank = ranks[r] ?? ranks[0];
            assert.ok(rank !== undefined);
            for (const { key, value: v } of recorded)
              rank.collector.recordSlow(`k/${key}`, v, REDUCES[key % REDUCES.length]);
            return rank.decoder.decode(rank.encoder.encodeTaking(HEADER, rank.collector.entriesInKeyOrder()));
          });
          merger.begin();
          for (const frame of frames) merger.add(frame);
          const expected = mergeRankKeyStates(
            frames.map((f, r) => ({ rankName: `r${r}`, states: frameKeyStates(f, false) })),
            step,
          );
          assert.deepStrictEqual(merger.result(), expected);
        }
      },
    ),
    { numRuns: 200 },
  );
});

test("answers as frames and as states (JSON, carried) merged in one rank order equal mergeRankKeyStates, bit for bit", () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(records, fc.boolean()), { minLength: 1, maxLength: 6 }), (perRank) => {
      const merger = new FrameMerger();
      const answers = perRank.map(([recorded, asFrame], r) => {
        const collector = new Collector();
        for (const { key, value: v } of recorded) collector.recordSlow(`k/${key}`, v, REDUCES[key % REDUCES.length]);
        const frame = new StateDecoder().decode(new StateEncoder().encodeTaking(HEADER, collector.entriesInKeyOrder()));
        return { rankName: `r${r}`, frame: asFrame ? frame : undefined, states: frameKeyStates(frame, false) };
      });
      merger.begin();
      for (const answer of answers) {
        if (answer.frame !== undefined) merger.add(answer.frame);
        else merger.addStates(answer.states);
      }
      assert.deepStrictEqual(merger.result(), mergeRankKeyStates(answers, 0));
    }),
    { numRuns: 200 },
  );
});

test("a key recorded with two reductions in one flush: the merger gives up, mergeRankKeyStates reports it", () => {
  const frameOf = (record: (c: Collector) => void): DecodedFrame => {
    const c = new Collector();
    record(c);
    return new StateDecoder().decode(new StateEncoder().encodeTaking(HEADER, c.entriesInKeyOrder()));
  };
  const a = frameOf((c) => {
    c.recordSlow("loss", 1, "mean");
    c.recordSlow("lr", 1, "max");
  });
  const b = frameOf((c) => {
    c.recordSlow("loss", 2, "max");
    c.recordSlow("lr", 3, "max");
  });
  const merger = new FrameMerger();
  merger.begin();
  merger.add(a);
  merger.add(b);
  assert.equal(merger.result(), undefined);
  // The next flush, without the conflict, merges again.
  merger.begin();
  merger.add(b);
  merger.add(b);
  assert.deepStrictEqual(merger.result(), [
    { key: "loss", reduce: "max", state: { v: 1, count: 2, value: 2 } },
    { key: "lr", reduce: "max", state: { v: 1, count: 2, value: 3 } },
  ]);
});

test("a std of finite values whose spread overflows crosses the wire: the rank's frame decodes and merges to a finite mean, M2 +Infinity", () => {
  // CI's counterexample: the frame was refused as corrupt ("M2 is negative") by the controller.
  const collector = new Collector();
  collector.recordSlow("spread", -2.4948003869183998e293, "std");
  collector.recordSlow("spread", 1.7976931348623133e308, "std");
  const frame = new StateDecoder().decode(new StateEncoder().encodeTaking(HEADER, collector.entriesInKeyOrder()));
  const merger = new FrameMerger();
  merger.begin();
  merger.add(frame);
  const [merged] = merger.result() ?? assert.fail("one std key merges in the columns");
  const state = merged?.state as { mean: number; m2: number } | undefined;
  assert.ok(state !== undefined && Number.isFinite(state.mean), `mean ${String(state?.mean)}`);
  assert.equal(state.m2, Infinity);
});

test("quantile sketches from records, from the JSON section (counts that are not integers) and from states merge as mergeRankKeyStates does", () => {
  const sketch = (offset: number, counts: number[], sum: number): QuantilesState => ({
    v: 1,
    count: counts.reduce((a, b) => a + b, 0),
    sum,
    min: 0.5,
    max: 9,
    zeros: 0,
    nan: 0,
    posInf: 0,
    negInf: 0,
    positive: { offset, counts },
    negative: { offset: 0, counts: [] },
  });
  const answers = [
    [sketch(10, [1, 2, 0, 3], 0.1), sketch(4, [2], 7)],
    [sketch(12, [0.5, 1.25], 0.2), sketch(40, [1, 1], 3)],
    [sketch(8, [4], 0.3)],
    [sketch(9, [1, 1], 0.7), sketch(2, [1], -0)],
  ].map((list, r) => ({
    rankName: `r${r}`,
    states: list.map((state, k): KeyState => ({
      key: `q${k}`,
      reduce: k === 0 ? "quantiles" : "quantiles(0.9)",
      state,
    })),
  }));
  const merger = new FrameMerger();
  for (let round = 0; round < 2; round++) {
    merger.begin();
    answers.forEach((answer, r) => {
      if (r === 2) merger.addStates(answer.states);
      else merger.add(new StateDecoder().decode(new StateEncoder().encode(HEADER, answer.states)));
    });
    assert.deepStrictEqual(merger.result(), mergeRankKeyStates(answers, round));
  }
});
