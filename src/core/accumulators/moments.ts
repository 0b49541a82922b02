/**
 * The arithmetic reductions: MEAN, SUM, MAX, MIN and STD.
 *
 * NaN and ±Infinity propagate as IEEE arithmetic does (a diverged loss must show as NaN), so MAX
 * and MIN use `Math.max`/`Math.min`, which return NaN when any input is NaN.
 */
import type { Accumulator, AccumulatorState, NumericReduceDefinition } from "../reduce.js";
import { firstProblem, numbers, versionOne } from "./state-check.js";

/** State of MEAN and SUM: the running sum and how many values it holds. */
export interface SumState extends AccumulatorState {
  readonly sum: number;
}

class SumAccumulator implements Accumulator<SumState> {
  count = 0;
  sum = 0;
  constructor(private readonly divide: boolean) {}
  append(value: number): void {
    this.sum += value;
    this.count++;
  }
  value(): number {
    return this.divide ? meanOf(this) : this.sum;
  }
  state(): SumState {
    return { v: 1, count: this.count, sum: this.sum };
  }
  reset(): void {
    this.sum = 0;
    this.count = 0;
  }
}

function meanOf(s: { sum: number; count: number }): number {
  return s.count > 0 ? s.sum / s.count : 0;
}

function mergeSums(states: readonly SumState[]): SumState {
  let sum = 0;
  let count = 0;
  for (const s of states) {
    sum += s.sum;
    count += s.count;
  }
  return { v: 1, count, sum };
}

/** A valid `SumState`: version 1 with a number `sum` (checked for every key of every answer: no allocation). */
const checkSum = (s: Readonly<Record<string, unknown>>): string | undefined =>
  s["v"] !== 1 ? versionOne(s) : typeof s["sum"] !== "number" ? numbers(s, ["sum"]) : undefined;

/** `Reduce.MEAN`: arithmetic mean (0 when nothing was recorded). */
export const meanReduce: NumericReduceDefinition<SumState> = {
  name: "mean",
  create: () => new SumAccumulator(true),
  merge: mergeSums,
  value: meanOf,
  check: checkSum,
};

/** `Reduce.SUM`: the sum of every value. */
export const sumReduce: NumericReduceDefinition<SumState> = {
  name: "sum",
  create: () => new SumAccumulator(false),
  merge: mergeSums,
  value: (s) => s.sum,
  check: checkSum,
};

/** State of MAX and MIN: the extreme so far. */
interface ExtremeState extends AccumulatorState {
  readonly value: number;
}

class MaxAccumulator implements Accumulator<ExtremeState> {
  count = 0;
  max = -Infinity;
  append(value: number): void {
    this.max = Math.max(this.max, value);
    this.count++;
  }
  value(): number {
    return this.max;
  }
  state(): ExtremeState {
    return { v: 1, count: this.count, value: this.max };
  }
  reset(): void {
    this.max = -Infinity;
    this.count = 0;
  }
}

class MinAccumulator implements Accumulator<ExtremeState> {
  count = 0;
  min = Infinity;
  append(value: number): void {
    this.min = Math.min(this.min, value);
    this.count++;
  }
  value(): number {
    return this.min;
  }
  state(): ExtremeState {
    return { v: 1, count: this.count, value: this.min };
  }
  reset(): void {
    this.min = Infinity;
    this.count = 0;
  }
}

function mergeExtremes(
  states: readonly ExtremeState[],
  pick: (a: number, b: number) => number,
  start: number,
): ExtremeState {
  let value = start;
  let count = 0;
  for (const s of states) {
    value = pick(value, s.value);
    count += s.count;
  }
  return { v: 1, count, value };
}

/** A valid `ExtremeState`: version 1 with a number `value`. */
const checkExtreme = (s: Readonly<Record<string, unknown>>): string | undefined =>
  s["v"] !== 1 ? versionOne(s) : typeof s["value"] !== "number" ? numbers(s, ["value"]) : undefined;

/** `Reduce.MAX`: the largest value. */
export const maxReduce: NumericReduceDefinition<ExtremeState> = {
  name: "max",
  create: () => new MaxAccumulator(),
  merge: (states) => mergeExtremes(states, Math.max, -Infinity),
  value: (s) => s.value,
  check: checkExtreme,
};

/** `Reduce.MIN`: the smallest value. */
export const minReduce: NumericReduceDefinition<ExtremeState> = {
  name: "min",
  create: () => new MinAccumulator(),
  merge: (states) => mergeExtremes(states, Math.min, Infinity),
  value: (s) => s.value,
  check: checkExtreme,
};

/**
 * State of STD: count, mean and M2 (the sum of squared deviations from the mean), as in
 * Welford's online algorithm. Keeping the mean instead of a sum of squares is what makes the
 * result exact for values with a large mean and a small spread (1e9 + {0, 1, 2}), where
 * `E[x²] − E[x]²` cancels catastrophically.
 */
interface MomentsState extends AccumulatorState {
  readonly mean: number;
  readonly m2: number;
}

class StdAccumulator implements Accumulator<MomentsState> {
  count = 0;
  mean = 0;
  m2 = 0;
  append(value: number): void {
    this.count++;
    const delta = value - this.mean;
    this.mean = chanMean(this.mean, this.count - 1, delta, value, 1, this.count);
    this.m2 += delta * (value - this.mean);
  }
  value(): number {
    return populationStd(this);
  }
  state(): MomentsState {
    return { v: 1, count: this.count, mean: this.mean, m2: this.m2 };
  }
  reset(): void {
    this.count = 0;
    this.mean = 0;
    this.m2 = 0;
  }
}

function populationStd(s: { count: number; m2: number }): number {
  return s.count < 2 ? 0 : Math.sqrt(s.m2 / s.count);
}

/**
 * The mean of `count` values averaging `mean` and `addedCount` more averaging `addedMean` (`delta`
 * = addedMean − mean, `total` their count): `mean + delta·addedCount/total`, the Welford and Chan
 * step. When two finite means are so far apart that `delta` overflows (1.8e308 and −2e293), that
 * step would give ±Infinity, and then a negative M2; the weighted sum stays finite, so it is used
 * instead. Both merges (this module's and the wire's column merge) go through here, so they agree
 * bit for bit.
 */
export function chanMean(
  mean: number,
  count: number,
  delta: number,
  addedMean: number,
  addedCount: number,
  total: number,
): number {
  if (count === 0) return addedMean;
  const next = mean + (delta * addedCount) / total;
  if (Number.isFinite(next) || !Number.isFinite(mean) || !Number.isFinite(addedMean)) return next;
  return mean * (count / total) + addedMean * (addedCount / total);
}

/**
 * M2 of the same union as `chanMean`: `m2 + addedM2 + delta²·count·addedCount/total`. The first
 * state is taken as it is: with `count` 0 the term is 0·delta², which is NaN once delta² overflows
 * (a mean past 1.3e154), and made every merged std of such values NaN.
 */
export function chanM2(
  m2: number,
  addedM2: number,
  delta: number,
  count: number,
  addedCount: number,
  total: number,
): number {
  return count === 0 ? addedM2 : m2 + addedM2 + (delta * delta * count * addedCount) / total;
}

/** Chan et al.'s parallel merge of (count, mean, M2) states. */
function mergeMoments(states: readonly MomentsState[]): MomentsState {
  let count = 0;
  let mean = 0;
  let m2 = 0;
  for (const s of states) {
    if (s.count === 0) continue;
    const total = count + s.count;
    const delta = s.mean - mean;
    mean = chanMean(mean, count, delta, s.mean, s.count, total);
    m2 = chanM2(m2, s.m2, delta, count, s.count, total);
    count = total;
  }
  return { v: 1, count, mean, m2 };
}

/** A valid `MomentsState`: version 1, numbers `mean` and `m2`, and M2 — a sum of squares — never negative (NaN when a value was). */
function checkMoments(s: Readonly<Record<string, unknown>>): string | undefined {
  const m2 = s["m2"];
  if (s["v"] !== 1 || typeof s["mean"] !== "number" || typeof m2 !== "number")
    return firstProblem(versionOne(s), numbers(s, ["mean", "m2"]));
  return m2 < 0 ? "m2 must not be negative" : undefined;
}

/** `Reduce.STD`: population standard deviation; 0 for fewer than two values. */
export const stdReduce: NumericReduceDefinition<MomentsState> = {
  name: "std",
  create: () => new StdAccumulator(),
  merge: mergeMoments,
  value: populationStd,
  check: checkMoments,
};

/** The accumulator classes, for readers of their fields (the wire encoder takes their states without a state object). */
export { MaxAccumulator, MinAccumulator, StdAccumulator, SumAccumulator };
