/**
 * One series' points as columns (steps, walls, values), and the store's pure algorithms over them
 * (no SQLite): concatenating, sorting and de-duplicating by step, merging two series, slicing, a
 * range's extremes, and a chunk's pre-aggregated blocks. The writer, the series reads and the team
 * server's ingest share them.
 */
import { BLOCK_FIELDS, BLOCK_POINTS } from "./schema.js";

/** One series' points as three parallel columns of equal length. */
export interface SeriesColumns {
  readonly steps: Float64Array;
  readonly walls: Float64Array;
  readonly values: Float64Array;
}

/**
 * `a[i]` as a number, or a RangeError past the end (where a plain read gives `undefined`): the
 * columnar loops index typed arrays through it instead of casting. A paired run of the writer with
 * casts and with f64 showed no difference; the one loop where it did (a downsampled read's block
 * folding) keeps its casts (docs/DESIGN.md, store).
 */
export function f64(a: Float64Array, i: number): number {
  const v = a[i];
  if (v === undefined) throw new RangeError(`index ${i} is outside a column of ${a.length} values`);
  return v;
}

/** `f64` for the integer columns (key indexes, counts). */
export function int(a: Uint32Array | Int32Array, i: number): number {
  const v = a[i];
  if (v === undefined) throw new RangeError(`index ${i} is outside a column of ${a.length} values`);
  return v;
}

/** `f64` for any array of numbers (what `writeSeries` accepts). */
function num(a: ArrayLike<number>, i: number): number {
  const v = a[i];
  if (v === undefined) throw new RangeError(`index ${i} is outside an array of ${a.length} values`);
  return v;
}

/** Concatenate columns. */
function concat(parts: readonly Float64Array[]): Float64Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Float64Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Concatenate series. */
export function concatSeries(parts: readonly SeriesColumns[]): SeriesColumns {
  return {
    steps: concat(parts.map((p) => p.steps)),
    walls: concat(parts.map((p) => p.walls)),
    values: concat(parts.map((p) => p.values)),
  };
}

/** The values as a Float64Array: the array itself when it is one (it is only read), else a copy. */
function toFloat64(a: ArrayLike<number>): Float64Array {
  return a instanceof Float64Array ? a : Float64Array.from(a);
}

/** Points sorted by step, one per step (the last given wins). */
export function sortDedupe(
  steps: ArrayLike<number>,
  walls: ArrayLike<number>,
  values: ArrayLike<number>,
): SeriesColumns {
  const n = steps.length;
  let ordered = true;
  for (let i = 1; i < n; i++) {
    if (num(steps, i) <= num(steps, i - 1)) {
      ordered = false;
      break;
    }
  }
  if (ordered) return { steps: toFloat64(steps), walls: toFloat64(walls), values: toFloat64(values) };
  const index = Array.from({ length: n }, (_, i) => i);
  // Stable sort by step; among equal steps the last index is kept.
  index.sort((a, b) => num(steps, a) - num(steps, b) || a - b);
  const keep: number[] = [];
  for (let j = 0; j < n; j++) {
    const i = index[j] ?? 0;
    const next = index[j + 1];
    if (next !== undefined && steps[next] === steps[i]) continue;
    keep.push(i);
  }
  return {
    steps: Float64Array.from(keep, (i) => num(steps, i)),
    walls: Float64Array.from(keep, (i) => num(walls, i)),
    values: Float64Array.from(keep, (i) => num(values, i)),
  };
}

/** Merge two step-sorted, step-unique series; where both have a step, `b` wins. */
export function mergeByStep(a: SeriesColumns, b: SeriesColumns): SeriesColumns {
  const steps = new Float64Array(a.steps.length + b.steps.length);
  const walls = new Float64Array(steps.length);
  const values = new Float64Array(steps.length);
  let i = 0;
  let j = 0;
  let n = 0;
  while (i < a.steps.length || j < b.steps.length) {
    const sa = i < a.steps.length ? f64(a.steps, i) : Infinity;
    const sb = j < b.steps.length ? f64(b.steps, j) : Infinity;
    if (sb <= sa) {
      if (sa === sb) i++;
      steps[n] = sb;
      walls[n] = f64(b.walls, j);
      values[n] = f64(b.values, j);
      j++;
    } else {
      steps[n] = sa;
      walls[n] = f64(a.walls, i);
      values[n] = f64(a.values, i);
      i++;
    }
    n++;
  }
  return { steps: steps.subarray(0, n), walls: walls.subarray(0, n), values: values.subarray(0, n) };
}

/** The part `[start, end)` of a series (views, no copy). */
export function sliceSeries(s: SeriesColumns, start: number, end = s.steps.length): SeriesColumns {
  return {
    steps: s.steps.subarray(start, end),
    walls: s.walls.subarray(start, end),
    values: s.values.subarray(start, end),
  };
}

/** Where a chunk's min and max values are (-1 when every value is NaN), and how many values are NaN. */
interface Extremes {
  readonly minAt: number;
  readonly maxAt: number;
  readonly nans: number;
}

/** The positions of the min and max of `values[start, end)` (NaN skipped), and the NaN count. */
export function extremes(values: Float64Array, start = 0, end = values.length): Extremes & { firstNan: number } {
  let minAt = -1;
  let maxAt = -1;
  let nans = 0;
  let firstNan = -1;
  let min = Infinity;
  let max = -Infinity;
  for (let i = start; i < end; i++) {
    const v = f64(values, i);
    if (v !== v) {
      if (nans++ === 0) firstNan = i;
      continue;
    }
    if (minAt < 0 || v < min) {
      minAt = i;
      min = v;
    }
    if (maxAt < 0 || v > max) {
      maxAt = i;
      max = v;
    }
  }
  return { minAt, maxAt, nans, firstNan };
}

/** The pre-aggregated level of a chunk: one summary (BLOCK_FIELDS) per BLOCK_POINTS points. */
export function blockSummaries({ steps, walls, values }: SeriesColumns): Float64Array {
  const width = BLOCK_FIELDS.length;
  const blocks = Math.ceil(steps.length / BLOCK_POINTS);
  const out = new Float64Array(blocks * width);
  const at = (a: Float64Array, i: number): number => (i < 0 ? NaN : f64(a, i));
  for (let b = 0; b < blocks; b++) {
    const start = b * BLOCK_POINTS;
    const end = Math.min(steps.length, start + BLOCK_POINTS);
    const { minAt, maxAt, firstNan } = extremes(values, start, end);
    const o = b * width;
    out[o] = end - start;
    out[o + 1] = f64(steps, start);
    out[o + 2] = f64(walls, start);
    out[o + 3] = f64(steps, end - 1);
    out[o + 4] = f64(walls, end - 1);
    out[o + 5] = f64(values, end - 1);
    out[o + 6] = at(values, minAt);
    out[o + 7] = at(steps, minAt);
    out[o + 8] = at(walls, minAt);
    out[o + 9] = at(values, maxAt);
    out[o + 10] = at(steps, maxAt);
    out[o + 11] = at(walls, maxAt);
    out[o + 12] = at(steps, firstNan);
    out[o + 13] = at(walls, firstNan);
  }
  return out;
}
