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

/** Split columns into one group per (key, rank), keeping the order of the points within each. */
export function groupBySeries(columns: PointColumns): SeriesGroup[] {
  const n = columns.steps.length;
  const indexes = new Map<string, number[]>();
  for (let i = 0; i < n; i++) {
    const id = `${columns.keyIndex[i] as number}:${columns.ranks[i] as number}`;
    let list = indexes.get(id);
    if (list === undefined) {
      list = [];
      indexes.set(id, list);
    }
    list.push(i);
  }
  const groups: SeriesGroup[] = [];
  for (const list of indexes.values()) {
    const first = list[0] as number;
    const k = columns.keyIndex[first] as number;
    const m = list.length;
    const steps = new Float64Array(m);
    const walls = new Float64Array(m);
    const values = new Float64Array(m);
    for (let j = 0; j < m; j++) {
      const i = list[j] as number;
      steps[j] = columns.steps[i] as number;
      walls[j] = columns.walls[i] as number;
      values[j] = columns.values[i] as number;
    }
    groups.push({ key: columns.keys[k] as string, reduce: columns.reduces?.[k] ?? null, rank: columns.ranks[first] as number, steps, walls, values });
  }
  return groups;
}

/** Join groups of the same (key, rank), in order (e.g. from several batches of one transaction). */
export function mergeGroups(groups: readonly SeriesGroup[]): SeriesGroup[] {
  const byId = new Map<string, SeriesGroup[]>();
  for (const g of groups) {
    const id = `${g.rank}\u0000${g.key}`;
    const list = byId.get(id);
    if (list === undefined) byId.set(id, [g]);
    else list.push(g);
  }
  const out: SeriesGroup[] = [];
  for (const list of byId.values()) {
    const first = list[0] as SeriesGroup;
    if (list.length === 1) {
      out.push(first);
      continue;
    }
    const cat = (pick: (g: SeriesGroup) => Float64Array): Float64Array => {
      const parts = list.map(pick);
      const joined = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) {
        joined.set(p, at);
        at += p.length;
      }
      return joined;
    };
    const reduce = list.find((g) => g.reduce !== null)?.reduce ?? null;
    out.push({ key: first.key, reduce, rank: first.rank, steps: cat((g) => g.steps), walls: cat((g) => g.walls), values: cat((g) => g.values) });
  }
  return out;
}
