/**
 * The store's read API: what the dashboard, `rankscope runs`, `tail` and `export` read.
 *
 * Every function takes a run directory (the folder holding `metrics.db`) and reads through a
 * cached read-only connection; WAL mode means reading never blocks the run's writers. Reading one
 * key touches only that key's rows and chunks.
 *
 * ```ts
 * import { listRuns, keys, series } from "rankscope/store";
 * for (const run of listRuns("runs")) console.log(run.experiment, run.trial, run.status);
 * const { points, cursor } = series(runDir, "train/loss", { maxPoints: 2000 });
 * const more = series(runDir, "train/loss", { after: cursor }); // only newer points
 * ```
 */
import type Database from "better-sqlite3";
import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { parseNumber } from "../../core/json.js";
import type { HistogramData, SampleRecord } from "../../core/reduce.js";
import { fromSqlReal, unpackFloat64 } from "./codec.js";
import { Downsampler, POINTS_PER_BUCKET, type SeriesPoint, type XAxis } from "./downsample.js";
import { BLOCK_FIELDS, BLOCK_POINTS, GLOBAL_RANK, SERIES_KINDS, STORE_FILE, withBusyRetry, type KeyKind, type SeriesKind } from "./schema.js";
import { openForReading } from "./connection.js";
import { storeFault } from "./store-file.js";

export { GLOBAL_RANK, STORE_FILE, SERIES_KINDS, type KeyKind, type SeriesKind, type SeriesPoint, type XAxis };
export { storeFault };

/** A run's status: `running` while any writer has not finished (or a writer died without saying). */
export type RunStatus = "running" | "finished" | "failed" | "crashed" | "unknown";

/** One run, as `listRuns` and `runInfo` describe it. Times are milliseconds since the epoch. */
export interface RunSummary {
  /** Absolute path of the run directory. */
  readonly runDir: string;
  readonly experiment: string | null;
  readonly trial: string | null;
  readonly status: RunStatus;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  /** When anything was last written (a live run's heartbeat). */
  readonly updatedAt: number | null;
  /** The step the run last resumed from (0 if never resumed). */
  readonly resumeStep: number;
  /** Why the store could not be read (a damaged file), when it could not; see `storeFault`. */
  readonly error?: string;
}

/** One key of a run. */
export interface KeyInfo {
  readonly key: string;
  readonly kind: KeyKind;
  /** The reduction that produced it (`mean`, `max`, …), when known. */
  readonly reduce: string | null;
  /** Ranks with data for it, ascending; `GLOBAL_RANK` (-1) is the series reduced across ranks. */
  readonly ranks: readonly number[];
}

/** A rank that wrote to the run. */
export interface RankInfo {
  readonly rank: number;
  readonly rankName: string;
}

/** Options of `series`. */
export interface SeriesOptions {
  /** `scalar` (default), `stream` or `system`. */
  kind?: SeriesKind;
  /** Which rank's series; default: the global one (-1) if present, else the lowest rank. */
  rank?: number;
  /** What the downsampling buckets cut: `step` (default for scalars) or `wall` (default for streams and system). */
  x?: XAxis;
  /** A cursor from an earlier call: only points after it are returned. */
  after?: number;
  /**
   * Only points before this position (exclusive), in the units of `after`: a step for scalars, an
   * arrival number for streams and system metrics. With `after`, a window: a zoom reads the raw
   * points of any stretch of a long series.
   */
  before?: number;
  /** Return at most about this many points (default 2000); `Infinity` for every point. */
  maxPoints?: number;
}

/** What `series` returns. */
export interface SeriesResult {
  readonly key: string;
  readonly kind: SeriesKind;
  readonly rank: number;
  /** Points in x order: every point, or per bucket its min, max, last (and first NaN). */
  readonly points: SeriesPoint[];
  /**
   * Pass back as `after` to get only newer points. A step for scalars, an arrival sequence number
   * for streams and system metrics; `null` when there is nothing yet.
   */
  readonly cursor: number | null;
  /** How many points the range held before downsampling. */
  readonly total: number;
  readonly downsampled: boolean;
}

/** The last point of a scalar key (`lastValues`). */
export interface LastValue {
  readonly key: string;
  /** The line it comes from: `GLOBAL_RANK` when the key has a global line, else its lowest rank. */
  readonly rank: number;
  readonly step: number;
  readonly value: number;
}

/** Options of `samples` and `histograms`. */
export interface RecordsOptions {
  /** Only this rank's entries (default: all ranks). */
  rank?: number;
  /** A cursor (`seq`) from an earlier call: only newer entries. */
  after?: number;
  /** At most this many entries, the newest (default 100). */
  limit?: number;
}

/** The sample records of one key at one flush. */
export interface SampleEntry {
  readonly seq: number;
  readonly key: string;
  readonly rank: number;
  readonly step: number;
  readonly wall: number;
  readonly records: SampleRecord[];
}

/** The histogram of one key at one flush. */
export interface HistogramEntry {
  readonly seq: number;
  readonly key: string;
  readonly rank: number;
  readonly step: number;
  readonly wall: number;
  readonly histogram: HistogramData;
}

/** Read pre-aggregated blocks instead of points when a bucket spans at least this many blocks. */
const BLOCKS_PER_BUCKET = 8;

/** Default `maxPoints` of `series`. */
export const DEFAULT_MAX_POINTS = 2000;

interface ChunkMeta {
  id: number;
  first_step: number;
  last_step: number;
  n: number;
  first_wall: number;
  last_wall: number;
  min: number | null;
  min_step: number;
  min_wall: number;
  max: number | null;
  max_step: number;
  max_wall: number;
  last: number | null;
  nan_count: number;
  /** Step range for scalar chunks, arrival range for stream chunks. */
  pos_first: number;
  pos_last: number;
}

/** The positions a read covers: (from, to), exclusive; `after` as given (the cursor when nothing is newer). */
interface Window {
  readonly from: number;
  readonly to: number;
  readonly after: number | undefined;
}

/** A decoded chunk and the part of it inside the window, `[start, end)`. */
interface Decoded {
  steps: Float64Array;
  walls: Float64Array;
  values: Float64Array;
  start: number;
  end: number;
}

/** Reads one run's store. Get one with `openStore`, or use the functions below, which cache them. */
export class StoreReader {
  readonly runDir: string;
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement<unknown[], unknown>>();
  private schemaReady = false;

  constructor(runDir: string) {
    this.runDir = resolve(runDir);
    this.db = openForReading(this.runDir);
  }

  /**
   * True once a writer has created the tables. A writer creates the file and its tables in one
   * go, but a reader can open the file in between; until then the store reads as empty.
   */
  private ready(): boolean {
    if (this.schemaReady) return true;
    this.schemaReady = (withBusyRetry(() => this.db.pragma("user_version", { simple: true })) as number) >= 1;
    return this.schemaReady;
  }

  /** The run's metadata. */
  runInfo(): RunSummary {
    const row = !this.ready() ? undefined : this.get("SELECT experiment, trial, status, started_at, ended_at, updated_at, resume_step FROM run WHERE id = 1") as
      | { experiment: string; trial: string; status: string; started_at: number; ended_at: number | null; updated_at: number; resume_step: number }
      | undefined;
    if (row === undefined) {
      return { runDir: this.runDir, experiment: null, trial: null, status: "unknown", startedAt: null, endedAt: null, updatedAt: null, resumeStep: 0 };
    }
    const status: RunStatus = row.status === "running" || row.status === "finished" || row.status === "failed" || row.status === "crashed" ? row.status : "unknown";
    return {
      runDir: this.runDir,
      experiment: row.experiment,
      trial: row.trial,
      status,
      startedAt: row.started_at,
      endedAt: row.ended_at,
      updatedAt: row.updated_at,
      resumeStep: row.resume_step,
    };
  }

  /** Every key of the run (optionally of one kind), sorted by key, with the ranks that have it. */
  keys(kind?: KeyKind): KeyInfo[] {
    if (!this.ready()) return [];
    const rows = this.all(
      `SELECT k.key AS key, k.kind AS kind, k.reduce AS reduce, group_concat(s.rank) AS ranks
       FROM keys k JOIN series s ON s.key_id = k.id ${kind === undefined ? "" : "WHERE k.kind = ?"}
       GROUP BY k.id ORDER BY k.key, k.kind`,
      ...(kind === undefined ? [] : [kind]),
    ) as { key: string; kind: KeyKind; reduce: string | null; ranks: string }[];
    return rows.map((r) => ({
      key: r.key,
      kind: r.kind,
      reduce: r.reduce,
      ranks: r.ranks
        .split(",")
        .map(Number)
        .sort((a, b) => a - b),
    }));
  }

  /** The ranks that wrote to the run, with their names (`global` for -1). */
  ranks(): RankInfo[] {
    if (!this.ready()) return [];
    return (this.all("SELECT rank, rank_name FROM ranks ORDER BY rank") as { rank: number; rank_name: string | null }[]).map((r) => ({
      rank: r.rank,
      rankName: r.rank_name ?? `rank${r.rank}`,
    }));
  }

  /**
   * The points of one series, downsampled to about `maxPoints` (min, max and last of each bucket,
   * so spikes stay visible), and a cursor for asking only for newer points next time.
   */
  series(key: string, options: SeriesOptions = {}): SeriesResult {
    const kind = options.kind ?? "scalar";
    if (!SERIES_KINDS.includes(kind)) throw new TypeError(`series kind ${JSON.stringify(kind)} is not valid; valid: ${SERIES_KINDS.join(", ")}`);
    const x = options.x ?? (kind === "scalar" ? "step" : "wall");
    if (x !== "step" && x !== "wall") throw new TypeError(`series x ${JSON.stringify(x)} is not valid; valid: step, wall`);
    const maxPoints = options.maxPoints ?? DEFAULT_MAX_POINTS;
    if (!(maxPoints === Infinity || (Number.isInteger(maxPoints) && maxPoints >= POINTS_PER_BUCKET))) {
      throw new TypeError(`maxPoints must be an integer >= ${POINTS_PER_BUCKET} or Infinity, got ${String(maxPoints)}`);
    }
    if (options.after !== undefined && typeof options.after !== "number") throw new TypeError(`after must be a cursor number from an earlier series() call, got ${String(options.after)}`);
    if (options.before !== undefined && (typeof options.before !== "number" || Number.isNaN(options.before))) throw new TypeError(`before must be a number (a step for scalars), got ${String(options.before)}`);
    const window: Window = { from: options.after ?? -Infinity, to: options.before ?? Infinity, after: options.after };
    const keyRow = !this.ready() ? undefined : this.get("SELECT id FROM keys WHERE key = ? AND kind = ?", key, kind) as { id: number } | undefined;
    if (keyRow === undefined) throw new Error(`run ${this.runDir} has no ${kind} key ${JSON.stringify(key)}`);
    const rank = options.rank ?? (this.get("SELECT min(rank) AS r FROM series WHERE key_id = ?", keyRow.id) as { r: number | null }).r ?? GLOBAL_RANK;
    return withBusyRetry(() =>
      this.db.transaction(() =>
        kind === "system"
          ? this.rawSeries(key, kind, keyRow.id, rank, x, window, maxPoints)
          : this.chunkedSeries(key, kind, keyRow.id, rank, x, window, maxPoints),
      )(),
    );
  }

  /**
   * The last point of every scalar key: of its global line, else of its lowest rank's (a run
   * table's summary column). Reads one row or chunk summary per key, never the points.
   */
  lastValues(): LastValue[] {
    if (!this.ready()) return [];
    const rows = this.all(
      `SELECT k.key AS key, s.rank AS rank,
         (SELECT step FROM points p WHERE p.key_id = k.id AND p.rank = s.rank ORDER BY p.step DESC LIMIT 1) AS pstep,
         (SELECT value FROM points p WHERE p.key_id = k.id AND p.rank = s.rank ORDER BY p.step DESC LIMIT 1) AS pvalue,
         (SELECT last_step FROM chunks c WHERE c.key_id = k.id AND c.rank = s.rank AND c.first_seq IS NULL ORDER BY c.first_step DESC LIMIT 1) AS cstep,
         (SELECT last FROM chunks c WHERE c.key_id = k.id AND c.rank = s.rank AND c.first_seq IS NULL ORDER BY c.first_step DESC LIMIT 1) AS cvalue
       FROM keys k JOIN series s ON s.key_id = k.id
       WHERE k.kind = 'scalar' AND s.rank = (SELECT min(rank) FROM series WHERE key_id = k.id)
       ORDER BY k.key`,
    ) as { key: string; rank: number; pstep: number | null; pvalue: number | null; cstep: number | null; cvalue: number | null }[];
    const out: LastValue[] = [];
    for (const r of rows) {
      const fromRows = r.pstep !== null && (r.cstep === null || r.pstep >= r.cstep);
      const step = fromRows ? r.pstep : r.cstep;
      if (step === null) continue;
      out.push({ key: r.key, rank: r.rank, step, value: fromSqlReal(fromRows ? r.pvalue : r.cvalue) });
    }
    return out;
  }

  /** Sample records (`Reduce.SAMPLE`), newest last; all keys unless `key` is given. */
  samples(key?: string, options: RecordsOptions = {}): SampleEntry[] {
    return this.records("samples", "records", "sample", key, options).map((r) => ({ ...r.base, records: JSON.parse(r.json) as SampleRecord[] }));
  }

  /** Histograms (`Reduce.HISTOGRAM`), newest last; all keys unless `key` is given. */
  histograms(key?: string, options: RecordsOptions = {}): HistogramEntry[] {
    return this.records("histograms", "data", "histogram", key, options).map((r) => {
      // Histograms hold only numbers, so the proto3-JSON strings "NaN"/"Infinity" are numbers here.
      const histogram = JSON.parse(r.json, (_k, v: unknown) => (v === "NaN" || v === "Infinity" || v === "-Infinity" ? parseNumber(v) : v)) as HistogramData;
      return { ...r.base, histogram };
    });
  }

  /** The run's hyperparameters / config, as logged (`{}` when none). */
  config(): Record<string, unknown> {
    if (!this.ready()) return {};
    const row = this.get("SELECT value FROM config WHERE name = 'hparams'") as { value: string } | undefined;
    return row === undefined ? {} : (JSON.parse(row.value) as Record<string, unknown>);
  }

  /** Close the connection. */
  close(): void {
    this.db.close();
  }

  private records(table: "samples" | "histograms", column: string, kind: KeyKind, key: string | undefined, options: RecordsOptions): { base: { seq: number; key: string; rank: number; step: number; wall: number }; json: string }[] {
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`limit must be a positive integer, got ${String(limit)}`);
    if (!this.ready()) return [];
    const where = ["k.kind = ?", "t.seq > ?"];
    const params: unknown[] = [kind, options.after ?? -1];
    if (key !== undefined) {
      where.push("k.key = ?");
      params.push(key);
    }
    if (options.rank !== undefined) {
      where.push("t.rank = ?");
      params.push(options.rank);
    }
    const rows = this.all(
      `SELECT t.seq AS seq, k.key AS key, t.rank AS rank, t.step AS step, t.wall AS wall, t.${column} AS json
       FROM ${table} t JOIN keys k ON k.id = t.key_id WHERE ${where.join(" AND ")} ORDER BY t.seq DESC LIMIT ?`,
      ...params,
      limit,
    ) as { seq: number; key: string; rank: number; step: number; wall: number; json: string }[];
    rows.reverse();
    return rows.map((r) => ({ base: { seq: r.seq, key: r.key, rank: r.rank, step: r.step, wall: r.wall }, json: r.json }));
  }

  /**
   * A scalar series (packed chunks by step, then recent rows) or a stream series (chunks by arrival
   * position). A chunk's "position" is its step range for scalars and its arrival range for streams;
   * the cursor is a position. Only positions in (from, to) are read: chunks wholly inside the window
   * may be folded by their summaries, the (at most two) chunks across its edges are decoded.
   */
  private chunkedSeries(key: string, kind: "scalar" | "stream", keyId: number, rank: number, x: XAxis, window: Window, maxPoints: number): SeriesResult {
    const { from, to } = window;
    const scalar = kind === "scalar";
    const chunks = this.all(
      `SELECT id, first_step, last_step, n, first_wall, last_wall, min, min_step, min_wall, max, max_step, max_wall, last, nan_count,
       ${scalar ? "first_step" : "first_seq"} AS pos_first, ${scalar ? "last_step" : "last_seq"} AS pos_last
       FROM chunks WHERE key_id = ? AND rank = ? AND ${scalar ? "last_step > ? AND first_step < ? AND first_seq IS NULL ORDER BY first_step" : "last_seq > ? AND first_seq < ? ORDER BY first_seq"}`,
      keyId,
      rank,
      from,
      to,
    ) as ChunkMeta[];
    const rows = !scalar
      ? []
      : (this.statement("SELECT step, wall, value FROM points WHERE key_id = ? AND rank = ? AND step > ? AND step < ? ORDER BY step")
          .raw(true)
          .all(keyId, rank, from, to) as [number, number, number | null][]);
    const blobs = this.statement("SELECT steps, walls, vals FROM chunks WHERE id = ?");
    const decode = (c: ChunkMeta): Decoded => {
      const b = blobs.get(c.id) as { steps: Buffer; walls: Buffer; vals: Buffer };
      const steps = unpackFloat64(b.steps);
      let start = 0;
      let end = steps.length;
      if (scalar) {
        if (c.pos_first <= from) while (start < end && (steps[start] as number) <= from) start++;
        if (c.pos_last >= to) while (end > start && (steps[end - 1] as number) >= to) end--;
      } else {
        if (c.pos_first <= from) start = Math.min(end, from - c.pos_first + 1);
        if (c.pos_last >= to) end = Math.max(start, Math.min(end, to - c.pos_first));
      }
      return { steps, walls: unpackFloat64(b.walls), values: unpackFloat64(b.vals), start, end };
    };
    // Chunks across an edge of the window are decoded now: their count in the window is exact.
    const edges = new Map<ChunkMeta, Decoded>();
    let total = rows.length;
    let lastPosition: number | null = null;
    for (const c of chunks) {
      if (c.pos_first <= from || c.pos_last >= to) {
        const d = decode(c);
        edges.set(c, d);
        total += d.end - d.start;
        if (d.end > d.start) lastPosition = scalar ? (d.steps[d.end - 1] as number) : c.pos_first + d.end - 1;
      } else {
        total += c.n;
        lastPosition = c.pos_last;
      }
    }
    if (rows.length > 0) lastPosition = (rows[rows.length - 1] as [number, number, number | null])[0];
    const cursor = lastPosition ?? window.after ?? null;

    if (total <= maxPoints) {
      const points: SeriesPoint[] = [];
      for (const c of chunks) {
        const d = edges.get(c) ?? decode(c);
        for (let i = d.start; i < d.end; i++) points.push({ step: d.steps[i] as number, wall: d.walls[i] as number, value: d.values[i] as number });
      }
      for (const [step, wall, value] of rows) points.push({ step, wall, value: fromSqlReal(value) });
      if (x === "wall") points.sort((p, q) => p.wall - q.wall || p.step - q.step);
      else if (!scalar) points.sort((p, q) => p.step - q.step);
      return { key, kind, rank, points, cursor, total: points.length, downsampled: false };
    }

    // The x range, from chunk summaries, the edge chunks' points in the window, and rows (walls
    // within a chunk are close to monotone).
    let x0 = Infinity;
    let x1 = -Infinity;
    for (const c of chunks) {
      const d = edges.get(c);
      if (d !== undefined) {
        for (let i = d.start; i < d.end; i++) {
          const v = x === "step" ? (d.steps[i] as number) : (d.walls[i] as number);
          if (v < x0) x0 = v;
          if (v > x1) x1 = v;
        }
        continue;
      }
      const a = x === "step" ? c.first_step : Math.min(c.first_wall, c.last_wall);
      const b = x === "step" ? c.last_step : Math.max(c.first_wall, c.last_wall);
      if (a < x0) x0 = a;
      if (b > x1) x1 = b;
    }
    for (const [step, wall] of rows) {
      const v = x === "step" ? step : wall;
      if (v < x0) x0 = v;
      if (v > x1) x1 = v;
    }
    const buckets = Math.floor(maxPoints / POINTS_PER_BUCKET);
    const ds = new Downsampler(x0, x1, buckets, x === "step");
    // With many blocks per bucket, fold the chunks' pre-aggregated blocks instead of their points.
    const useBlocks = total / buckets >= BLOCKS_PER_BUCKET * BLOCK_POINTS;
    const blocksOf = this.statement("SELECT blocks FROM chunks WHERE id = ?").pluck(true);
    for (const c of chunks) {
      const d = edges.get(c);
      if (d !== undefined) {
        ds.addArrays(d.steps, d.walls, d.values, d.start, d.end);
        continue;
      }
      if (useBlocks) {
        const blocks = unpackFloat64(blocksOf.get(c.id) as Buffer);
        for (let o = 0; o < blocks.length; o += BLOCK_FIELDS.length) ds.addBlock(blocks, o);
        continue;
      }
      const xa = x === "step" ? c.first_step : c.first_wall;
      const xb = x === "step" ? c.last_step : c.last_wall;
      const bucket = ds.bucketOf(xa);
      if (c.nan_count === 0 && c.last !== null && bucket === ds.bucketOf(xb)) {
        ds.addSummary(bucket, c.n, {
          min: c.min,
          minStep: c.min_step,
          minWall: c.min_wall,
          max: c.max,
          maxStep: c.max_step,
          maxWall: c.max_wall,
          last: c.last,
          lastStep: c.last_step,
          lastWall: c.last_wall,
        });
      } else {
        const full = decode(c);
        ds.addArrays(full.steps, full.walls, full.values, full.start, full.end);
      }
    }
    for (const [step, wall, value] of rows) ds.add(step, wall, fromSqlReal(value), x === "step" ? step : wall);
    return { key, kind, rank, points: ds.result(maxPoints), cursor, total, downsampled: true };
  }

  private rawSeries(key: string, kind: SeriesKind, keyId: number, rank: number, x: XAxis, window: Window, maxPoints: number): SeriesResult {
    const rows = this.statement("SELECT seq, step, wall, value FROM stream_points WHERE key_id = ? AND rank = ? AND seq > ? AND seq < ? ORDER BY seq")
      .raw(true)
      .all(keyId, rank, window.after ?? -1, window.to) as [number, number, number, number | null][];
    const cursor = rows.length > 0 ? (rows[rows.length - 1] as [number, number, number, number | null])[0] : window.after ?? null;
    if (rows.length <= maxPoints) {
      const points = rows.map(([, step, wall, value]) => ({ step, wall, value: fromSqlReal(value) }));
      if (x === "step") points.sort((p, q) => p.step - q.step || p.wall - q.wall);
      return { key, kind, rank, points, cursor, total: rows.length, downsampled: false };
    }
    let x0 = Infinity;
    let x1 = -Infinity;
    for (const r of rows) {
      const v = x === "step" ? r[1] : r[2];
      if (v < x0) x0 = v;
      if (v > x1) x1 = v;
    }
    const ds = new Downsampler(x0, x1, Math.floor(maxPoints / POINTS_PER_BUCKET), x === "step");
    for (const [, step, wall, value] of rows) ds.add(step, wall, fromSqlReal(value), x === "step" ? step : wall);
    return { key, kind, rank, points: ds.result(maxPoints), cursor, total: rows.length, downsampled: true };
  }

  private statement(text: string): Database.Statement<unknown[], unknown> {
    let s = this.statements.get(text);
    if (s === undefined) {
      s = this.db.prepare(text);
      this.statements.set(text, s);
    }
    return s;
  }

  private get(text: string, ...params: unknown[]): unknown {
    return withBusyRetry(() => this.statement(text).get(...params));
  }

  private all(text: string, ...params: unknown[]): unknown[] {
    return withBusyRetry(() => this.statement(text).all(...params));
  }
}

const cache = new Map<string, StoreReader>();

/** Readers kept open at most; the least recently used is closed beyond this. */
const MAX_OPEN_READERS = 64;

/** A cached reader of a run's store (opened on first use). Throws when the run has no store. */
export function openStore(runDir: string): StoreReader {
  const path = resolve(runDir);
  let reader = cache.get(path);
  if (reader === undefined) {
    reader = new StoreReader(path);
    if (cache.size >= MAX_OPEN_READERS) {
      const [oldestPath, oldest] = cache.entries().next().value as [string, StoreReader];
      cache.delete(oldestPath);
      oldest.close();
    }
  } else {
    cache.delete(path); // re-inserted below: Map order is recency order
  }
  cache.set(path, reader);
  return reader;
}

/** Close every cached reader (e.g. before deleting run directories). */
export function closeStores(): void {
  for (const reader of cache.values()) reader.close();
  cache.clear();
}

/** Options of `listRuns`. */
export interface ListRunsOptions {
  /** Skip stores whose file resolves (through symlinks) outside `root`, without opening them. */
  withinRoot?: boolean;
}

/** Whether `child` is `parent` or inside it (both real, absolute paths). */
function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!isAbsolute(rel) && rel !== ".." && !rel.startsWith(`..${sep}`));
}

/**
 * Every run under `root` that has a store: `root` itself, `root/{experiment}/{trial}` (the
 * standard layout) and anything up to three levels down. Newest first.
 */
export function listRuns(root: string, options: ListRunsOptions = {}): RunSummary[] {
  const base = resolve(root);
  if (!existsSync(base)) throw new Error(`runs root ${base} does not exist`);
  if (!statSync(base).isDirectory()) throw new Error(`runs root ${base} is not a directory`);
  const realBase = options.withinRoot === true ? realpathSync(base) : base;
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (existsSync(join(dir, STORE_FILE)) && (options.withinRoot !== true || isInside(realBase, realpathSync(join(dir, STORE_FILE))))) found.push(dir);
    if (depth === 3) return;
    let entries: string[];
    try {
      entries = readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory() && !e.name.startsWith("."))
        .map((e) => e.name);
    } catch {
      return;
    }
    for (const name of entries.sort()) walk(join(dir, name), depth + 1);
  };
  walk(base, 0);
  const runs: RunSummary[] = [];
  for (const dir of found) {
    try {
      runs.push(openStore(dir).runInfo());
    } catch (error) {
      // Named from its path ({root}/{experiment}/{trial}), with the reason instead of a guess.
      runs.push({ runDir: dir, experiment: basename(dirname(dir)), trial: basename(dir), status: "unknown", startedAt: null, endedAt: null, updatedAt: null, resumeStep: 0, error: storeFault(error) });
    }
  }
  return runs.sort((a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0) || (a.runDir < b.runDir ? -1 : 1));
}

/** A run's metadata. */
export function runInfo(runDir: string): RunSummary {
  return openStore(runDir).runInfo();
}

/** A run's keys (optionally of one kind), with their ranks. */
export function keys(runDir: string, kind?: KeyKind): KeyInfo[] {
  return openStore(runDir).keys(kind);
}

/** The ranks that wrote to a run. */
export function ranks(runDir: string): RankInfo[] {
  return openStore(runDir).ranks();
}

/** One series of a run, downsampled, with a cursor (see `StoreReader.series`). */
export function series(runDir: string, key: string, options: SeriesOptions = {}): SeriesResult {
  return openStore(runDir).series(key, options);
}

/** The stream keys of a run (raw values of `per_rank_no_reduce`); read them with `series(..., { kind: "stream" })`. */
export function streams(runDir: string): KeyInfo[] {
  return openStore(runDir).keys("stream");
}

/** The system-metric keys of a run (GPU/CPU monitor); read them with `series(..., { kind: "system" })`. */
export function systemMetrics(runDir: string): KeyInfo[] {
  return openStore(runDir).keys("system");
}

/** Sample records of a run. */
export function samples(runDir: string, key?: string, options: RecordsOptions = {}): SampleEntry[] {
  return openStore(runDir).samples(key, options);
}

/** Histograms of a run. */
export function histograms(runDir: string, key?: string, options: RecordsOptions = {}): HistogramEntry[] {
  return openStore(runDir).histograms(key, options);
}

/** The last value of every scalar key of a run (see `StoreReader.lastValues`). */
export function lastValues(runDir: string): LastValue[] {
  return openStore(runDir).lastValues();
}

/** A run's hyperparameters / config. */
export function config(runDir: string): Record<string, unknown> {
  return openStore(runDir).config();
}

/** Same as `config`. */
export const hparams = config;
