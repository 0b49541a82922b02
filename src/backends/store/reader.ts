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
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseNumber } from "../../core/json.js";
import type { HistogramData, SampleRecord } from "../../core/reduce.js";
import { fromSqlReal, unpackFloat64 } from "./codec.js";
import { Downsampler, POINTS_PER_BUCKET, type SeriesPoint, type XAxis } from "./downsample.js";
import { BLOCK_FIELDS, BLOCK_POINTS, GLOBAL_RANK, openForReading, SERIES_KINDS, STORE_FILE, withBusyRetry, type KeyKind, type SeriesKind } from "./schema.js";

export { GLOBAL_RANK, STORE_FILE, SERIES_KINDS, type KeyKind, type SeriesKind, type SeriesPoint, type XAxis };

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
    const keyRow = !this.ready() ? undefined : this.get("SELECT id FROM keys WHERE key = ? AND kind = ?", key, kind) as { id: number } | undefined;
    if (keyRow === undefined) throw new Error(`run ${this.runDir} has no ${kind} key ${JSON.stringify(key)}`);
    const rank = options.rank ?? (this.get("SELECT min(rank) AS r FROM series WHERE key_id = ?", keyRow.id) as { r: number | null }).r ?? GLOBAL_RANK;
    return withBusyRetry(() =>
      this.db.transaction(() =>
        kind === "system"
          ? this.rawSeries(key, kind, keyRow.id, rank, x, options.after, maxPoints)
          : this.chunkedSeries(key, kind, keyRow.id, rank, x, options.after, maxPoints),
      )(),
    );
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
   * the cursor is a position.
   */
  private chunkedSeries(key: string, kind: "scalar" | "stream", keyId: number, rank: number, x: XAxis, after: number | undefined, maxPoints: number): SeriesResult {
    const from = after ?? -Infinity;
    const scalar = kind === "scalar";
    const chunks = this.all(
      `SELECT id, first_step, last_step, n, first_wall, last_wall, min, min_step, min_wall, max, max_step, max_wall, last, nan_count,
       ${scalar ? "first_step" : "first_seq"} AS pos_first, ${scalar ? "last_step" : "last_seq"} AS pos_last
       FROM chunks WHERE key_id = ? AND rank = ? AND ${scalar ? "last_step > ? AND first_seq IS NULL ORDER BY first_step" : "last_seq > ? ORDER BY first_seq"}`,
      keyId,
      rank,
      from,
    ) as ChunkMeta[];
    const rows = !scalar
      ? []
      : (this.statement("SELECT step, wall, value FROM points WHERE key_id = ? AND rank = ? AND step > ? ORDER BY step")
          .raw(true)
          .all(keyId, rank, from) as [number, number, number | null][]);
    let total = rows.length;
    for (const c of chunks) total += c.n;
    const blobs = this.statement("SELECT steps, walls, vals FROM chunks WHERE id = ?");
    const decode = (c: ChunkMeta): { steps: Float64Array; walls: Float64Array; values: Float64Array; start: number } => {
      const b = blobs.get(c.id) as { steps: Buffer; walls: Buffer; vals: Buffer };
      const steps = unpackFloat64(b.steps);
      let start = 0;
      if (c.pos_first <= from) {
        if (scalar) while (start < steps.length && (steps[start] as number) <= from) start++;
        else start = Math.min(steps.length, from - c.pos_first + 1);
      }
      return { steps, walls: unpackFloat64(b.walls), values: unpackFloat64(b.vals), start };
    };
    const lastPosition = rows.length > 0 ? (rows[rows.length - 1] as [number, number, number | null])[0] : chunks.length > 0 ? (chunks[chunks.length - 1] as ChunkMeta).pos_last : null;
    const cursor = lastPosition ?? after ?? null;

    if (total <= maxPoints) {
      const points: SeriesPoint[] = [];
      for (const c of chunks) {
        const d = decode(c);
        for (let i = d.start; i < d.steps.length; i++) points.push({ step: d.steps[i] as number, wall: d.walls[i] as number, value: d.values[i] as number });
      }
      for (const [step, wall, value] of rows) points.push({ step, wall, value: fromSqlReal(value) });
      if (x === "wall") points.sort((p, q) => p.wall - q.wall || p.step - q.step);
      else if (!scalar) points.sort((p, q) => p.step - q.step);
      return { key, kind, rank, points, cursor, total: points.length, downsampled: false };
    }

    // The x range, from chunk summaries and rows (walls within a chunk are close to monotone).
    let x0 = Infinity;
    let x1 = -Infinity;
    for (const c of chunks) {
      const a = x === "step" ? (scalar ? Math.max(c.first_step, from) : c.first_step) : Math.min(c.first_wall, c.last_wall);
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
      if (useBlocks && c.pos_first > from) {
        const blocks = unpackFloat64(blocksOf.get(c.id) as Buffer);
        for (let o = 0; o < blocks.length; o += BLOCK_FIELDS.length) ds.addBlock(blocks, o);
        continue;
      }
      const xa = x === "step" ? c.first_step : c.first_wall;
      const xb = x === "step" ? c.last_step : c.last_wall;
      const bucket = ds.bucketOf(xa);
      if (c.nan_count === 0 && c.pos_first > from && c.last !== null && bucket === ds.bucketOf(xb)) {
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
        const d = decode(c);
        ds.addArrays(d.steps, d.walls, d.values, d.start);
      }
    }
    for (const [step, wall, value] of rows) ds.add(step, wall, fromSqlReal(value), x === "step" ? step : wall);
    return { key, kind, rank, points: ds.result(maxPoints), cursor, total, downsampled: true };
  }

  private rawSeries(key: string, kind: SeriesKind, keyId: number, rank: number, x: XAxis, after: number | undefined, maxPoints: number): SeriesResult {
    const rows = this.statement("SELECT seq, step, wall, value FROM stream_points WHERE key_id = ? AND rank = ? AND seq > ? ORDER BY seq")
      .raw(true)
      .all(keyId, rank, after ?? -1) as [number, number, number, number | null][];
    const cursor = rows.length > 0 ? (rows[rows.length - 1] as [number, number, number, number | null])[0] : after ?? null;
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

/**
 * Every run under `root` that has a store: `root` itself, `root/{experiment}/{trial}` (the
 * standard layout) and anything up to three levels down. Newest first.
 */
export function listRuns(root: string): RunSummary[] {
  const base = resolve(root);
  if (!existsSync(base)) throw new Error(`runs root ${base} does not exist`);
  if (!statSync(base).isDirectory()) throw new Error(`runs root ${base} is not a directory`);
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (existsSync(join(dir, STORE_FILE))) found.push(dir);
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
    } catch {
      runs.push({ runDir: dir, experiment: null, trial: null, status: "unknown", startedAt: null, endedAt: null, updatedAt: null, resumeStep: 0 });
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

/** A run's hyperparameters / config. */
export function config(runDir: string): Record<string, unknown> {
  return openStore(runDir).config();
}

/** Same as `config`. */
export const hparams = config;
