/**
 * `Reduce.QUANTILES`: a mergeable relative-error quantile sketch (the DDSketch algorithm).
 *
 * A value v > 0 goes to bucket ceil(log_γ v) with γ = (1 + α) / (1 − α), so the value at any rank
 * is answered within relative error α (1%), and two sketches merge exactly by adding bucket
 * counts — which is what makes p99 across ranks meaningful. Buckets live in a dense
 * `Float64Array` that grows only when a value lands outside the range seen so far, so appending
 * does not allocate in steady state.
 *
 * **Which quantile**: numpy's default (`np.quantile(x, q)`, method "linear", Hyndman and Fan's
 * type 7): with the n values sorted, h = q·(n − 1), and the quantile interpolates linearly between
 * the values at ranks ⌊h⌋ and ⌊h⌋ + 1 (numpy's own `_lerp`). The sketch gives those two values,
 * each within 1% (the smallest and largest exactly: min and max are kept; values within 1e-12 of 0
 * count as 0), so the result is within 1% of |x⌊h⌋|·(1 − t) + |x⌊h⌋₊₁|·t of numpy's (t = h − ⌊h⌋):
 * within 1% of numpy's value whenever the two neighbours have the same sign. Any NaN makes every
 * quantile NaN, as in numpy. With ±Infinity among the values, numpy's arithmetic gives NaN
 * wherever an infinite neighbour enters the interpolation, even at t = 0; here a whole rank
 * (t = 0) is its value (`[-∞, 1, ∞]`: p0 −∞, p50 1, p100 ∞) and the rest is numpy's `_lerp`.
 *
 * Why not `@datadog/sketches-js`: its `merge` drops the negative store (merging sketches of
 * [-5,-4,-3] and [-2,-1,1] reports 3 negative values instead of 5) and `accept(Infinity)` asks for
 * an infinite store (both seen with version 2.1.1). See docs/DESIGN.md.
 */
import type { Accumulator, AccumulatorState, NumericReduceDefinition } from "../reduce.js";
import { counts, describe, firstProblem, isCount, numbers, versionOne } from "./state-check.js";

/** Relative accuracy of every quantile sketch. */
const QUANTILE_RELATIVE_ACCURACY = 0.01;
const GAMMA = (1 + QUANTILE_RELATIVE_ACCURACY) / (1 - QUANTILE_RELATIVE_ACCURACY);
const LOG_GAMMA = Math.log(GAMMA);
/** Magnitudes below this are counted as zero (the sketch cannot tell them apart usefully). */
const MIN_INDEXABLE = 1e-12;

/** The quantiles reported by plain `Reduce.QUANTILES`. */
export const DEFAULT_QUANTILES: readonly number[] = [0.5, 0.9, 0.99];

/** Buckets of one sign, dense from `offset` to `offset + counts.length - 1`. */
export interface BucketRun {
  readonly offset: number;
  readonly counts: readonly number[];
}

/** Plain state of a quantile sketch. */
export interface QuantilesState extends AccumulatorState {
  readonly sum: number;
  readonly min: number;
  readonly max: number;
  readonly zeros: number;
  readonly nan: number;
  readonly posInf: number;
  readonly negInf: number;
  readonly positive: BucketRun;
  readonly negative: BucketRun;
}

/** A growable dense run of bucket counts. */
class DenseBuckets {
  counts = new Float64Array(0);
  offset = 0;
  total = 0;
  /** The buckets that may be non-zero are at indices lo..hi (none when lo > hi): `toRun` and `reset` touch only those. */
  lo = 0;
  hi = -1;

  add(key: number, n: number): void {
    let i = key - this.offset;
    if (i < 0 || i >= this.counts.length) {
      this.grow(key);
      i = key - this.offset;
    }
    this.counts[i] = (this.counts[i] ?? 0) + n;
    this.total += n;
    if (this.hi < this.lo) this.lo = this.hi = i;
    else if (i < this.lo) this.lo = i;
    else if (i > this.hi) this.hi = i;
  }

  private grow(key: number): void {
    if (this.counts.length === 0) {
      this.counts = new Float64Array(64);
      this.offset = key - 32;
      return;
    }
    const low = Math.min(this.offset, key);
    const high = Math.max(this.offset + this.counts.length - 1, key);
    const span = high - low + 1;
    const length = Math.max(span + 32, this.counts.length * 2);
    const next = new Float64Array(length);
    const newOffset = low - Math.floor((length - span) / 2);
    next.set(this.counts, this.offset - newOffset);
    this.lo += this.offset - newOffset;
    this.hi += this.offset - newOffset;
    this.counts = next;
    this.offset = newOffset;
  }

  /** The bucket key holding the value of the given 0-based rank, ascending by key. */
  keyAtRank(rank: number): number {
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i] ?? 0;
      if (seen > rank) return this.offset + i;
    }
    return this.offset + this.counts.length - 1;
  }

  toRun(): BucketRun {
    let first = Math.max(this.lo, 0);
    let last = Math.min(this.hi, this.counts.length - 1);
    while (first <= last && this.counts[first] === 0) first++;
    while (last >= first && this.counts[last] === 0) last--;
    if (first > last) return { offset: 0, counts: [] };
    // A plain loop: Array.from over a typed array goes through its iterator (several times slower).
    const counts: number[] = [];
    for (let i = first; i <= last; i++) counts.push(this.counts[i] ?? 0);
    return { offset: this.offset + first, counts };
  }

  addRun(run: BucketRun): void {
    for (let i = 0; i < run.counts.length; i++) {
      const n = run.counts[i] ?? 0;
      if (n > 0) this.add(run.offset + i, n);
    }
  }

  reset(): void {
    if (this.hi >= this.lo) this.counts.fill(0, this.lo, this.hi + 1);
    this.lo = 0;
    this.hi = -1;
    this.total = 0;
  }
}

function bucketKey(magnitude: number): number {
  return Math.ceil(Math.log(magnitude) / LOG_GAMMA);
}

/** The representative value of a bucket: within α of every value in it. */
function bucketValue(key: number): number {
  return (2 * Math.pow(GAMMA, key)) / (GAMMA + 1);
}

/** The sketch itself (also inside `Reduce.buckets`' accumulator). */
export class Sketch {
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  zeros = 0;
  nan = 0;
  posInf = 0;
  negInf = 0;
  readonly positive = new DenseBuckets();
  readonly negative = new DenseBuckets();

  add(value: number): void {
    this.count++;
    this.sum += value;
    if (value > MIN_INDEXABLE) {
      if (value === Infinity) this.posInf++;
      else this.positive.add(bucketKey(value), 1);
    } else if (value < -MIN_INDEXABLE) {
      if (value === -Infinity) this.negInf++;
      else this.negative.add(bucketKey(-value), 1);
    } else if (value === value) {
      this.zeros++;
    } else {
      this.nan++;
      return;
    }
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
  }

  addState(s: QuantilesState): void {
    this.addScalars(s.count, s.sum, s.min, s.max, s.zeros, s.nan, s.posInf, s.negInf);
    this.positive.addRun(s.positive);
    this.negative.addRun(s.negative);
  }

  /**
   * A state's numbers but its buckets (`addState` without the runs): a caller reading a state's
   * buckets from elsewhere (a wire frame's bytes) adds them with `positive.add` / `negative.add`,
   * each count > 0, exactly as `addState` would.
   */
  addScalars(
    count: number,
    sum: number,
    min: number,
    max: number,
    zeros: number,
    nan: number,
    posInf: number,
    negInf: number,
  ): void {
    this.count += count;
    this.sum += sum;
    this.zeros += zeros;
    this.nan += nan;
    this.posInf += posInf;
    this.negInf += negInf;
    if (min < this.min) this.min = min;
    if (max > this.max) this.max = max;
  }

  /** The q-quantile as numpy's default ("linear") computes it, from the sketch (see the module comment). */
  quantile(q: number): number {
    if (this.nan > 0) return NaN;
    const ordered = this.count - this.nan;
    if (ordered === 0) return NaN;
    const h = (ordered - 1) * Math.min(Math.max(q, 0), 1);
    const below = Math.floor(h);
    const t = h - below;
    const a = this.valueAtRank(below);
    return t === 0 ? a : lerp(a, this.valueAtRank(below + 1), t);
  }

  /** The value at a 0-based rank of the sorted values (NaN left out): exact at the ends, else within 1%. */
  private valueAtRank(rank: number): number {
    if (rank < this.negInf) return -Infinity;
    let r = rank - this.negInf;
    const finite = this.negative.total + this.zeros + this.positive.total;
    if (r >= finite) return Infinity;
    // The smallest and largest values are kept exactly (min and max, when no ±Infinity was recorded).
    if (r === 0 && this.negInf === 0) return this.min;
    if (r === finite - 1 && this.posInf === 0) return this.max;
    let result: number;
    if (r < this.negative.total) {
      result = -bucketValue(this.negative.keyAtRank(this.negative.total - 1 - r));
    } else if ((r -= this.negative.total) < this.zeros) {
      result = 0;
    } else {
      result = bucketValue(this.positive.keyAtRank(r - this.zeros));
    }
    // Never outside the exact extremes.
    return Math.min(Math.max(result, this.min), this.max);
  }

  toState(): QuantilesState {
    return {
      v: 1,
      count: this.count,
      sum: this.sum,
      min: this.min,
      max: this.max,
      zeros: this.zeros,
      nan: this.nan,
      posInf: this.posInf,
      negInf: this.negInf,
      positive: this.positive.toRun(),
      negative: this.negative.toRun(),
    };
  }

  reset(): void {
    this.count = 0;
    this.sum = 0;
    this.min = Infinity;
    this.max = -Infinity;
    this.zeros = 0;
    this.nan = 0;
    this.posInf = 0;
    this.negInf = 0;
    this.positive.reset();
    this.negative.reset();
  }
}

/** numpy's `_lerp(a, b, t)`: a + (b − a)·t, computed from b's end for t ≥ 0.5, as numpy does. */
function lerp(a: number, b: number, t: number): number {
  const difference = b - a;
  return t >= 0.5 ? b - difference * (1 - t) : a + difference * t;
}

/** `p50` for 0.5, `p99.9` for 0.999. */
export function quantileSuffix(q: number): string {
  return `p${Number((q * 100).toFixed(6))}`;
}

/** One reported quantile: its suffix (`p99`) and its q (0.99). */
export type QuantileOutput = readonly [suffix: string, q: number];

export function quantileValues(sketch: Sketch, outputs: readonly QuantileOutput[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [suffix, q] of outputs) out[suffix] = sketch.quantile(q);
  return out;
}

class QuantilesAccumulator implements Accumulator<QuantilesState> {
  private readonly sketch = new Sketch();
  constructor(private readonly outputs: readonly QuantileOutput[]) {}
  get count(): number {
    return this.sketch.count;
  }
  append(value: number): void {
    this.sketch.add(value);
  }
  value(): Record<string, number> {
    return quantileValues(this.sketch, this.outputs);
  }
  state(): QuantilesState {
    return this.sketch.toState();
  }
  reset(): void {
    this.sketch.reset();
  }
}

export function sketchOf(states: readonly QuantilesState[]): Sketch {
  const sketch = new Sketch();
  for (const s of states) sketch.addState(s);
  return sketch;
}

/** The lowest and highest bucket keys a finite value can have (one more either side for rounding). */
export const LOWEST_KEY = bucketKey(MIN_INDEXABLE) - 1;
export const HIGHEST_KEY = bucketKey(Number.MAX_VALUE) + 1;

/** What is wrong with one sign's buckets: keys outside what a double can reach, or a count that is not one. */
function runProblem(name: string, run: unknown): { problem?: string; total: number } {
  if (run === null || typeof run !== "object" || Array.isArray(run))
    return { problem: `${name} must be { offset, counts }`, total: 0 };
  const offset: unknown = "offset" in run ? run.offset : undefined;
  const values: unknown = "counts" in run ? run.counts : undefined;
  if (!Number.isSafeInteger(offset) || !Array.isArray(values))
    return { problem: `${name} must carry an integer offset and a list of counts`, total: 0 };
  const list: readonly unknown[] = values;
  const first = Number(offset);
  if (list.length > 0 && (first < LOWEST_KEY || first + list.length - 1 > HIGHEST_KEY)) {
    return {
      problem: `${name} buckets ${first}..${first + list.length - 1} lie outside ${LOWEST_KEY}..${HIGHEST_KEY}, the keys of finite numbers`,
      total: 0,
    };
  }
  let total = 0;
  for (const n of list) {
    if (!isCount(n)) return { problem: `${name} counts must be finite numbers ≥ 0, got ${describe(n)}`, total: 0 };
    total += n;
  }
  return { total };
}

/**
 * A valid `QuantilesState`: its numbers and counts, buckets within the keys a double can reach (a
 * run far outside would make `merge` allocate without bound), and as many values in its buckets
 * and special counts as `count` says.
 */
export function checkQuantiles(s: Readonly<Record<string, unknown>>): string | undefined {
  const problem = firstProblem(
    versionOne(s),
    numbers(s, ["sum", "min", "max"]),
    counts(s, ["zeros", "nan", "posInf", "negInf"]),
  );
  if (problem !== undefined) return problem;
  const positive = runProblem("positive", s["positive"]);
  const negative = runProblem("negative", s["negative"]);
  if (positive.problem !== undefined || negative.problem !== undefined) return positive.problem ?? negative.problem;
  const held =
    positive.total + negative.total + Number(s["zeros"]) + Number(s["nan"]) + Number(s["posInf"]) + Number(s["negInf"]);
  return held === s["count"]
    ? undefined
    : `its buckets and special counts hold ${held} values, but count is ${describe(s["count"])}`;
}

/** A quantiles reduction reporting the given quantiles (each in [0, 1]) under `name`. */
export function quantilesReduce(
  name: string,
  quantiles: readonly number[] = DEFAULT_QUANTILES,
): NumericReduceDefinition<QuantilesState> {
  for (const q of quantiles) {
    if (!(q >= 0 && q <= 1)) throw new RangeError(`quantiles must be numbers in [0, 1], got ${String(q)}`);
  }
  const outputs = quantiles.map((q): QuantileOutput => [quantileSuffix(q), q]);
  return {
    name,
    create: () => new QuantilesAccumulator(outputs),
    merge: (states) => sketchOf(states).toState(),
    value: (state) => quantileValues(sketchOf([state]), outputs),
    check: checkQuantiles,
  };
}
