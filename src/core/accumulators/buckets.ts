/**
 * `Reduce.buckets(boundaries)`: a histogram with explicit bucket boundaries (OpenTelemetry's
 * explicit-bucket histogram: bucket i holds (b[i-1], b[i]], the last one everything above the last
 * boundary) *and* the quantile sketch of `Reduce.QUANTILES`, in one state. Both merge exactly by
 * adding counts, so the buckets and p50/p90/p99 across every rank come from one recording: the
 * buckets are what OTLP, Prometheus and TensorBoard draw, the quantiles what a chart plots.
 *
 * Outputs: `key/count`, `key/mean`, `key/p50`, `key/p90`, `key/p99` (quantiles within the sketch's
 * 1% relative error, count and mean exact); `histogram()` gives the buckets with their boundaries.
 * The boundaries are part of the reduce name (`buckets(0.01,0.02,…)`), so a state from any rank
 * merges with the same boundaries, and a receiver needs no registration.
 */
import type { Accumulator, AccumulatorState, HistogramData, NumericReduceDefinition } from "../reduce.js";
import {
  checkQuantiles,
  DEFAULT_QUANTILES,
  quantileSuffix,
  quantileValues,
  Sketch,
  sketchOf,
  type QuantileOutput,
  type QuantilesState,
} from "./quantiles.js";
import { describe, firstProblem, isCount, numbers, versionOne } from "./state-check.js";

/** Plain state: the sketch, the sum of squares, and a count per bucket (one more than the boundaries). */
export interface BucketsState extends AccumulatorState {
  readonly sketch: QuantilesState;
  readonly sumSquares: number;
  readonly counts: readonly number[];
}

const OUTPUTS: readonly QuantileOutput[] = DEFAULT_QUANTILES.map((q): QuantileOutput => [quantileSuffix(q), q]);

/** Index of the bucket of `value`: the first boundary ≥ value, else the overflow bucket (NaN goes there too). */
function bucketOf(boundaries: Float64Array, value: number): number {
  let i = 0;
  while (i < boundaries.length && !((boundaries[i] ?? 0) >= value)) i++;
  return value !== value ? boundaries.length : i;
}

class BucketsAccumulator implements Accumulator<BucketsState> {
  private readonly sketch = new Sketch();
  private sumSquares = 0;
  private readonly counts: Float64Array;
  constructor(private readonly boundaries: Float64Array) {
    this.counts = new Float64Array(boundaries.length + 1);
  }
  get count(): number {
    return this.sketch.count;
  }
  append(value: number): void {
    this.sketch.add(value);
    this.sumSquares += value * value;
    const i = bucketOf(this.boundaries, value);
    this.counts[i] = (this.counts[i] ?? 0) + 1;
  }
  value(): Record<string, number> {
    return bucketsValue(this.sketch);
  }
  state(): BucketsState {
    return {
      v: 1,
      count: this.sketch.count,
      sketch: this.sketch.toState(),
      sumSquares: this.sumSquares,
      counts: [...this.counts],
    };
  }
  reset(): void {
    this.sketch.reset();
    this.sumSquares = 0;
    this.counts.fill(0);
  }
}

function bucketsValue(sketch: Sketch): Record<string, number> {
  return {
    count: sketch.count,
    mean: sketch.count > 0 ? sketch.sum / sketch.count : 0,
    ...quantileValues(sketch, OUTPUTS),
  };
}

function merge(states: readonly BucketsState[], width: number): BucketsState {
  const counts = new Array<number>(width).fill(0);
  let sumSquares = 0;
  for (const s of states) {
    sumSquares += s.sumSquares;
    for (let i = 0; i < width; i++) counts[i] = (counts[i] ?? 0) + (s.counts[i] ?? 0);
  }
  const sketch = sketchOf(states.map((s) => s.sketch)).toState();
  return { v: 1, count: sketch.count, sketch, sumSquares, counts };
}

/** A valid state for `width` buckets: a valid sketch of `count` values, and bucket counts adding up to it. */
function checkBuckets(s: Readonly<Record<string, unknown>>, width: number): string | undefined {
  const problem = firstProblem(versionOne(s), numbers(s, ["sumSquares"]));
  if (problem !== undefined) return problem;
  const sketch = s["sketch"];
  if (typeof sketch !== "object" || sketch === null || Array.isArray(sketch)) return "sketch must be a quantiles state";
  const sketchProblem = checkQuantiles(Object.fromEntries(Object.entries(sketch)));
  if (sketchProblem !== undefined) return `sketch: ${sketchProblem}`;
  if (!("count" in sketch) || sketch.count !== s["count"]) return "sketch count differs from count";
  const counts = s["counts"];
  if (!Array.isArray(counts) || counts.length !== width) return `counts must be a list of ${width} bucket counts`;
  const list: readonly unknown[] = counts;
  let held = 0;
  for (const n of list) {
    if (!isCount(n)) return `bucket counts must be finite numbers ≥ 0, got ${describe(n)}`;
    held += n;
  }
  return held === s["count"] ? undefined : `its buckets hold ${held} values, but count is ${describe(s["count"])}`;
}

/** The buckets as backends draw them: every bucket, the last one's upper edge the largest double. */
function histogramData(s: BucketsState, boundaries: Float64Array): HistogramData {
  return {
    count: s.count,
    min: s.sketch.min + 0,
    max: s.sketch.max + 0,
    sum: s.sketch.sum + 0,
    sumSquares: s.sumSquares,
    bucketLimits: [...boundaries, Number.MAX_VALUE],
    bucketCounts: [...s.counts],
  };
}

/** The explicit-bucket histogram and sketch reduction with these boundaries (finite, strictly ascending), under `name`. */
export function bucketsReduce(name: string, boundaries: readonly number[]): NumericReduceDefinition<BucketsState> {
  if (boundaries.length === 0) throw new RangeError("Reduce.buckets needs at least one bucket boundary");
  for (const [i, b] of boundaries.entries()) {
    if (!Number.isFinite(b) || (i > 0 && !(b > (boundaries[i - 1] ?? -Infinity)))) {
      throw new RangeError(
        `bucket boundaries must be finite numbers in strictly ascending order, got ${boundaries.join(", ")}`,
      );
    }
  }
  const edges = Float64Array.from(boundaries);
  const width = edges.length + 1;
  return {
    name,
    create: () => new BucketsAccumulator(edges),
    merge: (states) => merge(states, width),
    value: (state) => bucketsValue(sketchOf([state.sketch])),
    histogram: (state) => histogramData(state, edges),
    check: (state) => checkBuckets(state, width),
  };
}
