/**
 * A rank's states taken straight from its accumulators into a frame (`encodeTaking`, what a rank
 * answering its host agent does) are exactly what `takeStates` followed by `encode` sends: the
 * same keys and states bit for bit, only keys with values, every accumulator reset afterwards;
 * and a frame that cannot be written takes nothing.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { Collector } from "../../../src/core/collector.js";
import { StateDecoder, StateEncoder } from "../../../src/transport/wire/codec.js";

const REDUCES = ["mean", "sum", "max", "min", "std", "quantiles", "histogram", "quantiles(0.5,0.99)"] as const;
const HEADER = { proto: "rankscope", v: 1, run: "r1", t: "reply" };
const value = fc.oneof(
  { weight: 8, arbitrary: fc.double({ noNaN: false }) },
  { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity, -Infinity, 0, -0, 1e308, -5e-324) },
);

test("encodeTaking sends what takeStates + encode sends, bit for bit, and resets what it took", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.array(fc.record({ key: fc.integer({ min: 0, max: 40 }), value, sample: fc.boolean() }), { maxLength: 80 }),
        { minLength: 1, maxLength: 4 },
      ),
      (flushes) => {
        // Two collectors fed the same values: one taken straight into frames, the other by takeStates.
        const direct = new Collector();
        const reference = new Collector();
        const directWire = { encoder: new StateEncoder(), decoder: new StateDecoder() };
        const referenceWire = { encoder: new StateEncoder(), decoder: new StateDecoder() };
        for (const records of flushes) {
          for (const r of records) {
            for (const c of [direct, reference]) {
              if (r.key % 9 === 8)
                c.recordSlow(
                  `s/${r.key}`,
                  { reward: Number.isFinite(r.value) ? r.value : 0, tag: String(r.sample) },
                  "sample",
                );
              else c.recordSlow(`k/${r.key}`, r.value, REDUCES[r.key % 9]);
            }
          }
          const taken = reference.takeStates();
          const a = directWire.decoder.decode(directWire.encoder.encodeTaking(HEADER, direct.entriesInKeyOrder()));
          const b = referenceWire.decoder.decode(referenceWire.encoder.encode(HEADER, taken));
          assert.equal(a.stateCount, taken.length, "one state per key with values");
          assert.deepStrictEqual(directWire.decoder.toKeyStates(a), referenceWire.decoder.toKeyStates(b));
          for (const entry of direct.entriesInKeyOrder())
            assert.equal(entry.accumulator.count, 0, `${entry.key} was reset`);
        }
      },
    ),
    { numRuns: 100 },
  );
});

test("a key too long for the frame: encodeTaking throws a RangeError having taken nothing", () => {
  const collector = new Collector();
  collector.recordSlow("a", 1, "mean");
  collector.recordSlow("b", 2, "sum");
  collector.recordSlow("c", 3, "max");
  // recordMetric refuses such a key at the call (core/string-limits.ts); the encoder still checks
  // what it is given: here the entry of "b" with a 70,001-character key, its accumulator the same.
  assert.throws(() => collector.recordSlow(`b${"x".repeat(70_000)}`, 2, "sum"), /longer than 1000 characters/);
  const entries = collector
    .entriesInKeyOrder()
    .map((entry) => (entry.key === "b" ? { ...entry, key: `b${"x".repeat(70_000)}` } : entry));
  assert.throws(() => new StateEncoder().encodeTaking(HEADER, entries), RangeError);
  assert.deepEqual(
    collector.takeStates().map((s) => [s.key, s.state.count]),
    [
      ["a", 1],
      ["b", 1],
      ["c", 1],
    ],
    "every value still in its accumulator",
  );
});
