/**
 * The rolling window behind `spike` and `rate_drop`: after any sequence of values its median and
 * MAD are exactly those of its last N values, computed the slow way (fast-check).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { madVerdict, RollingWindow } from "../../src/alerts/rolling.js";

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

test("median and MAD equal those of the last N values, for any values and any N", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 40 }),
      fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { minLength: 1, maxLength: 200 }),
      (capacity, values) => {
        const window = new RollingWindow(capacity);
        for (const v of values) window.push(v);
        const last = values.slice(-capacity);
        const m = median(last);
        assert.equal(window.size, last.length);
        // === : a median of zeros is 0 whichever of ±0 the values held (the window keeps −0 as 0).
        assert.ok(window.median() === m, `median ${window.median()} vs ${m}`);
        const mad = median(last.map((v) => Math.abs(v - m)));
        assert.ok(window.mad(m) === mad, `MAD ${window.mad(m)} vs ${mad}`);
      },
    ),
    { numRuns: 500 },
  );
});

test("−0 and 0 leave the same window: the median of the last N is 0 however they came and went", () => {
  // [0, 0, −0] then −0 evicts a 0: the last three are [0, −0, −0], whose median is a zero.
  const window = new RollingWindow(3);
  for (const v of [0, 0, -0, -0]) window.push(v);
  assert.ok(Object.is(window.median(), 0), `median ${window.median()}`);
  assert.ok(Object.is(window.mad(0), 0));
});

test("an empty window has no median", () => {
  const window = new RollingWindow(5);
  assert.ok(Number.isNaN(window.median()));
  assert.ok(Number.isNaN(window.mad(0)));
});

test("madVerdict agrees with the exact MAD whenever it is sure, and is sure almost always (fast-check)", () => {
  let sure = 0;
  let runs = 0;
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 60 }),
      // Around a large mean with a small spread too, where median ± t rounds.
      fc.oneof(fc.constant(0), fc.constant(1e9), fc.double({ min: -1e6, max: 1e6, noNaN: true })),
      // Subnormal values are left out: there the exact MAD's own arithmetic underflows ((5e-324 + 0) / 2
      // is 0), so it is no reference (CI found [−5e-324, 0] against t = 1e-323).
      fc.array(
        fc.oneof(
          fc.double({ min: -1e3, max: 1e3, noNaN: true }).map((v) => (Math.abs(v) < 1e-300 ? 0 : v)),
          fc.integer({ min: -3, max: 3 }),
        ),
        {
          minLength: 1,
          maxLength: 120,
        },
      ),
      fc.double({ min: 0, max: 2e3, noNaN: true }),
      (capacity, offset, values, t) => {
        const window = new RollingWindow(capacity);
        for (const v of values) window.push(offset + v);
        const m = window.median();
        const mad = window.mad(m);
        const verdict = madVerdict(window, m, t);
        runs++;
        if (verdict === "unsure") return;
        sure++;
        assert.equal(verdict, mad > 0 && mad < t ? "below" : "above", `MAD ${mad}, t ${t}`);
      },
    ),
    { numRuns: 3000 },
  );
  assert.ok(sure > runs * 0.9, `sure in ${sure} of ${runs}`);
});

test("madVerdict at the edge: a threshold equal to the MAD is unsure, a hair either side is not", () => {
  const window = new RollingWindow(5);
  for (const v of [1, 2, 3, 4, 10]) window.push(v);
  const m = window.median();
  assert.equal(window.mad(m), 1);
  assert.equal(madVerdict(window, m, 1), "unsure");
  assert.equal(madVerdict(window, m, 1.01), "below");
  assert.equal(madVerdict(window, m, 0.99), "above");
  const flat = new RollingWindow(5);
  for (const v of [7, 7, 7, 8, 9]) flat.push(v);
  assert.equal(madVerdict(flat, flat.median(), 100), "above", "MAD 0: a window with no spread judges nothing");
});
