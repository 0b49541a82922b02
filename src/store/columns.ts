/**
 * Points as columns: typed arrays plus a small table of key names. This is how batches cross to
 * the writer thread — a few typed arrays are copied (or transferred) in microseconds, where ten
 * thousand small objects cost milliseconds to clone — and how the writer groups points by series.
 *
 * Also the store's pure columnar algorithms (no SQLite): grouping points by series, sorting and
 * de-duplicating a series by step, merging two series, and a chunk's pre-aggregated blocks.
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

/** Points of one batch in columns; `keyIndex[i]` indexes `keys` (and `reduces`). */
export interface PointColumns {
  readonly keys: readonly string[];
  /** The reduction of each key, when known (scalars). */
  readonly reduces?: readonly (string | null)[];
  readonly keyIndex: Uint32Array;
  /** Each point's line (float64: a worker thread's line is below −2^24, see `lineOf`). */
  readonly ranks: Float64Array;
  readonly steps: Float64Array;
  readonly walls: Float64Array;
  readonly values: Float64Array;
}

/** Columns made by `ColumnBuilder`: arrays of their own (not views of shared memory), so transferable. */
interface BuiltColumns extends PointColumns {
  readonly keyIndex: Uint32Array<ArrayBuffer>;
  readonly ranks: Float64Array<ArrayBuffer>;
  readonly steps: Float64Array<ArrayBuffer>;
  readonly walls: Float64Array<ArrayBuffer>;
  readonly values: Float64Array<ArrayBuffer>;
}

/** Builds `PointColumns` one point at a time, growing its arrays by doubling. */
export class ColumnBuilder {
  private readonly keyIds = new Map<string, number>();
  private readonly keys: string[] = [];
  private readonly reduces: (string | null)[] = [];
  private keyIndex: Uint32Array<ArrayBuffer> = new Uint32Array(64);
  private ranks: Float64Array<ArrayBuffer> = new Float64Array(64);
  private steps: Float64Array<ArrayBuffer> = new Float64Array(64);
  private walls: Float64Array<ArrayBuffer> = new Float64Array(64);
  private values: Float64Array<ArrayBuffer> = new Float64Array(64);
  /** Points added so far. */
  length = 0;

  add(key: string, rank: number, step: number, wall: number, value: number, reduce: string | null = null): void {
    let k = this.keyIds.get(key);
    if (k === undefined) {
      k = this.keys.length;
      this.keyIds.set(key, k);
      this.keys.push(key);
      this.reduces.push(reduce);
    }
    if (this.length === this.steps.length) this.grow();
    const i = this.length++;
    this.keyIndex[i] = k;
    this.ranks[i] = rank;
    this.steps[i] = step;
    this.walls[i] = wall;
    this.values[i] = value;
  }

  /** The columns, trimmed to length (the builder must not be used afterwards). */
  build(): BuiltColumns {
    const n = this.length;
    return {
      keys: this.keys,
      reduces: this.reduces,
      keyIndex: this.keyIndex.slice(0, n),
      ranks: this.ranks.slice(0, n),
      steps: this.steps.slice(0, n),
      walls: this.walls.slice(0, n),
      values: this.values.slice(0, n),
    };
  }

  private grow(): void {
    const size = this.steps.length * 2;
    const grown = <T extends Uint32Array<ArrayBuffer> | Float64Array<ArrayBuffer>>(a: T, make: (n: number) => T): T => {
      const b = make(size);
      b.set(a);
      return b;
    };
    this.keyIndex = grown(this.keyIndex, (n) => new Uint32Array(n));
    this.ranks = grown(this.ranks, (n) => new Float64Array(n));
    this.steps = grown(this.steps, (n) => new Float64Array(n));
    this.walls = grown(this.walls, (n) => new Float64Array(n));
    this.values = grown(this.values, (n) => new Float64Array(n));
  }
}

/** The buffers of columns, to transfer them to a worker instead of copying. */
export function columnBuffers(columns: BuiltColumns): ArrayBuffer[] {
  return [
    columns.keyIndex.buffer,
    columns.ranks.buffer,
    columns.steps.buffer,
    columns.walls.buffer,
    columns.values.buffer,
  ];
}

/** One series of a batch: its key, rank and points, in batch order. */
interface SeriesGroup {
  readonly key: string;
  readonly reduce: string | null;
  readonly rank: number;
  readonly steps: Float64Array;
  readonly walls: Float64Array;
  readonly values: Float64Array;
}

/** A batch's distinct lines are numbered and packed with the key into one number when grouping; this bounds them. */
const LINE_SPAN = 1 << 20;

/**
 * Split column sets (one batch each, in order) into one group per (key, rank), keeping the order of
 * the points. Two passes over the points and one set of arrays per series: a thousand keys with a
 * point each cost a thousand small groups, not a string and an array per point.
 */
export function groupColumns(sets: readonly PointColumns[]): SeriesGroup[] {
  const keys: GroupKeys = { ids: new Map(), names: [], reduces: [] };
  const found: FoundGroups = { byId: new Map(), key: [], rank: [], counts: [] };
  // Lines numbered in the order they appear (a batch mostly holds one: the last is kept at hand).
  const lineIds = new Map<number, number>();
  let lastLine = Number.NaN;
  let lastLineId = 0;
  const assigned: Int32Array[] = [];
  for (const set of sets) {
    const local = localKeyIds(set, keys);
    const n = set.steps.length;
    const groups = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const key = int(local, int(set.keyIndex, i));
      const rank = f64(set.ranks, i);
      if (rank !== lastLine) {
        lastLineId = lineIdOf(lineIds, rank);
        lastLine = rank;
      }
      const id = key * LINE_SPAN + lastLineId;
      let g = found.byId.get(id);
      if (g === undefined) {
        g = found.counts.length;
        found.byId.set(id, g);
        found.key.push(key);
        found.rank.push(rank);
        found.counts.push(0);
      }
      found.counts[g] = (found.counts[g] ?? 0) + 1;
      groups[i] = g;
    }
    assigned.push(groups);
  }
  const groups = found.counts.map((count, g): SeriesGroup => {
    const key = found.key[g] ?? 0;
    return {
      key: keys.names[key] ?? "",
      reduce: keys.reduces[key] ?? null,
      rank: found.rank[g] ?? 0,
      steps: new Float64Array(count),
      walls: new Float64Array(count),
      values: new Float64Array(count),
    };
  });
  fillGroups(sets, assigned, groups);
  return groups;
}

/** The keys met so far while grouping: numbered in the order they appear, with their reduce (the last one given). */
interface GroupKeys {
  readonly ids: Map<string, number>;
  readonly names: string[];
  readonly reduces: (string | null)[];
}

/** The groups met so far: by packed (key, line) id, with each group's key, rank and point count. */
interface FoundGroups {
  readonly byId: Map<number, number>;
  readonly key: number[];
  readonly rank: number[];
  readonly counts: number[];
}

/** A batch's key indexes mapped to the grouping's key numbers (new keys numbered as they come). */
function localKeyIds(set: PointColumns, keys: GroupKeys): Uint32Array {
  return Uint32Array.from(set.keys, (key, k) => {
    let id = keys.ids.get(key);
    if (id === undefined) {
      id = keys.names.length;
      keys.ids.set(key, id);
      keys.names.push(key);
      keys.reduces.push(null);
    }
    const reduce = set.reduces?.[k] ?? null;
    if (reduce !== null) keys.reduces[id] = reduce;
    return id;
  });
}

/** The number of line `rank` (numbered as lines appear); throws past `LINE_SPAN` lines or for a line that is not an integer. */
function lineIdOf(lineIds: Map<number, number>, rank: number): number {
  if (!Number.isSafeInteger(rank)) throw new RangeError(`line ${rank} is not an integer`);
  let lineId = lineIds.get(rank);
  if (lineId === undefined) {
    lineId = lineIds.size;
    if (lineId >= LINE_SPAN) throw new RangeError(`a batch holds more than ${LINE_SPAN} lines`);
    lineIds.set(rank, lineId);
  }
  return lineId;
}

/** The second pass: each point copied into its group's arrays, in order. */
function fillGroups(sets: readonly PointColumns[], assigned: readonly Int32Array[], groups: SeriesGroup[]): void {
  const filled = new Int32Array(groups.length);
  sets.forEach((set, s) => {
    const of = assigned[s];
    if (of === undefined) return;
    for (let i = 0; i < of.length; i++) {
      const g = int(of, i);
      const group = groups[g];
      if (group === undefined) continue;
      const at = int(filled, g);
      filled[g] = at + 1;
      group.steps[at] = f64(set.steps, i);
      group.walls[at] = f64(set.walls, i);
      group.values[at] = f64(set.values, i);
    }
  });
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
