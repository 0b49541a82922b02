/**
 * The binary state format: what goes in comes out (bit for bit, NaN and ±Infinity included), merges
 * of decoded states equal merges of the originals, keys travel once per session, and malformed
 * frames are refused with a `WireFormatError`, never another exception.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { Collector } from "../../../src/core/collector.js";
import type { QuantilesState } from "../../../src/core/accumulators/quantiles.js";
import type { KeyState } from "../../../src/core/key-state.js";
import { mergeRankKeyStates } from "../../../src/pipeline/reduce-states.js";
import { StateDecoder, StateEncoder, WireFormatError, isWireFrame } from "../../../src/transport/wire/codec.js";

const NUMERIC = ["mean", "sum", "max", "min", "std", "quantiles", "histogram", "quantiles(0.5,0.99)"] as const;
const HEADER = { proto: "rankscope", v: 1, run: "r1", t: "states" };

const value = fc.oneof(
  { weight: 8, arbitrary: fc.double({ noNaN: false }) },
  { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity, -Infinity, 0, -0, 1e308, -5e-324) },
  { weight: 2, arbitrary: fc.integer({ min: -1000, max: 1000 }) },
);
const record = fc.record({ key: fc.integer({ min: 0, max: 40 }), value, sample: fc.boolean() });

/** Real collector states from a list of records (key i is recorded with reduction i mod 9). */
function statesOf(records: ReadonlyArray<{ key: number; value: number; sample: boolean }>): KeyState[] {
  const collector = new Collector();
  for (const r of records) {
    const kind = r.key % (NUMERIC.length + 1);
    if (kind === NUMERIC.length)
      collector.recordSlow(
        `s/${r.key}`,
        { reward: Number.isFinite(r.value) ? r.value : 0, tag: String(r.sample) },
        "sample",
      );
    else collector.recordSlow(`k/${r.key}`, r.value, NUMERIC[kind]);
  }
  return collector.takeStates();
}

test("a frame decodes to exactly the states it was written from, over several flushes of one session", () => {
  fc.assert(
    fc.property(fc.array(fc.array(record, { maxLength: 80 }), { minLength: 1, maxLength: 4 }), (flushes) => {
      const encoder = new StateEncoder();
      const decoder = new StateDecoder();
      for (const records of flushes) {
        const states = statesOf(records);
        const frame = encoder.encode(HEADER, states);
        assert.ok(isWireFrame(frame));
        const decoded = decoder.decode(frame);
        assert.equal(decoded.unknownKeys, 0);
        assert.equal(decoded.tableGap, false);
        assert.equal(decoded.header.run, "r1");
        // JSON turns -0 into 0 in the fallback section (histograms, samples), exactly as the JSON protocol does.
        assert.deepStrictEqual(decoder.toKeyStates(decoded), withoutNegativeZeroInJson(states));
      }
    }),
    { numRuns: 150 },
  );
});

/** The states as they come back: binary sections (sketches too) keep -0, the JSON section (histograms, samples) writes it as 0. */
function withoutNegativeZeroInJson(states: readonly KeyState[]): KeyState[] {
  const binary = new Set(["mean", "sum", "max", "min", "std", "quantiles", "quantiles(0.5,0.99)"]);
  return states.map((s) =>
    binary.has(s.reduce)
      ? s
      : {
          ...s,
          state: JSON.parse(
            JSON.stringify(s.state, (_k, v: unknown) =>
              typeof v === "number" && !Number.isFinite(v) ? { $nf: String(v) } : v,
            ),
            (_k, v: unknown) =>
              v !== null && typeof v === "object" && "$nf" in v ? Number((v as { $nf: string }).$nf) : v,
          ),
        },
  );
}

test("merging decoded states of many ranks equals merging the originals", () => {
  fc.assert(
    fc.property(fc.array(fc.array(record, { maxLength: 60 }), { minLength: 2, maxLength: 6 }), (perRank) => {
      const ranks = perRank.map((records, i) => ({ rankName: `r${i}`, states: statesOf(records) }));
      const decoded = ranks.map((rank) => {
        const decoder = new StateDecoder();
        return {
          rankName: rank.rankName,
          states: decoder.toKeyStates(decoder.decode(new StateEncoder().encode(HEADER, rank.states))),
        };
      });
      assert.deepStrictEqual(
        mergeRankKeyStates(decoded, 1),
        mergeRankKeyStates(
          ranks.map((r) => ({ rankName: r.rankName, states: withoutNegativeZeroInJson(r.states) })),
          1,
        ),
      );
    }),
    { numRuns: 100 },
  );
});

test("MEAN/SUM/MAX/MIN keys cost at most 16 bytes each once their keys are known (14 with u16 ids)", () => {
  const collector = new Collector();
  const encoder = new StateEncoder();
  const decoder = new StateDecoder();
  const reductions = ["mean", "sum", "max", "min"];
  let first = 0;
  let second = 0;
  for (let flush = 0; flush < 2; flush++) {
    for (let k = 0; k < 1000; k++)
      collector.recordSlow(`train/layer_${k}/grad_norm`, k * 0.37 + flush, reductions[k % 4]);
    const frame = encoder.encode({ ...HEADER, step: flush }, collector.takeStates());
    decoder.decode(frame);
    if (flush === 0) first = frame.length;
    else second = frame.length;
  }
  assert.ok(second / 1000 <= 16, `a flush of 1,000 known keys took ${second / 1000} bytes per key`);
  assert.ok(first > second + 20_000, "the first frame carries the key table, later ones do not");
});

test("a frame inside a larger Node Buffer at an odd offset (as NATS hands it over) decodes the same", () => {
  const states = statesOf(Array.from({ length: 30 }, (_v, i) => ({ key: i, value: i / 3, sample: false })));
  const frame = new StateEncoder().encode(HEADER, states);
  const odd = Buffer.concat([Buffer.from([1, 2, 3]), Buffer.from(frame), Buffer.from([9])]).subarray(
    3,
    3 + frame.length,
  );
  const decoder = new StateDecoder();
  assert.deepStrictEqual(decoder.toKeyStates(decoder.decode(odd)), withoutNegativeZeroInJson(states));
});

test("a lost frame is noticed (tableGap), counted per state, and a table reset recovers", () => {
  const encoder = new StateEncoder();
  const decoder = new StateDecoder();
  const s = (key: string, sum: number): KeyState => ({
    key,
    reduce: "sum",
    state: { v: 1, count: 1, sum } as KeyState["state"],
  });
  decoder.decode(encoder.encode(HEADER, [s("a", 1)]));
  encoder.encode(HEADER, [s("b", 2)]); // lost on the way
  const third = decoder.decode(encoder.encode(HEADER, [s("a", 3), s("b", 4), s("c", 5)]));
  assert.equal(third.tableGap, true);
  assert.equal(third.unknownKeys, 2);
  assert.deepStrictEqual(decoder.toKeyStates(third), [s("a", 3)]);
  encoder.reset();
  const fourth = decoder.decode(encoder.encode(HEADER, [s("b", 6), s("c", 7)]));
  assert.equal(fourth.tableGap, false);
  assert.deepStrictEqual(decoder.toKeyStates(fourth), [s("b", 6), s("c", 7)]);
});

test("every truncation and every single corrupted byte of a frame is refused as WireFormatError or decodes; nothing else is thrown", () => {
  const states = statesOf(
    Array.from({ length: 60 }, (_v, i) => ({ key: i % 20, value: i * 1.5, sample: i % 2 === 0 })),
  );
  const frame = new StateEncoder().encode(HEADER, states);
  for (let length = 0; length < frame.length; length++) {
    assert.throws(
      () => new StateDecoder().decode(frame.subarray(0, length)),
      WireFormatError,
      `truncated to ${length} bytes`,
    );
  }
  fc.assert(
    fc.property(fc.integer({ min: 0, max: frame.length - 1 }), fc.integer({ min: 0, max: 255 }), (at, byte) => {
      const copy = frame.slice();
      copy[at] = byte;
      try {
        new StateDecoder().decode(copy);
      } catch (error) {
        assert.ok(error instanceof WireFormatError, `byte ${at} = ${byte}: ${String(error)}`);
      }
    }),
    { numRuns: 3000 },
  );
  assert.throws(() => new StateDecoder().decode(new TextEncoder().encode('{"proto":"rankscope"}')), WireFormatError);
});

/** A quantiles state of one sign's buckets (what a rank's sketch of values in one run of buckets holds). */
function sketchState(
  offset: number,
  counts: number[],
  extra: Partial<Record<"zeros" | "nan", number>> = {},
): QuantilesState {
  const zeros = extra.zeros ?? 0;
  const nan = extra.nan ?? 0;
  const count = counts.reduce((a, b) => a + b, 0) + zeros + nan;
  return {
    v: 1,
    count,
    sum: 3.5,
    min: 1,
    max: 2.5,
    zeros,
    nan,
    posInf: 0,
    negInf: 0,
    positive: { offset, counts },
    negative: { offset: 0, counts: [] },
  };
}

test("the scale bench's mixed keys, one value per key per flush, cost at most 16 bytes each once their keys are known", () => {
  // 40% mean, 20% sum, 15% max, 15% min, 5% std, 5% quantiles (bench/scale-keys.ts).
  const mix = ["mean", "mean", "mean", "mean", "mean", "mean", "mean", "mean", "sum", "sum", "sum", "sum"];
  const reductions = [...mix, "max", "max", "max", "min", "min", "min", "std", "quantiles"];
  const collector = new Collector();
  const encoder = new StateEncoder();
  const decoder = new StateDecoder();
  let bytes = 0;
  for (let flush = 0; flush < 2; flush++) {
    for (let k = 0; k < 1000; k++)
      collector.recordSlow(
        `train/layer_${Math.floor(k / 8)}/metric_${k % 8}`,
        (k * 0.37 + flush) % 11,
        reductions[k % 20],
      );
    const states = collector.takeStates();
    const frame = encoder.encode({ ...HEADER, step: flush }, states);
    assert.deepStrictEqual(decoder.toKeyStates(decoder.decode(frame)), states);
    bytes = frame.length;
  }
  assert.ok(bytes / 1000 <= 16, `a flush of 1,000 known mixed keys took ${bytes / 1000} bytes per key`);
});

test("a sketch whose counts are not safe integers (or are -0) travels in the JSON section, exactly", () => {
  const halves = sketchState(100, [0.5, 1]);
  const huge = sketchState(100, [2 ** 60]);
  const negativeZero: QuantilesState = { ...sketchState(100, [1]), zeros: -0 };
  const states: KeyState[] = [
    { key: "a", reduce: "quantiles", state: halves },
    { key: "b", reduce: "quantiles", state: huge },
    { key: "c", reduce: "quantiles", state: sketchState(100, [1, 0, 2], { zeros: 3, nan: 1 }) },
    { key: "d", reduce: "quantiles(0.5,0.99)", state: negativeZero },
  ];
  const decoder = new StateDecoder();
  const frame = decoder.decode(new StateEncoder().encode(HEADER, states));
  const kinds = frame.sections.map((s) => [s.kind, s.ids.length]);
  assert.deepStrictEqual(kinds, [
    [4, 3],
    [5, 1],
  ]);
  assert.deepStrictEqual(decoder.toKeyStates(frame), [
    ...states.slice(0, 3),
    // The JSON section writes -0 as 0, exactly as the JSON protocol does (no collector counts -0).
    { key: "d", reduce: "quantiles(0.5,0.99)", state: { ...negativeZero, zeros: 0 } },
  ]);
});

test("a sketch section's records are held to the quantiles state's rules: a corrupted or inconsistent one is refused", () => {
  const encode = (state: QuantilesState): Uint8Array =>
    new StateEncoder("s").encode(HEADER, [{ key: "q", reduce: "quantiles", state }]);
  const frame = encode(sketchState(100, [1, 2]));
  const section = new StateDecoder().decode(frame).sections[0]?.sketches;
  assert.ok(section !== undefined);
  const record = section.bytes.byteOffset; // the encoder's frame starts its own buffer
  const refused = (bytes: Uint8Array, kind: string, what: string): void => {
    assert.throws(
      () => new StateDecoder().decode(bytes),
      (error: unknown) => error instanceof WireFormatError && error.kind === kind,
      what,
    );
  };
  const changed = (at: number, byte: number, bytes = frame): Uint8Array => {
    const copy = bytes.slice();
    copy[at] = byte;
    return copy;
  };
  // flags, then min, max and sum (f64), then the positive run: offset 100 (zigzag 200: two bytes), length 2, counts 1 and 2.
  assert.equal(section.bytes.length, 1 + 24 + 2 + 1 + 2);
  assert.equal(frame[record - 4], 30, "the section's length, before its records");
  refused(changed(record, 0x80 | (frame[record] ?? 0)), "malformed", "an unknown flag");
  refused(changed(record + 28, 2), "invalidState", "buckets that do not add up to count");
  refused(changed(record + 29, 0x82), "malformed", "a varint running past the section");
  refused(changed(record + 27, 3), "malformed", "a run longer than the section");
  refused(changed(record - 4, 31), "malformed", "records ending before the section does");
  refused(changed(record - 4, 29), "malformed", "a section length cutting the last record");
  refused(encode(sketchState(2_000_000_000, [1])), "invalidState", "buckets past the keys of finite numbers");
  refused(encode(sketchState(-2_000_000, [1])), "invalidState", "buckets below the keys of finite numbers");
  // One count (1) as 0x81 0x00: the same number with a redundant byte (taken from the padding after it).
  const one = encode(sketchState(100, [1]));
  const at = new StateDecoder().decode(one).sections[0]?.sketches?.bytes.byteOffset ?? 0;
  assert.equal(one[at + 29], 0);
  refused(changed(at - 4, 30, changed(at + 28, 0x81, one)), "malformed", "an overlong varint");
  assert.doesNotThrow(() => new StateDecoder().decode(frame));
});
