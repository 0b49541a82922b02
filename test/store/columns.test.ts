// The store's pure columnar algorithms (src/store/columns.ts), without SQLite.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { blockSummaries, f64, mergeByStep, sortDedupe } from "../../src/store/columns.js";
import { BLOCK_FIELDS, BLOCK_POINTS } from "../../src/store/schema.js";

const f = (xs: number[]): Float64Array => Float64Array.from(xs);

describe("store columns", () => {
  it("f64 reads a column and refuses an index past its end", () => {
    assert.equal(f64(f([1, 2]), 1), 2);
    assert.throws(() => f64(f([1, 2]), 2), RangeError);
  });

  it("sortDedupe sorts by step and keeps the last value given for a step", () => {
    const s = sortDedupe([3, 1, 3, 2], [30, 10, 31, 20], [0.3, 0.1, 0.33, 0.2]);
    assert.deepEqual([...s.steps], [1, 2, 3]);
    assert.deepEqual([...s.walls], [10, 20, 31]);
    assert.deepEqual([...s.values], [0.1, 0.2, 0.33]);
  });

  it("mergeByStep interleaves two series and the second wins a shared step", () => {
    const m = mergeByStep(
      { steps: f([1, 3, 5]), walls: f([1, 3, 5]), values: f([1, 3, 5]) },
      { steps: f([2, 3]), walls: f([2, 30]), values: f([2, 30]) },
    );
    assert.deepEqual([...m.steps], [1, 2, 3, 5]);
    assert.deepEqual([...m.values], [1, 2, 30, 5]);
  });

  it("blockSummaries gives each block its count, ends, min, max and first NaN", () => {
    const n = BLOCK_POINTS + 2;
    const steps = f(Array.from({ length: n }, (_, i) => i));
    const walls = f(Array.from({ length: n }, (_, i) => 1000 + i));
    const values = f(Array.from({ length: n }, (_, i) => (i === 7 ? NaN : i === 9 ? -5 : i === 11 ? 50 : i)));
    const out = blockSummaries({ steps, walls, values });
    const w = BLOCK_FIELDS.length;
    assert.equal(out.length, 2 * w);
    const field = (b: number, name: (typeof BLOCK_FIELDS)[number]): number =>
      f64(out, b * w + BLOCK_FIELDS.indexOf(name));
    assert.equal(field(0, "n"), BLOCK_POINTS);
    assert.equal(field(0, "min"), -5);
    assert.equal(field(0, "minStep"), 9);
    assert.equal(field(0, "max"), BLOCK_POINTS - 1);
    assert.equal(field(0, "nanStep"), 7);
    assert.equal(field(1, "n"), 2);
    assert.equal(field(1, "firstStep"), BLOCK_POINTS);
    assert.ok(Number.isNaN(field(1, "nanStep")), "no NaN in the second block");
  });
});
