/**
 * Points as columns: typed arrays plus a small table of key names. This is how batches cross to
 * the writer thread — a few typed arrays are copied (or transferred) in microseconds, where ten
 * thousand small objects cost milliseconds to clone — and how the writer groups points by series.
 *
 * One series' columns and the pure algorithms over them (sorting, merging, blocks) are
 * `series-columns.ts`, re-exported here.
 */
import { f64, int } from "./series-columns.js";

export {
  blockSummaries,
  concatSeries,
  extremes,
  f64,
  int,
  mergeByStep,
  sliceSeries,
  sortDedupe,
  type SeriesColumns,
} from "./series-columns.js";

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
