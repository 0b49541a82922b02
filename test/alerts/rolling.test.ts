/**
 * The rolling window behind `spike` and `rate_drop`: after any sequence of values its median and
 * MAD are exactly those of its last N values, computed the slow way (fast-check).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { RollingWindow } from "../../src/alerts/rolling.js";

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

test("median and MAD equal those of the last N values, for any values and any N", () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 40 }), fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { minLength: 1, maxLength: 200 }), (capacity, values) => {
      const window = new RollingWindow(capacity);
      for (const v of values) window.push(v);
      const last = values.slice(-capacity);
      const m = median(last);
      assert.equal(window.size, last.length);
      assert.equal(window.median(), m);
      assert.equal(window.mad(m), median(last.map((v) => Math.abs(v - m))));
    }),
    { numRuns: 500 },
  );
});

test("an empty window has no median", () => {
  const window = new RollingWindow(5);
  assert.ok(Number.isNaN(window.median()));
  assert.ok(Number.isNaN(window.mad(0)));
});
