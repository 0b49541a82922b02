/**
 * The packing logic (rows, small chunks, full chunks, rewrites of old steps, merged batches)
 * against a model: whatever sequence of writes, reading a series gives exactly one point per step
 * with the last value written, in step order — and downsampled reads keep every bucket's extremes.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import fc from "fast-check";
import { closeStores, series } from "../../src/store/reader.js";
import { CHUNK_POINTS, GLOBAL_RANK } from "../../src/store/schema.js";
import { StoreWriter, type WriteBatch } from "../../src/store/writer.js";
import { tempDir } from "../helpers.js";

after(() => closeStores());

/** One write: a run of consecutive steps from `start`, or scattered steps, alone or merged. */
const writeArb = fc.record({
  start: fc.integer({ min: 0, max: 3 * CHUNK_POINTS }),
  length: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: CHUNK_POINTS + 300 })),
  stride: fc.constantFrom(1, 1, 1, 2, 7),
  value: fc.oneof(fc.double({ noNaN: false }), fc.constantFrom(NaN, Infinity, -Infinity, 0)),
  how: fc.constantFrom("writeSeries", "write", "writeAll"),
});

test("any sequence of writes reads back as one point per step, last write wins", () => {
  fc.assert(
    fc.property(fc.array(writeArb, { minLength: 1, maxLength: 12 }), (writes) => {
      const dir = tempDir();
      const w = StoreWriter.open({
        runDir: dir,
        role: "controller",
        rank: GLOBAL_RANK,
        rankName: "model",
        experiment: "e",
        trial: "t",
      });
      const model = new Map<number, number>();
      writes.forEach((op, n) => {
        const steps = Array.from({ length: op.length }, (_, i) => op.start + i * op.stride);
        const valueOf = (step: number): number => (Number.isFinite(op.value) ? op.value + step + n : op.value);
        if (op.how === "writeSeries") {
          w.writeSeries(
            "k",
            steps,
            steps.map((s) => 1000 + s),
            steps.map(valueOf),
          );
        } else {
          const batch: WriteBatch = {
            scalars: steps.map((s) => ({ key: "k", step: s, wall: 1000 + s, value: valueOf(s) })),
          };
          if (op.how === "write") w.write(batch);
          else w.writeAll([batch, { scalars: [] }]);
        }
        for (const s of steps) model.set(s, valueOf(s));
      });
      w.finish();
      const { points } = series(dir, "k", { maxPoints: Infinity });
      const expected = [...model.entries()].sort((a, b) => a[0] - b[0]);
      assert.equal(points.length, expected.length);
      points.forEach((p, i) => {
        const [step, value] = expected[i] as [number, number];
        assert.equal(p.step, step);
        assert.ok(
          Object.is(p.value, value) || (Number.isNaN(p.value) && Number.isNaN(value)),
          `step ${step}: ${p.value} != ${value}`,
        );
      });
      // Downsampled: the global max and min of the finite values are among the points kept.
      const finite = expected.map(([, v]) => v).filter((v) => !Number.isNaN(v));
      if (finite.length > 0) {
        const small = series(dir, "k", { maxPoints: 30 });
        assert.ok(small.points.length <= 30);
        assert.ok(small.points.some((p) => p.value === Math.max(...finite)));
        assert.ok(small.points.some((p) => p.value === Math.min(...finite)));
      }
      closeStores();
    }),
    { numRuns: 30 },
  );
});
