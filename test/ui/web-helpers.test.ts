/** The dashboard's pure helpers: TensorBoard's debiased EMA smoothing, tick labels, histogram steps. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatTicks } from "../../src/ui/web/chart.js";
import { histogramSteps } from "../../src/ui/web/histogram.js";
import { smoothDebiasedEma } from "../../src/ui/web/smooth.js";

describe("smoothDebiasedEma", () => {
  it("leaves values alone at weight 0", () => {
    assert.deepEqual(smoothDebiasedEma([1, 5, 2], 0), [1, 5, 2]);
  });

  it("is debiased: a constant series stays constant from the first point", () => {
    for (const v of smoothDebiasedEma([3, 3, 3, 3], 0.9)) assert.ok(Math.abs((v ?? 0) - 3) < 1e-12);
  });

  it("matches the EMA recurrence divided by 1 - w^n", () => {
    const w = 0.6;
    const out = smoothDebiasedEma([1, 2, 4], w);
    const e1 = (1 - w) * 1;
    const e2 = w * e1 + (1 - w) * 2;
    const e3 = w * e2 + (1 - w) * 4;
    assert.deepEqual(out.map((v) => Number(v?.toFixed(12))), [e1 / (1 - w), e2 / (1 - w ** 2), e3 / (1 - w ** 3)].map((v) => Number(v.toFixed(12))));
  });

  it("passes NaN and gaps through without poisoning later points", () => {
    const out = smoothDebiasedEma([1, NaN, null, 1], 0.5);
    assert.ok(Number.isNaN(out[1]));
    assert.equal(out[2], null);
    assert.equal(out[3], 1);
  });
});

describe("formatTicks", () => {
  it("gives small steps enough decimals to tell ticks apart", () => {
    assert.deepEqual(formatTicks([0, 0.0005, 0.001]), ["0.0000", "0.0005", "0.0010"]);
    assert.deepEqual(formatTicks([0, 50, 100]), ["0", "50", "100"]);
    assert.deepEqual(formatTicks([0, 2e6, 4e6]), ["0", "2.0e+6", "4.0e+6"]);
  });
});

describe("histogramSteps", () => {
  it("starts at the minimum and closes an open last bucket at the maximum", () => {
    const [xs, ys] = histogramSteps({ min: -2, max: 3.5, bucketLimits: [-1, 0, Infinity], bucketCounts: [1, 5, 2] });
    assert.deepEqual(xs, [-2, -1, 0, 3.5]);
    assert.deepEqual(ys, [0, 1, 5, 2]);
  });
});
