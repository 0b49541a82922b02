/**
 * The store's writer: everything one process writes into a run's `metrics.db`, one SQLite
 * transaction per call, retried while another process holds the write lock.
 *
 * Scalar series are written in two forms that readers merge: new points go in as rows of `points`
 * ((key, rank, step) unique, so a step written twice keeps its last value); once a series has
 * `CHUNK_POINTS` rows they are packed into one `chunks` row of float64 blobs with the chunk's min,
 * max and last in columns. Bulk writes (many points of one series at once) go straight to chunks.
 * A point older than the packed part of its series rewrites the chunk it falls in, so a step is
 * never stored twice.
 *
 * Each (key, rank) series has one writing process (the controller for `global_reduce`, its rank for
 * the per-rank modes); the writer caches what it knows about its own series (how far they are
 * packed, how many rows they have) and only updates that cache after a commit.
 *
 * This class is synchronous; the `store` backend runs it on a worker thread so the user's loop
 * never waits for SQLite.
 */
import type Database from "better-sqlite3";
import { nonFiniteReplacer } from "../../core/json.js";
import type { HistogramData, SampleRecord } from "../../core/reduce.js";
import { packFloat64, toSqlReal, unpackFloat64 } from "./codec.js";
import { ColumnBuilder, groupColumns, type PointColumns, type SeriesGroup } from "./columns.js";
import { BLOCK_FIELDS, BLOCK_POINTS, CHUNK_POINTS, GLOBAL_RANK, withBusyRetry, type KeyKind } from "./schema.js";
import { openForWriting } from "./connection.js";

/** One reduced value of a scalar series. `rank` defaults to the writer's rank. */
export interface ScalarPoint {
  readonly key: string;
  readonly step: number;
  /** Milliseconds since the epoch. */
  readonly wall: number;
  readonly value: number;
  readonly reduce?: string;
  readonly rank?: number;
}

/** One raw value of a stream or a system metric, kept in arrival order. */
export interface RawPoint {
  readonly key: string;
  readonly step: number;
  readonly wall: number;
  readonly value: number;
  readonly rank?: number;
}

/** The records of one `Reduce.SAMPLE` key at a flush. */
export interface SamplesEntry {
  readonly key: string;
  readonly step: number;
  readonly wall: number;
  readonly records: readonly SampleRecord[];
  readonly rank?: number;
}

/** The buckets of one `Reduce.HISTOGRAM` key at a flush. */
export interface HistogramEntry {
  readonly key: string;
  readonly step: number;
  readonly wall: number;
  readonly histogram: HistogramData;
  readonly rank?: number;
}

/** Everything one write call stores, in one transaction. */
export interface WriteBatch {
  scalars?: readonly ScalarPoint[];
  /** Scalars in columns (what the backend sends its writer thread). */
  scalarColumns?: PointColumns;
  streams?: readonly RawPoint[];
  /** Stream values in columns. */
  streamColumns?: PointColumns;
  system?: readonly RawPoint[];
  samples?: readonly SamplesEntry[];
  histograms?: readonly HistogramEntry[];
  /** Merged into the run's hyperparameters (top-level keys replace earlier ones). */
  hyperparams?: Readonly<Record<string, unknown>>;
}

/** Who writes and where. */
export interface StoreWriterOptions {
  readonly runDir: string;
  /** `controller` writes the `global_reduce` series (rank -1) and owns the run's status. */
  readonly role: "controller" | "rank";
  /** This writer's rank: `GLOBAL_RANK` (-1) for the controller's reduced series. */
  readonly rank: number;
  readonly rankName: string;
  readonly experiment: string;
  readonly trial: string;
  /** Restart from this step: this writer's rows at or after it (from an earlier attempt) are removed. */
  readonly resumeStep?: number;
  /**
   * Whether this writer names its rank when it writes data, replacing a name registered before
   * (default true). False for a controller process's own per-rank backend: its identity is rank 0
   * as a spawned rank 0's is, and the spawned rank's name is the one to show.
   */
  readonly claimRankName?: boolean;
}

/**
 * How a writer ends: `finished` after a clean shutdown, `failed` when the job reports a failure,
 * `crashed` when its process ends by a signal or an uncaught exception (src/core/lifecycle.ts).
 */
export type WriterStatus = "finished" | "failed" | "crashed";

interface SeriesState {
  /** Highest step packed into chunks (-Infinity when none). */
  readonly packedThrough: number;
  /** Rows in `points` (an upper bound: replaced rows are counted again). */
  readonly rows: number;
  /** Chunks smaller than CHUNK_POINTS after the last full one (merged once there are MAX_SMALL_CHUNKS). */
  readonly smallChunks: number;
}

/** A write with this many new points of one series packs them (with the series' rows) into a chunk. */
const MIN_CHUNK_RUN = 16;

/** Small trailing chunks of a series allowed before they are merged into full ones. */
const MAX_SMALL_CHUNKS = 16;

/** Work of one transaction that becomes visible in the caches only once it commits. */
interface Pending {
  keys: Map<string, number>;
  /** Next arrival position of each stream series. */
  streamNext: Map<string, number>;
  series: Set<string>;
  states: Map<string, SeriesState>;
}

type Statement = Database.Statement<unknown[], unknown>;

interface ChunkRow {
  id: number;
  steps: Buffer;
  walls: Buffer;
  vals: Buffer;
}

/** Whether a batch holds any data (not only hyperparameters). */
function carriesData(b: WriteBatch): boolean {
  return (
    (b.scalars?.length ?? 0) > 0 ||
    (b.streams?.length ?? 0) > 0 ||
    (b.system?.length ?? 0) > 0 ||
    (b.samples?.length ?? 0) > 0 ||
    (b.histograms?.length ?? 0) > 0 ||
    b.scalarColumns !== undefined ||
    b.streamColumns !== undefined
  );
}

/** Writes one process's data into a run's store. Create with `StoreWriter.open`. */
export class StoreWriter {
  private readonly keyIds = new Map<string, number>();
  private readonly knownSeries = new Set<string>();
  private readonly states = new Map<string, SeriesState>();
  private readonly streamNext = new Map<string, number>();
  private readonly sql: Record<string, Statement>;
  private readonly writerId: string;
  /** Whether this writer has named its rank in `ranks` on writing data (see `claimRankName`). */
  private rankNameClaimed = false;
  private closed = false;

  private constructor(
    private readonly db: Database.Database,
    readonly options: StoreWriterOptions,
  ) {
    this.writerId = `${options.role}:${options.rank}:${process.pid}:${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const p = (text: string): Statement => db.prepare(text);
    this.sql = {
      keyInsert: p("INSERT OR IGNORE INTO keys (key, kind, reduce) VALUES (?, ?, ?)"),
      keySelect: p("SELECT id, reduce FROM keys WHERE key = ? AND kind = ?"),
      keySetReduce: p("UPDATE keys SET reduce = ? WHERE id = ?"),
      seriesInsert: p("INSERT OR IGNORE INTO series (key_id, rank) VALUES (?, ?)"),
      packedThrough: p("SELECT max(last_step) AS s FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NULL"),
      rowCount: p("SELECT count(*) AS n FROM points WHERE key_id = ? AND rank = ?"),
      smallChunkCount: p(
        `SELECT count(*) AS n FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NULL AND n < ? AND first_step >
         coalesce((SELECT max(last_step) FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NULL AND n >= ?), -1e308)`,
      ),
      smallChunks: p(
        `SELECT id, steps, walls, vals FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NULL AND n < ? AND first_step >
         coalesce((SELECT max(last_step) FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NULL AND n >= ?), -1e308) ORDER BY first_step`,
      ),
      pointUpsert: p("INSERT OR REPLACE INTO points (key_id, rank, step, wall, value) VALUES (?, ?, ?, ?, ?)"),
      pointsOfSeries: p("SELECT step, wall, value FROM points WHERE key_id = ? AND rank = ? ORDER BY step"),
      pointsDelete: p("DELETE FROM points WHERE key_id = ? AND rank = ?"),
      chunkInsert: p(
        `INSERT INTO chunks (key_id, rank, first_step, last_step, n, first_seq, last_seq, first_wall, last_wall, min, min_step, min_wall,
         max, max_step, max_wall, last, nan_count, blocks, steps, walls, vals) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      streamNext: p("SELECT max(last_seq) AS s FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NOT NULL"),
      chunksFrom: p("SELECT id, steps, walls, vals FROM chunks WHERE key_id = ? AND rank = ? AND last_step >= ? AND first_seq IS NULL ORDER BY first_step"),
      chunkDelete: p("DELETE FROM chunks WHERE id = ?"),
      rawInsert: p("INSERT INTO stream_points (key_id, rank, step, wall, value) VALUES (?, ?, ?, ?, ?)"),
      sampleInsert: p("INSERT INTO samples (key_id, rank, step, wall, records) VALUES (?, ?, ?, ?, ?)"),
      histogramInsert: p("INSERT INTO histograms (key_id, rank, step, wall, data) VALUES (?, ?, ?, ?, ?)"),
      configSelect: p("SELECT value FROM config WHERE name = ?"),
      configUpsert: p("INSERT OR REPLACE INTO config (name, value) VALUES (?, ?)"),
      touch: p("UPDATE run SET updated_at = ? WHERE id = 1"),
    };
  }

  /** Open (creating when needed) the store of `options.runDir` and register this writer in it. */
  static open(options: StoreWriterOptions): StoreWriter {
    const db = openForWriting(options.runDir);
    try {
      const writer = new StoreWriter(db, options);
      writer.register();
      return writer;
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /** Store a batch in one transaction. */
  write(batch: WriteBatch): void {
    this.writeAll([batch]);
  }

  /**
   * Store several batches in one transaction (a writer catching up). The points of one series
   * across the batches are written together (later batches win for a step given twice), so a
   * stream series gets one chunk per transaction rather than one per batch.
   */
  writeAll(batches: readonly WriteBatch[]): void {
    const claim = !this.rankNameClaimed && this.options.claimRankName !== false && batches.some(carriesData);
    this.transaction((pending) => {
      const scalars: PointColumns[] = [];
      const streams: PointColumns[] = [];
      for (const batch of batches) this.apply(pending, batch, scalars, streams);
      if (scalars.length > 0) this.writeScalarGroups(pending, groupColumns(scalars));
      if (streams.length > 0) this.writeStreamGroups(pending, groupColumns(streams));
      if (claim) this.claimRankName();
    });
    if (claim) this.rankNameClaimed = true;
  }

  /**
   * Name this writer's rank in `ranks`, replacing a name another process registered at open. A
   * writer registers its rank's name at open only where there is none; the first one that writes
   * data for the rank names it. So a controller process's own per-rank backend (its identity is
   * rank 0 too) that writes nothing does not rename the rank 0 that does.
   */
  private claimRankName(): void {
    const o = this.options;
    this.db.prepare("INSERT OR REPLACE INTO ranks (rank, rank_name) VALUES (?, ?)").run(o.rank, o.rank === GLOBAL_RANK ? "global" : o.rankName);
  }

  /** Write a batch's records, and collect its scalar and stream points by series. */
  private apply(pending: Pending, batch: WriteBatch, scalars: PointColumns[], streams: PointColumns[]): void {
    const rank = this.options.rank;
    if (batch.scalars !== undefined && batch.scalars.length > 0) {
      const b = new ColumnBuilder();
      for (const p of batch.scalars) b.add(p.key, p.rank ?? rank, p.step, p.wall, p.value, p.reduce ?? null);
      scalars.push(b.build());
    }
    if (batch.scalarColumns !== undefined) scalars.push(batch.scalarColumns);
    if (batch.streams !== undefined && batch.streams.length > 0) {
      const b = new ColumnBuilder();
      for (const r of batch.streams) b.add(r.key, r.rank ?? rank, r.step, r.wall, r.value);
      streams.push(b.build());
    }
    if (batch.streamColumns !== undefined) streams.push(batch.streamColumns);
    for (const r of batch.system ?? []) this.insertRaw(pending, "system", r);
    for (const s of batch.samples ?? []) {
      const sampleRank = s.rank ?? rank;
      const id = this.seriesId(pending, s.key, "sample", sampleRank, "sample");
      this.sql["sampleInsert"]?.run(id, sampleRank, s.step, s.wall, JSON.stringify(s.records, nonFiniteReplacer));
    }
    for (const h of batch.histograms ?? []) {
      const histogramRank = h.rank ?? rank;
      const id = this.seriesId(pending, h.key, "histogram", histogramRank, "histogram");
      this.sql["histogramInsert"]?.run(id, histogramRank, h.step, h.wall, JSON.stringify(h.histogram, nonFiniteReplacer));
    }
    if (batch.hyperparams !== undefined) this.mergeConfig("hparams", batch.hyperparams);
  }

  /**
   * Store many points of one scalar series at once (arrays of equal length, in any order; a step
   * given twice keeps its last value). The fast path for bulk writes and imports.
   */
  writeSeries(key: string, steps: ArrayLike<number>, walls: ArrayLike<number>, values: ArrayLike<number>, options: { rank?: number; reduce?: string } = {}): void {
    if (steps.length !== walls.length || steps.length !== values.length) {
      throw new TypeError(`writeSeries("${key}"): steps, walls and values must have the same length, got ${steps.length}, ${walls.length}, ${values.length}`);
    }
    const rank = options.rank ?? this.options.rank;
    const claim = !this.rankNameClaimed && this.options.claimRankName !== false && steps.length > 0;
    this.transaction((pending) => {
      const keyId = this.seriesId(pending, key, "scalar", rank, options.reduce ?? null);
      const sorted = sortDedupe(steps, walls, values);
      this.appendSeries(pending, keyId, rank, sorted.steps, sorted.walls, sorted.values);
      if (claim) this.claimRankName();
    });
    if (claim) this.rankNameClaimed = true;
  }

  /** Store `params` as (part of) the run's hyperparameters / config. */
  writeHyperparams(params: Readonly<Record<string, unknown>>): void {
    this.write({ hyperparams: params });
  }

  /**
   * Mark this writer ended and close the file. The run's status becomes `finished` (or `failed`)
   * once no writer of it is still running (`failed` if any writer failed, else `crashed` if any
   * crashed).
   */
  finish(status: WriterStatus = "finished"): void {
    if (this.closed) return;
    try {
      this.transaction(() => {
        const now = Date.now();
        this.db.prepare("UPDATE writers SET ended_at = ?, status = ? WHERE id = ?").run(now, status, this.writerId);
        const running = this.db.prepare("SELECT count(*) AS n FROM writers WHERE status = 'running'").get() as { n: number };
        if (running.n === 0) {
          const failed = this.db.prepare("SELECT count(*) AS n FROM writers WHERE status = 'failed'").get() as { n: number };
          const crashed = this.db.prepare("SELECT count(*) AS n FROM writers WHERE status = 'crashed'").get() as { n: number };
          this.db.prepare("UPDATE run SET status = ?, ended_at = ?, updated_at = ? WHERE id = 1").run(failed.n > 0 ? "failed" : crashed.n > 0 ? "crashed" : "finished", now, now);
        }
      });
    } finally {
      this.close();
    }
  }

  /** Close the file without marking the writer ended (it then shows as still running). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }

  private register(): void {
    const o = this.options;
    this.transaction((pending) => {
      const now = Date.now();
      const resumeStep = o.resumeStep ?? 0;
      this.db
        .prepare("INSERT OR IGNORE INTO run (id, experiment, trial, status, started_at, updated_at, resume_step) VALUES (1, ?, ?, 'running', ?, ?, ?)")
        .run(o.experiment, o.trial, now, now, resumeStep);
      this.db.prepare("UPDATE run SET status = 'running', ended_at = NULL, updated_at = ? WHERE id = 1").run(now);
      if (resumeStep > 0) this.db.prepare("UPDATE run SET resume_step = ? WHERE id = 1").run(resumeStep);
      // An unfinished writer of the same role and rank in another process is a previous attempt
      // (a crash before a resume); in this process it is a second backend, still running.
      this.db
        .prepare("UPDATE writers SET status = 'superseded', ended_at = ? WHERE role = ? AND rank = ? AND status = 'running' AND pid != ?")
        .run(now, o.role, o.rank, process.pid);
      this.db
        .prepare("INSERT OR REPLACE INTO writers (id, role, rank, rank_name, pid, started_at, ended_at, status) VALUES (?, ?, ?, ?, ?, ?, NULL, 'running')")
        .run(this.writerId, o.role, o.rank, o.rankName, process.pid, now);
      this.db.prepare("INSERT OR IGNORE INTO ranks (rank, rank_name) VALUES (?, ?)").run(o.rank, o.rank === GLOBAL_RANK ? "global" : o.rankName);
      if (resumeStep > 0) this.truncateFrom(pending, resumeStep);
    });
  }

  /** Remove this writer's rows at or after `step` (a resume re-does those steps). */
  private truncateFrom(pending: Pending, step: number): void {
    const rank = this.options.rank;
    this.db.prepare("DELETE FROM points WHERE rank = ? AND step >= ?").run(rank, step);
    this.db.prepare("DELETE FROM samples WHERE rank = ? AND step >= ?").run(rank, step);
    this.db.prepare("DELETE FROM histograms WHERE rank = ? AND step >= ?").run(rank, step);
    this.db.prepare("DELETE FROM chunks WHERE rank = ? AND first_step >= ?").run(rank, step);
    const straddling = this.db.prepare("SELECT id, key_id, first_seq, steps, walls, vals FROM chunks WHERE rank = ? AND last_step >= ?").all(rank, step) as (ChunkRow & {
      key_id: number;
      first_seq: number | null;
    })[];
    for (const c of straddling) {
      const steps = unpackFloat64(c.steps);
      let keep = 0;
      while (keep < steps.length && (steps[keep] as number) < step) keep++;
      this.sql["chunkDelete"]?.run(c.id);
      if (keep > 0) this.insertChunk(c.key_id, rank, steps.slice(0, keep), unpackFloat64(c.walls).slice(0, keep), unpackFloat64(c.vals).slice(0, keep), c.first_seq);
    }
    // Series states are re-read from the file on next use.
    pending.states.clear();
    this.states.clear();
    this.streamNext.clear();
  }

  private transaction(fn: (pending: Pending) => void): void {
    if (this.closed) throw new Error(`the store writer of ${this.options.runDir} is closed`);
    let pending: Pending = newPending();
    withBusyRetry(() => {
      pending = newPending();
      this.db
        .transaction(() => {
          fn(pending);
          this.sql["touch"]?.run(Date.now());
        })
        .immediate();
    });
    for (const [k, v] of pending.keys) this.keyIds.set(k, v);
    for (const s of pending.series) this.knownSeries.add(s);
    for (const [k, v] of pending.states) this.states.set(k, v);
    for (const [k, v] of pending.streamNext) this.streamNext.set(k, v);
  }

  /** The id of a key of a kind, registering it (and the series for `rank`) when new. */
  private seriesId(pending: Pending, key: string, kind: KeyKind, rank: number, reduce: string | null): number {
    const cacheKey = `${kind}\u0000${key}`;
    let id = this.keyIds.get(cacheKey) ?? pending.keys.get(cacheKey);
    if (id === undefined) {
      this.sql["keyInsert"]?.run(key, kind, reduce);
      const row = this.sql["keySelect"]?.get(key, kind) as { id: number; reduce: string | null };
      if (row.reduce === null && reduce !== null) this.sql["keySetReduce"]?.run(reduce, row.id);
      id = row.id;
      pending.keys.set(cacheKey, id);
    }
    const seriesKey = `${id}:${rank}`;
    if (!this.knownSeries.has(seriesKey) && !pending.series.has(seriesKey)) {
      this.sql["seriesInsert"]?.run(id, rank);
      pending.series.add(seriesKey);
    }
    return id;
  }

  /** Stream values: per series, in arrival order, packed into chunks numbered by arrival. */
  private writeStreamGroups(pending: Pending, groups: readonly SeriesGroup[]): void {
    for (const g of groups) {
      const keyId = this.seriesId(pending, g.key, "stream", g.rank, null);
      const stateKey = `${keyId}:${g.rank}`;
      let next = pending.streamNext.get(stateKey) ?? this.streamNext.get(stateKey);
      if (next === undefined) next = ((this.sql["streamNext"]?.get(keyId, g.rank) as { s: number | null }).s ?? -1) + 1;
      for (let start = 0; start < g.steps.length; start += CHUNK_POINTS) {
        const end = Math.min(g.steps.length, start + CHUNK_POINTS);
        this.insertChunk(keyId, g.rank, g.steps.subarray(start, end), g.walls.subarray(start, end), g.values.subarray(start, end), next + start);
      }
      pending.streamNext.set(stateKey, next + g.steps.length);
    }
  }

  private insertRaw(pending: Pending, kind: "stream" | "system", r: RawPoint): void {
    const rank = r.rank ?? this.options.rank;
    const id = this.seriesId(pending, r.key, kind, rank, null);
    this.sql["rawInsert"]?.run(id, rank, r.step, r.wall, toSqlReal(r.value));
  }

  private writeScalarGroups(pending: Pending, groups: readonly SeriesGroup[]): void {
    for (const g of groups) {
      const keyId = this.seriesId(pending, g.key, "scalar", g.rank, g.reduce);
      const sorted = sortDedupe(g.steps, g.walls, g.values);
      this.appendSeries(pending, keyId, g.rank, sorted.steps, sorted.walls, sorted.values);
    }
  }

  private stateOf(pending: Pending, keyId: number, rank: number): SeriesState {
    const k = `${keyId}:${rank}`;
    return pending.states.get(k) ?? this.states.get(k) ?? this.loadState(keyId, rank);
  }

  /** What the file says about a series. */
  private loadState(keyId: number, rank: number): SeriesState {
    const packed = (this.sql["packedThrough"]?.get(keyId, rank) as { s: number | null }).s;
    const rows = (this.sql["rowCount"]?.get(keyId, rank) as { n: number }).n;
    const small = (this.sql["smallChunkCount"]?.get(keyId, rank, CHUNK_POINTS, keyId, rank, CHUNK_POINTS) as { n: number }).n;
    return { packedThrough: packed ?? -Infinity, rows, smallChunks: small };
  }

  /** Add sorted, step-unique points to a series. */
  private appendSeries(pending: Pending, keyId: number, rank: number, steps: Float64Array, walls: Float64Array, values: Float64Array): void {
    const k = `${keyId}:${rank}`;
    let state = this.stateOf(pending, keyId, rank);
    let start = 0;
    while (start < steps.length && (steps[start] as number) <= state.packedThrough) start++;
    if (start > 0) {
      this.rewritePacked(keyId, rank, steps.subarray(0, start), walls.subarray(0, start), values.subarray(0, start));
      state = this.loadState(keyId, rank);
    }
    const n = steps.length - start;
    if (n === 0) {
      pending.states.set(k, state);
      return;
    }
    if (state.rows + n < CHUNK_POINTS && n < MIN_CHUNK_RUN) {
      const upsert = this.sql["pointUpsert"] as Statement;
      for (let i = start; i < steps.length; i++) upsert.run(keyId, rank, steps[i], walls[i], toSqlReal(values[i] as number));
      pending.states.set(k, { ...state, rows: state.rows + n });
      return;
    }
    // Enough for a chunk: pack the rows and the new points together (rows are all newer than chunks).
    let merged = { steps: steps.subarray(start), walls: walls.subarray(start), values: values.subarray(start) };
    if (state.rows > 0) {
      const rows = this.sql["pointsOfSeries"]?.all(keyId, rank) as { step: number; wall: number; value: number | null }[];
      this.sql["pointsDelete"]?.run(keyId, rank);
      merged = mergeByStep(
        Float64Array.from(rows, (r) => r.step),
        Float64Array.from(rows, (r) => r.wall),
        Float64Array.from(rows, (r) => (r.value === null ? NaN : r.value)),
        merged.steps,
        merged.walls,
        merged.values,
      );
    }
    // Small chunks stay at the end of a series: when they would pile up, or a full chunk is about to
    // follow them, they are merged with the new points into full ones.
    if (state.smallChunks > 0 && (state.smallChunks + 1 >= MAX_SMALL_CHUNKS || merged.steps.length >= CHUNK_POINTS)) {
      const small = this.sql["smallChunks"]?.all(keyId, rank, CHUNK_POINTS, keyId, rank, CHUNK_POINTS) as ChunkRow[];
      for (const c of small) this.sql["chunkDelete"]?.run(c.id);
      merged = {
        steps: concat([...small.map((c) => unpackFloat64(c.steps)), merged.steps]),
        walls: concat([...small.map((c) => unpackFloat64(c.walls)), merged.walls]),
        values: concat([...small.map((c) => unpackFloat64(c.vals)), merged.values]),
      };
      state = { ...state, smallChunks: 0 };
    }
    this.insertChunks(keyId, rank, merged.steps, merged.walls, merged.values);
    const lastPieceSmall = merged.steps.length % CHUNK_POINTS !== 0;
    const fullPieces = Math.floor(merged.steps.length / CHUNK_POINTS);
    pending.states.set(k, {
      packedThrough: merged.steps[merged.steps.length - 1] as number,
      rows: 0,
      smallChunks: (fullPieces > 0 ? 0 : state.smallChunks) + (lastPieceSmall ? 1 : 0),
    });
  }

  /** Points at or before the packed part of a series: merge them into the chunks they fall in. */
  private rewritePacked(keyId: number, rank: number, steps: Float64Array, walls: Float64Array, values: Float64Array): void {
    const chunks = this.sql["chunksFrom"]?.all(keyId, rank, steps[0]) as ChunkRow[];
    const parts = chunks.map((c) => ({ steps: unpackFloat64(c.steps), walls: unpackFloat64(c.walls), values: unpackFloat64(c.vals) }));
    const old = {
      steps: concat(parts.map((p) => p.steps)),
      walls: concat(parts.map((p) => p.walls)),
      values: concat(parts.map((p) => p.values)),
    };
    for (const c of chunks) this.sql["chunkDelete"]?.run(c.id);
    const merged = mergeByStep(old.steps, old.walls, old.values, steps, walls, values);
    this.insertChunks(keyId, rank, merged.steps, merged.walls, merged.values);
  }

  private insertChunks(keyId: number, rank: number, steps: Float64Array, walls: Float64Array, values: Float64Array): void {
    for (let start = 0; start < steps.length; start += CHUNK_POINTS) {
      const end = Math.min(steps.length, start + CHUNK_POINTS);
      this.insertChunk(keyId, rank, steps.subarray(start, end), walls.subarray(start, end), values.subarray(start, end));
    }
  }

  private insertChunk(keyId: number, rank: number, steps: Float64Array, walls: Float64Array, values: Float64Array, firstSeq: number | null = null): void {
    const n = steps.length;
    let minI = -1;
    let maxI = -1;
    let nans = 0;
    for (let i = 0; i < n; i++) {
      const v = values[i] as number;
      if (v !== v) {
        nans++;
        continue;
      }
      if (minI < 0 || v < (values[minI] as number)) minI = i;
      if (maxI < 0 || v > (values[maxI] as number)) maxI = i;
    }
    const at = (a: Float64Array, i: number): number | null => (i < 0 ? null : (a[i] as number));
    // Stream steps only grow within a series, but a chunk's step range is kept exact anyway.
    let firstStep = steps[0] as number;
    let lastStep = steps[n - 1] as number;
    if (firstSeq !== null) {
      for (let i = 0; i < n; i++) {
        firstStep = Math.min(firstStep, steps[i] as number);
        lastStep = Math.max(lastStep, steps[i] as number);
      }
    }
    this.sql["chunkInsert"]?.run(
      keyId,
      rank,
      firstStep,
      lastStep,
      n,
      firstSeq,
      firstSeq === null ? null : firstSeq + n - 1,
      walls[0],
      walls[n - 1],
      at(values, minI),
      at(steps, minI),
      at(walls, minI),
      at(values, maxI),
      at(steps, maxI),
      at(walls, maxI),
      toSqlReal(values[n - 1] as number),
      nans,
      packFloat64(blockSummaries(steps, walls, values)),
      packFloat64(steps),
      packFloat64(walls),
      packFloat64(values),
    );
  }

  private mergeConfig(name: string, params: Readonly<Record<string, unknown>>): void {
    if (params === null || typeof params !== "object" || Array.isArray(params)) {
      throw new TypeError(`hyperparameters must be a plain object such as { lr: 0.001 }, got ${JSON.stringify(params)}`);
    }
    const row = this.sql["configSelect"]?.get(name) as { value: string } | undefined;
    const earlier = row === undefined ? {} : (JSON.parse(row.value) as Record<string, unknown>);
    this.sql["configUpsert"]?.run(name, JSON.stringify({ ...earlier, ...params }, nonFiniteReplacer));
  }
}

/** The pre-aggregated level of a chunk: one summary (BLOCK_FIELDS) per BLOCK_POINTS points. */
export function blockSummaries(steps: Float64Array, walls: Float64Array, values: Float64Array): Float64Array {
  const width = BLOCK_FIELDS.length;
  const blocks = Math.ceil(steps.length / BLOCK_POINTS);
  const out = new Float64Array(blocks * width);
  for (let b = 0; b < blocks; b++) {
    const start = b * BLOCK_POINTS;
    const end = Math.min(steps.length, start + BLOCK_POINTS);
    let minI = -1;
    let maxI = -1;
    let nanI = -1;
    for (let i = start; i < end; i++) {
      const v = values[i] as number;
      if (v !== v) {
        if (nanI < 0) nanI = i;
        continue;
      }
      if (minI < 0 || v < (values[minI] as number)) minI = i;
      if (maxI < 0 || v > (values[maxI] as number)) maxI = i;
    }
    const o = b * width;
    const at = (a: Float64Array, i: number): number => (i < 0 ? NaN : (a[i] as number));
    out[o] = end - start;
    out[o + 1] = steps[start] as number;
    out[o + 2] = walls[start] as number;
    out[o + 3] = steps[end - 1] as number;
    out[o + 4] = walls[end - 1] as number;
    out[o + 5] = values[end - 1] as number;
    out[o + 6] = at(values, minI);
    out[o + 7] = at(steps, minI);
    out[o + 8] = at(walls, minI);
    out[o + 9] = at(values, maxI);
    out[o + 10] = at(steps, maxI);
    out[o + 11] = at(walls, maxI);
    out[o + 12] = at(steps, nanI);
    out[o + 13] = at(walls, nanI);
  }
  return out;
}

function newPending(): Pending {
  return { keys: new Map(), streamNext: new Map(), series: new Set(), states: new Map() };
}

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

/** The values as a Float64Array: the array itself when it is one (it is only read), else a copy. */
function toFloat64(a: ArrayLike<number>): Float64Array {
  return a instanceof Float64Array ? a : Float64Array.from(a);
}

/** Points sorted by step, one per step (the last given wins). */
export function sortDedupe(steps: ArrayLike<number>, walls: ArrayLike<number>, values: ArrayLike<number>): { steps: Float64Array; walls: Float64Array; values: Float64Array } {
  const n = steps.length;
  let ordered = true;
  for (let i = 1; i < n; i++) {
    if ((steps[i] as number) <= (steps[i - 1] as number)) {
      ordered = false;
      break;
    }
  }
  if (ordered) return { steps: toFloat64(steps), walls: toFloat64(walls), values: toFloat64(values) };
  const index = Array.from({ length: n }, (_, i) => i);
  // Stable sort by step; among equal steps the last index is kept.
  index.sort((a, b) => (steps[a] as number) - (steps[b] as number) || a - b);
  const keep: number[] = [];
  for (let j = 0; j < n; j++) {
    const i = index[j] as number;
    const next = index[j + 1];
    if (next !== undefined && steps[next] === steps[i]) continue;
    keep.push(i);
  }
  return {
    steps: Float64Array.from(keep, (i) => steps[i] as number),
    walls: Float64Array.from(keep, (i) => walls[i] as number),
    values: Float64Array.from(keep, (i) => values[i] as number),
  };
}

/** Merge two step-sorted, step-unique series; where both have a step, `b` wins. */
function mergeByStep(
  aSteps: Float64Array,
  aWalls: Float64Array,
  aValues: Float64Array,
  bSteps: Float64Array,
  bWalls: Float64Array,
  bValues: Float64Array,
): { steps: Float64Array; walls: Float64Array; values: Float64Array } {
  const steps = new Float64Array(aSteps.length + bSteps.length);
  const walls = new Float64Array(steps.length);
  const values = new Float64Array(steps.length);
  let i = 0;
  let j = 0;
  let n = 0;
  while (i < aSteps.length || j < bSteps.length) {
    const sa = i < aSteps.length ? (aSteps[i] as number) : Infinity;
    const sb = j < bSteps.length ? (bSteps[j] as number) : Infinity;
    if (sb <= sa) {
      if (sa === sb) i++;
      steps[n] = sb;
      walls[n] = bWalls[j] as number;
      values[n] = bValues[j] as number;
      j++;
    } else {
      steps[n] = sa;
      walls[n] = aWalls[i] as number;
      values[n] = aValues[i] as number;
      i++;
    }
    n++;
  }
  return { steps: steps.subarray(0, n), walls: walls.subarray(0, n), values: values.subarray(0, n) };
}
