import { test } from "node:test";
import assert from "node:assert/strict";
import { getReduceDefinition, Reduce } from "../../../src/core/registry.js";
import type { AccumulatorState, NumericReduceDefinition } from "../../../src/core/reduce.js";

/** A reduction that takes numbers, by name. */
function numeric(name: string): NumericReduceDefinition {
  const definition = getReduceDefinition(name);
  if (definition.input === "object") throw new TypeError(`${name} takes records`);
  return definition;
}

/** numpy's default quantile ("linear") of sorted values. */
function exactQuantile(sorted: readonly number[], q: number): number {
  const h = (sorted.length - 1) * q;
  const lo = Math.floor(h);
  const a = sorted[lo] ?? NaN;
  const b = sorted[Math.min(lo + 1, sorted.length - 1)] ?? NaN;
  return a + (b - a) * (h - lo);
}

test("Reduce.buckets: explicit buckets (b[i-1], b[i]] and quantiles, merged across recorders exactly as one recorder", () => {
  const name = Reduce.buckets([0.1, 0.5, 1]);
  assert.equal(name, "buckets(0.1,0.5,1)");
  const definition = numeric(name);
  const values = Array.from({ length: 3000 }, (_, i) => ((i * 7919) % 3000) / 1500);
  const ranks = [definition.create(), definition.create(), definition.create()];
  values.forEach((v, i) => ranks[i % 3]?.append(v));
  const merged = definition.merge(ranks.map((a) => a.state()));
  const one = definition.create();
  for (const v of values) one.append(v);
  assert.deepEqual(definition.value(merged), definition.value(one.state()));
  const histogram = definition.histogram?.(merged);
  assert.deepEqual(histogram?.bucketLimits, [0.1, 0.5, 1, Number.MAX_VALUE]);
  const expected = [0, 0, 0, 0];
  for (const v of values) {
    const i = v <= 0.1 ? 0 : v <= 0.5 ? 1 : v <= 1 ? 2 : 3;
    expected[i] = (expected[i] ?? 0) + 1;
  }
  assert.deepEqual(histogram?.bucketCounts, expected, "counts exact, a value on a boundary in the bucket it closes");
  const sorted = [...values].sort((a, b) => a - b);
  const reduced = definition.value(merged);
  assert.ok(typeof reduced === "object");
  assert.equal(reduced["count"], 3000);
  for (const [suffix, q] of [
    ["p50", 0.5],
    ["p90", 0.9],
    ["p99", 0.99],
  ] as const) {
    const exact = exactQuantile(sorted, q);
    assert.ok(Math.abs((reduced[suffix] ?? NaN) - exact) <= 0.01 * exact, `${suffix}: ${reduced[suffix]} vs ${exact}`);
  }
});

test("Reduce.buckets: a state whose bucket counts do not add up is refused", () => {
  const definition = numeric(Reduce.buckets([1, 2]));
  const accumulator = definition.create();
  accumulator.append(1.5);
  const state: AccumulatorState & Record<string, unknown> = { ...accumulator.state() };
  assert.equal(definition.check?.(state), undefined);
  assert.match(definition.check?.({ ...state, counts: [0, 2, 0] }) ?? "", /buckets hold 2 values, but count is 1/);
  assert.match(definition.check?.({ ...state, counts: [1] }) ?? "", /list of 3 bucket counts/);
  assert.throws(() => Reduce.buckets([2, 1]), /strictly ascending/);
});

test("Reduce.RATE: the total is exact and per-second rates add across recorders", () => {
  const definition = numeric(Reduce.RATE);
  const a = definition.create();
  const b = definition.create();
  for (let i = 0; i < 10; i++) a.append(2);
  b.append(5);
  const merged = definition.merge([a.state(), b.state()]);
  const value = definition.value(merged);
  assert.ok(typeof value === "object");
  assert.equal(value["total"], 25);
  assert.ok((value["per_s"] ?? 0) > 0);
  assert.equal(merged.count, 11);
});
