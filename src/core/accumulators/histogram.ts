/**
 * `Reduce.HISTOGRAM`: mergeable buckets, reported as count/min/max/mean, with the buckets kept for
 * backends that draw histograms (TensorBoard's `HistogramProto`).
 *
 * Every histogram uses the same bucket edges — TensorBoard's default: ±1e-12 · 1.1^k up to the
 * largest double, and 0 — so states from any rank merge by adding counts, exactly.
 */
import type { Accumulator, AccumulatorState, HistogramData, NumericReduceDefinition } from "../reduce.js";
import { counts, describe, firstProblem, isCount, numbers, versionOne } from "./state-check.js";

function defaultEdges(): Float64Array {
  const positive: number[] = [];
  for (let v = 1e-12; v < 1e20; v *= 1.1) positive.push(v);
  const edges = [-Number.MAX_VALUE, ...positive.map((v) => -v).reverse(), 0, ...positive, Number.MAX_VALUE];
  return Float64Array.from(edges);
}

/** Upper bucket edges, ascending; the last is the largest double (it also holds +Infinity). */
export const HISTOGRAM_EDGES: Readonly<Float64Array> = defaultEdges();
const EDGE_COUNT = HISTOGRAM_EDGES.length;

/** Index of the bucket (lowest edge ≥ value) by binary search. */
function bucketIndex(value: number): number {
  let low = 0;
  let high = EDGE_COUNT - 1;
  while (low < high) {
    const mid = (low + high) >>> 1;
    // `mid` is always in range; `?? Infinity` only tells the compiler what a missing edge would be.
    if ((HISTOGRAM_EDGES[mid] ?? Infinity) >= value) high = mid;
    else low = mid + 1;
  }
  return low;
}

/** Plain state: summary numbers and the non-empty buckets as parallel arrays. */
interface HistogramState extends AccumulatorState {
  readonly min: number;
  readonly max: number;
  readonly sum: number;
  readonly sumSquares: number;
  readonly nan: number;
  readonly buckets: readonly number[];
  readonly counts: readonly number[];
}

class Histogram {
  count = 0;
  min = Infinity;
  max = -Infinity;
  sum = 0;
  sumSquares = 0;
  nan = 0;
  counts: Float64Array | null = null;

  add(value: number, n = 1): void {
    this.count += n;
    this.sum += value * n;
    this.sumSquares += value * value * n;
    if (value !== value) {
      this.nan += n;
      return;
    }
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
    const counts = (this.counts ??= new Float64Array(EDGE_COUNT));
    const i = bucketIndex(value);
    counts[i] = (counts[i] ?? 0) + n;
  }

  addState(s: HistogramState): void {
    this.count += s.count;
    this.sum += s.sum;
    this.sumSquares += s.sumSquares;
    this.nan += s.nan;
    if (s.min < this.min) this.min = s.min;
    if (s.max > this.max) this.max = s.max;
    if (s.buckets.length === 0) return;
    const counts = (this.counts ??= new Float64Array(EDGE_COUNT));
    for (let i = 0; i < s.buckets.length; i++) {
      const b = s.buckets[i];
      if (b !== undefined) counts[b] = (counts[b] ?? 0) + (s.counts[i] ?? 0);
    }
  }

  toState(): HistogramState {
    const buckets: number[] = [];
    const counts: number[] = [];
    if (this.counts !== null) {
      for (let i = 0; i < EDGE_COUNT; i++) {
        const c = this.counts[i] ?? 0;
        if (c > 0) {
          buckets.push(i);
          counts.push(c);
        }
      }
    }
    return {
      v: 1,
      count: this.count,
      min: this.min,
      max: this.max,
      sum: this.sum,
      sumSquares: this.sumSquares,
      nan: this.nan,
      buckets,
      counts,
    };
  }

  reset(): void {
    this.count = 0;
    this.min = Infinity;
    this.max = -Infinity;
    this.sum = 0;
    this.sumSquares = 0;
    this.nan = 0;
    this.counts?.fill(0);
  }
}

function summary(s: { count: number; min: number; max: number; sum: number; nan: number }): Record<string, number> {
  const hasNaN = s.nan > 0;
  return {
    count: s.count,
    min: hasNaN ? NaN : s.min,
    max: hasNaN ? NaN : s.max,
    mean: s.count > 0 ? s.sum / s.count : 0,
  };
}

class HistogramAccumulator implements Accumulator<HistogramState> {
  private readonly histogram = new Histogram();
  get count(): number {
    return this.histogram.count;
  }
  append(value: number): void {
    this.histogram.add(value);
  }
  value(): Record<string, number> {
    return summary(this.histogram);
  }
  state(): HistogramState {
    return this.histogram.toState();
  }
  reset(): void {
    this.histogram.reset();
  }
}

/**
 * The buckets of a state for drawing: only the non-empty ones, each with its upper edge. NaN
 * values are counted in `count` but sit in no bucket.
 */
function histogramData(s: HistogramState): HistogramData {
  // `+ 0`: −0 is reported as 0, as every reduced value is.
  return {
    count: s.count,
    min: s.min + 0,
    max: s.max + 0,
    sum: s.sum + 0,
    sumSquares: s.sumSquares,
    bucketLimits: s.buckets.map((b) => HISTOGRAM_EDGES[b] ?? NaN),
    bucketCounts: [...s.counts],
  };
}

/**
 * A valid `HistogramState`: its numbers, bucket indexes among the shared edges in ascending order
 * with one count each, and as many values in its buckets and `nan` as `count` says.
 */
function checkHistogram(s: Readonly<Record<string, unknown>>): string | undefined {
  const problem = firstProblem(versionOne(s), numbers(s, ["min", "max", "sum", "sumSquares"]), counts(s, ["nan"]));
  if (problem !== undefined) return problem;
  const buckets = s["buckets"];
  const bucketCounts = s["counts"];
  if (!Array.isArray(buckets) || !Array.isArray(bucketCounts) || buckets.length !== bucketCounts.length)
    return "buckets and counts must be lists of one length";
  const indexes: readonly unknown[] = buckets;
  const values: readonly unknown[] = bucketCounts;
  let previous = -1;
  let held = Number(s["nan"]);
  for (let i = 0; i < indexes.length; i++) {
    const b = indexes[i];
    const n = values[i];
    if (!Number.isInteger(b) || Number(b) <= previous || Number(b) >= EDGE_COUNT)
      return `bucket ${describe(b)} is not an ascending index below ${EDGE_COUNT}`;
    if (!isCount(n)) return `bucket counts must be finite numbers ≥ 0, got ${describe(n)}`;
    previous = Number(b);
    held += n;
  }
  const count = Number(s["count"]);
  // Counts may be weights: allow the rounding of their sum.
  return Math.abs(held - count) <= 1e-9 * Math.max(1, count)
    ? undefined
    : `its buckets and nan hold ${held} values, but count is ${count}`;
}

let edgeIndex: Map<number, number> | null = null;

/** Index of each default edge, to find the empty buckets between two and a bucket's lower edge. */
function defaultEdgeIndex(): Map<number, number> {
  if (edgeIndex === null) {
    edgeIndex = new Map();
    HISTOGRAM_EDGES.forEach((edge, i) => edgeIndex?.set(edge, i));
  }
  return edgeIndex;
}

/**
 * The lower edge of the default bucket whose upper edge is `limit`; undefined when `limit` is
 * not a default edge (a custom reduction's limits) or is the lowest one (its bucket reaches −∞).
 */
export function lowerEdgeOf(limit: number): number | undefined {
  const at = defaultEdgeIndex().get(limit);
  return at === undefined || at === 0 ? undefined : HISTOGRAM_EDGES[at - 1];
}

/**
 * The upper edge of the default bucket above the one whose upper edge is `limit`; undefined when
 * `limit` is not a default edge or is the highest one.
 */
export function edgeAbove(limit: number): number | undefined {
  const at = defaultEdgeIndex().get(limit);
  return at === undefined ? undefined : HISTOGRAM_EDGES[at + 1];
}

/**
 * Buckets for readers that take bucket i as (limit[i-1], limit[i]] (TensorBoard's
 * `HistogramProto`, W&B's bins). rankscope keeps only non-empty buckets, so an empty stretch
 * between two kept buckets gets one empty bucket (as TensorFlow's own encoder writes), else the
 * next bucket would seem to span it. Limits that are not the default edges (a custom reduction)
 * are taken as given.
 */
export function contiguousBuckets(data: HistogramData): { limits: number[]; counts: number[] } {
  const index = defaultEdgeIndex();
  const limits: number[] = [];
  const counts: number[] = [];
  let previous = -1;
  for (const [i, limit] of data.bucketLimits.entries()) {
    const at = index.get(limit);
    if (at === undefined) {
      previous = -1;
    } else {
      const emptyBelow = HISTOGRAM_EDGES[at - 1];
      if (previous >= 0 && at - 1 > previous && emptyBelow !== undefined) {
        limits.push(emptyBelow);
        counts.push(0);
      }
      previous = at;
    }
    limits.push(limit);
    counts.push(data.bucketCounts[i] ?? 0);
  }
  return { limits, counts };
}

/** `Reduce.HISTOGRAM`. */
export const histogramReduce: NumericReduceDefinition<HistogramState> = {
  name: "histogram",
  create: () => new HistogramAccumulator(),
  merge(states) {
    const h = new Histogram();
    for (const s of states) h.addState(s);
    return h.toState();
  },
  value: summary,
  histogram: histogramData,
  check: checkHistogram,
};
