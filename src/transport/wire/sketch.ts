/**
 * The SKETCH section of the wire format (see `format.ts`): quantile sketches (DDSketch states) in
 * columns — the scalars as f64 columns, each run's offset and length, then every run's bucket
 * counts — so neither side goes through JSON for them.
 */
import type { BucketRun, QuantilesState } from "../../core/accumulators/quantiles.js";
import type { AccumulatorState } from "../../core/reduce.js";
import { pad8 } from "./format.js";

/** Write the SKETCH columns of `sketches` at `offset` (after the section's ids and counts); returns the offset after them. */
export function writeSketches(buffer: ArrayBuffer, start: number, sketches: readonly QuantilesState[]): number {
  const m = sketches.length;
  let offset = start;
  const f64 = (): Float64Array => {
    const column = new Float64Array(buffer, offset, m);
    offset += m * 8;
    return column;
  };
  const sum = f64();
  const min = f64();
  const max = f64();
  const zeros = f64();
  const nan = f64();
  const posInf = f64();
  const negInf = f64();
  const i32 = (): Int32Array => {
    const column = new Int32Array(buffer, offset, m);
    offset += pad8(m * 4);
    return column;
  };
  const u32 = (): Uint32Array => {
    const column = new Uint32Array(buffer, offset, m);
    offset += pad8(m * 4);
    return column;
  };
  const positiveOffset = i32();
  const positiveLength = u32();
  const negativeOffset = i32();
  const negativeLength = u32();
  let buckets = 0;
  for (const s of sketches) buckets += s.positive.counts.length + s.negative.counts.length;
  const counts = new Float64Array(buffer, offset, buckets);
  offset += buckets * 8;
  let b = 0;
  sketches.forEach((s, j) => {
    sum[j] = s.sum;
    min[j] = s.min;
    max[j] = s.max;
    zeros[j] = s.zeros;
    nan[j] = s.nan;
    posInf[j] = s.posInf;
    negInf[j] = s.negInf;
    positiveOffset[j] = s.positive.offset;
    positiveLength[j] = s.positive.counts.length;
    negativeOffset[j] = s.negative.offset;
    negativeLength[j] = s.negative.counts.length;
    for (const c of s.positive.counts) counts[b++] = c;
    for (const c of s.negative.counts) counts[b++] = c;
  });
  return offset;
}

function isRun(value: unknown): value is BucketRun {
  if (value === null || typeof value !== "object" || !("offset" in value) || !("counts" in value)) return false;
  const { offset, counts } = value;
  if (
    typeof offset !== "number" ||
    !Number.isInteger(offset) ||
    offset < -0x80000000 ||
    offset > 0x7fffffff ||
    !Array.isArray(counts)
  )
    return false;
  for (const c of counts) if (typeof c !== "number") return false;
  return true;
}

/** A quantile sketch's version-1 state, exactly (what a SKETCH section can carry). */
export function isSketchState(state: AccumulatorState): state is QuantilesState {
  return (
    "sum" in state &&
    typeof state.sum === "number" &&
    "min" in state &&
    typeof state.min === "number" &&
    "max" in state &&
    typeof state.max === "number" &&
    "zeros" in state &&
    typeof state.zeros === "number" &&
    "nan" in state &&
    typeof state.nan === "number" &&
    "posInf" in state &&
    typeof state.posInf === "number" &&
    "negInf" in state &&
    typeof state.negInf === "number" &&
    "positive" in state &&
    isRun(state.positive) &&
    "negative" in state &&
    isRun(state.negative)
  );
}

/**
 * Read the SKETCH columns of `m` states at `at` (after the section's ids and counts) into `states`;
 * returns the offset after them. Throws `WireFormatError` past the end.
 */
export function readSketches(
  buffer: ArrayBufferLike,
  start: number,
  at: number,
  m: number,
  countColumn: ArrayLike<number>,
  states: AccumulatorState[],
  need: (offset: number, bytes: number, what: string) => void,
): number {
  let offset = at;
  need(offset, m * 8 * 7 + 4 * pad8(m * 4), "a sketch section's columns");
  const f64 = (): Float64Array<ArrayBufferLike> => {
    const column = new Float64Array(buffer, start + offset, m);
    offset += m * 8;
    return column;
  };
  const sum = f64();
  const min = f64();
  const max = f64();
  const zeros = f64();
  const nan = f64();
  const posInf = f64();
  const negInf = f64();
  const int = (signed: boolean): Int32Array<ArrayBufferLike> | Uint32Array<ArrayBufferLike> => {
    const column = signed ? new Int32Array(buffer, start + offset, m) : new Uint32Array(buffer, start + offset, m);
    offset += pad8(m * 4);
    return column;
  };
  const positiveOffset = int(true);
  const positiveLength = int(false);
  const negativeOffset = int(true);
  const negativeLength = int(false);
  let buckets = 0;
  for (let j = 0; j < m; j++) buckets += (positiveLength[j] ?? 0) + (negativeLength[j] ?? 0);
  need(offset, buckets * 8, "a sketch section's buckets");
  const counts = new Float64Array(buffer, start + offset, buckets);
  offset += buckets * 8;
  let b = 0;
  const run = (runOffset: number, length: number): BucketRun => {
    // A plain loop: Array.from over a typed array goes through its iterator (several times slower).
    const runCounts: number[] = [];
    for (let i = b; i < b + length; i++) runCounts.push(counts[i] ?? 0);
    b += length;
    return { offset: runOffset, counts: runCounts };
  };
  for (let j = 0; j < m; j++) {
    const positive = run(positiveOffset[j] ?? 0, positiveLength[j] ?? 0);
    const negative = run(negativeOffset[j] ?? 0, negativeLength[j] ?? 0);
    const state: QuantilesState = {
      v: 1,
      count: countColumn[j] ?? 0,
      sum: sum[j] ?? 0,
      min: min[j] ?? 0,
      max: max[j] ?? 0,
      zeros: zeros[j] ?? 0,
      nan: nan[j] ?? 0,
      posInf: posInf[j] ?? 0,
      negInf: negInf[j] ?? 0,
      positive,
      negative,
    };
    states.push(state);
  }
  return offset;
}
