/**
 * Points as columns: typed arrays plus a small table of key names. This is how batches cross to
 * the writer thread — a few typed arrays are copied (or transferred) in microseconds, where ten
 * thousand small objects cost milliseconds to clone — and how the writer groups points by series.
 */

/** Points of one batch in columns; `keyIndex[i]` indexes `keys` (and `reduces`). */
export interface PointColumns {
  readonly keys: readonly string[];
  /** The reduction of each key, when known (scalars). */
  readonly reduces?: readonly (string | null)[];
  readonly keyIndex: Uint32Array;
  readonly ranks: Int32Array;
  readonly steps: Float64Array;
  readonly walls: Float64Array;
  readonly values: Float64Array;
}

/** Builds `PointColumns` one point at a time, growing its arrays by doubling. */
export class ColumnBuilder {
  private readonly keyIds = new Map<string, number>();
  private readonly keys: string[] = [];
  private readonly reduces: (string | null)[] = [];
  private keyIndex = new Uint32Array(64);
  private ranks = new Int32Array(64);
  private steps = new Float64Array(64);
  private walls = new Float64Array(64);
  private values = new Float64Array(64);
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
  build(): PointColumns {
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
    const grown = <T extends Uint32Array | Int32Array | Float64Array>(a: T, make: (n: number) => T): T => {
      const b = make(size);
      b.set(a);
      return b;
    };
    this.keyIndex = grown(this.keyIndex, (n) => new Uint32Array(n));
    this.ranks = grown(this.ranks, (n) => new Int32Array(n));
    this.steps = grown(this.steps, (n) => new Float64Array(n));
    this.walls = grown(this.walls, (n) => new Float64Array(n));
    this.values = grown(this.values, (n) => new Float64Array(n));
  }
}

/** The buffers of columns, to transfer them to a worker instead of copying. */
export function columnBuffers(columns: PointColumns): ArrayBuffer[] {
  return [columns.keyIndex, columns.ranks, columns.steps, columns.walls, columns.values].map((a) => a.buffer as ArrayBuffer);
}

/** One series of a batch: its key, rank and points, in batch order. */
export interface SeriesGroup {
  readonly key: string;
  readonly reduce: string | null;
  readonly rank: number;
  readonly steps: Float64Array;
  readonly walls: Float64Array;
  readonly values: Float64Array;
}

/** Ranks are packed with the key into one number when grouping; this bounds them. */
const RANK_SPAN = 1 << 20;

/**
 * Split column sets (one batch each, in order) into one group per (key, rank), keeping the order of
 * the points. Two passes over the points and one set of arrays per series: a thousand keys with a
 * point each cost a thousand small groups, not a string and an array per point.
 */
export function groupColumns(sets: readonly PointColumns[]): SeriesGroup[] {
  const keyIds = new Map<string, number>();
  const keyNames: string[] = [];
  const keyReduces: (string | null)[] = [];
  const groupOf = new Map<number, number>();
  const groupKey: number[] = [];
  const groupRank: number[] = [];
  const counts: number[] = [];
  const assigned: Int32Array[] = [];
  for (const set of sets) {
    const local = set.keys.map((key, k) => {
      let id = keyIds.get(key);
      if (id === undefined) {
        id = keyNames.length;
        keyIds.set(key, id);
        keyNames.push(key);
        keyReduces.push(null);
      }
      const reduce = set.reduces?.[k] ?? null;
      if (reduce !== null) keyReduces[id] = reduce;
      return id;
    });
    const n = set.steps.length;
    const groups = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const key = local[set.keyIndex[i] as number] as number;
      const rank = set.ranks[i] as number;
      if (rank < -1 || rank >= RANK_SPAN - 1) throw new RangeError(`rank ${rank} is out of range (-1 to ${RANK_SPAN - 2})`);
      const id = key * RANK_SPAN + rank + 1;
      let g = groupOf.get(id);
      if (g === undefined) {
        g = counts.length;
        groupOf.set(id, g);
        groupKey.push(key);
        groupRank.push(rank);
        counts.push(0);
      }
      counts[g] = (counts[g] as number) + 1;
      groups[i] = g;
    }
    assigned.push(groups);
  }
  const steps = counts.map((c) => new Float64Array(c));
  const walls = counts.map((c) => new Float64Array(c));
  const values = counts.map((c) => new Float64Array(c));
  const filled = new Int32Array(counts.length);
  sets.forEach((set, s) => {
    const groups = assigned[s] as Int32Array;
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i] as number;
      const at = filled[g] as number;
      filled[g] = at + 1;
      (steps[g] as Float64Array)[at] = set.steps[i] as number;
      (walls[g] as Float64Array)[at] = set.walls[i] as number;
      (values[g] as Float64Array)[at] = set.values[i] as number;
    }
  });
  return counts.map((_, g) => ({
    key: keyNames[groupKey[g] as number] as string,
    reduce: keyReduces[groupKey[g] as number] ?? null,
    rank: groupRank[g] as number,
    steps: steps[g] as Float64Array,
    walls: walls[g] as Float64Array,
    values: values[g] as Float64Array,
  }));
}
