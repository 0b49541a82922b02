/**
 * Every SQL statement the store's reader runs, each typed with its parameters and its row (a
 * misspelt name or a field the query does not select is a compile error). Prepared once per
 * reader, once a writer has created the tables.
 */
import type Database from "better-sqlite3";
import type { KeyKind } from "./read-types.js";

type Statement<P extends unknown[], R> = Database.Statement<P, R>;

/** The `run` row. */
interface RunRow {
  readonly experiment: string | null;
  readonly trial: string | null;
  readonly status: string;
  readonly started_at: number | null;
  readonly ended_at: number | null;
  readonly updated_at: number | null;
  readonly resume_step: number;
}

/** A key with its ranks, comma-separated (`group_concat`). */
interface KeyRow {
  readonly key: string;
  readonly kind: string;
  readonly reduce: string | null;
  readonly ranks: string;
}

/** The last point of a scalar key, from its rows (`p…`) and from its last chunk (`c…`). */
interface LastValueRow {
  readonly key: string;
  readonly rank: number;
  readonly pstep: number | null;
  readonly pvalue: number | null;
  readonly cstep: number | null;
  readonly cvalue: number | null;
}

/** A chunk's summary columns, without its blobs. */
export interface ChunkMeta {
  readonly id: number;
  readonly first_step: number;
  readonly last_step: number;
  readonly n: number;
  readonly first_wall: number;
  readonly last_wall: number;
  readonly min: number | null;
  readonly min_step: number;
  readonly min_wall: number;
  readonly max: number | null;
  readonly max_step: number;
  readonly max_wall: number;
  readonly last: number | null;
  readonly nan_count: number;
  /** Step range for scalar chunks, arrival range for stream chunks. */
  readonly pos_first: number;
  readonly pos_last: number;
}

/** A sample or histogram row; `json` is its records or its histogram. */
export interface RecordRow {
  readonly seq: number;
  readonly key: string;
  readonly rank: number;
  readonly step: number;
  readonly wall: number;
  readonly json: string;
}

/** What `samples`/`histograms` filter on (`rank` null: every rank; the `…OfKey` statements take a `key` too). */
interface RecordParams {
  readonly kind: KeyKind;
  readonly after: number;
  readonly rank: number | null;
  readonly limit: number;
}

/** `(key_id, rank, from, to)`: a series' positions inside an open window. */
type WindowParams = [keyId: number, rank: number, from: number, to: number];

/** The reader's statements. */
export interface ReaderStatements {
  readonly run: Statement<[], RunRow>;
  readonly keys: Statement<[], KeyRow>;
  readonly keysOfKind: Statement<[kind: KeyKind], KeyRow>;
  /** Every line's row (`role`, `thread`, `host` are NULL in a version-1 file, which lacks them). */
  readonly ranks: Statement<
    [],
    { rank: number; rank_name: string | null; role: string | null; thread: number | null; host: string | null }
  >;
  readonly keyId: Statement<[key: string, kind: KeyKind], { id: number }>;
  /** A key's first line in line order (global, ranks ascending, the controller, thread lines). */
  readonly lowestRank: Statement<[keyId: number], { r: number | null }>;
  readonly lastValues: Statement<[], LastValueRow>;
  readonly samples: Statement<[RecordParams], RecordRow>;
  readonly samplesOfKey: Statement<[RecordParams & { key: string }], RecordRow>;
  readonly histograms: Statement<[RecordParams], RecordRow>;
  readonly histogramsOfKey: Statement<[RecordParams & { key: string }], RecordRow>;
  readonly config: Statement<[name: string], { value: string }>;
  /** Scalar chunks by step. */
  readonly scalarChunks: Statement<WindowParams, ChunkMeta>;
  /** Stream chunks by arrival. */
  readonly streamChunks: Statement<WindowParams, ChunkMeta>;
  /** A scalar series' recent rows: `[step, wall, value]`. */
  readonly points: Statement<WindowParams, [step: number, wall: number, value: number | null]>;
  readonly chunkBlobs: Statement<[id: number], { steps: Buffer; walls: Buffer; vals: Buffer }>;
  /** A chunk's pre-aggregated blocks (one column, plucked). */
  readonly chunkBlocks: Statement<[id: number], Buffer>;
  /** A system metric's rows: `[seq, step, wall, value]`. */
  readonly rawPoints: Statement<WindowParams, [seq: number, step: number, wall: number, value: number | null]>;
  /** A system metric's first `limit` rows past a sequence number: `[seq, step, wall, value]`. */
  readonly rawPointsAfter: Statement<
    [keyId: number, rank: number, after: number, limit: number],
    [seq: number, step: number, wall: number, value: number | null]
  >;
}

/** A writer still marked running (what a reader needs to judge whether its process lives). */
export interface RunningWriterRow {
  readonly role: string;
  readonly rank: number;
  readonly rank_name: string | null;
  readonly pid: number | null;
  readonly host: string | null;
  readonly started_at: number | null;
  readonly heartbeat_at: number | null;
}

/** A row of `lost_ranks`. */
interface LostRankRow {
  readonly rank: number;
  readonly rank_name: string;
  readonly step: number | null;
  readonly wall: number;
  readonly reason: string;
  readonly back_step: number | null;
}

/** Statements reading writers' heartbeats and lost ranks, prepared where the file has them. */
export interface LivenessStatements {
  readonly runningWriters: Statement<[], RunningWriterRow>;
  /** How many writers ended with each status. */
  readonly endedWriters: Statement<[], { status: string; n: number }>;
  readonly lostRanks: Statement<[], LostRankRow>;
}

/** Prepare the liveness statements (the file must have `writers.heartbeat_at` and `lost_ranks`). */
export function prepareLivenessStatements(db: Database.Database): LivenessStatements {
  return {
    runningWriters: db.prepare(
      "SELECT role, rank, rank_name, pid, host, started_at, heartbeat_at FROM writers WHERE status = 'running'",
    ),
    endedWriters: db.prepare("SELECT status, count(*) AS n FROM writers WHERE status != 'running' GROUP BY status"),
    lostRanks: db.prepare("SELECT rank, rank_name, step, wall, reason, back_step FROM lost_ranks ORDER BY id"),
  };
}

const CHUNK_META =
  "id, first_step, last_step, n, first_wall, last_wall, min, min_step, min_wall, max, max_step, max_wall, last, nan_count";

const KEYS = (
  where: string,
): string => `SELECT k.key AS key, k.kind AS kind, k.reduce AS reduce, group_concat(s.rank) AS ranks
  FROM keys k JOIN series s ON s.key_id = k.id ${where} GROUP BY k.id ORDER BY k.key, k.kind`;

/** Newest first (the reader reverses them); one key's through its index when `ofKey`. */
const RECORDS = (
  table: "samples" | "histograms",
  column: "records" | "data",
  ofKey: boolean,
): string => `SELECT t.seq AS seq, k.key AS key, t.rank AS rank, t.step AS step, t.wall AS wall, t.${column} AS json
  FROM ${table} t JOIN keys k ON k.id = t.key_id
  WHERE k.kind = @kind AND t.seq > @after ${ofKey ? "AND k.key = @key" : ""} AND (@rank IS NULL OR t.rank = @rank)
  ORDER BY t.seq DESC LIMIT @limit`;

/** Line order in SQL: the global line, ranks ascending, the controller, then thread lines (by owner and thread). */
export const LINE_ORDER = (column: string): string =>
  `CASE WHEN ${column} = -1 THEN 0 WHEN ${column} >= 0 THEN 1 WHEN ${column} = -2 THEN 2 ELSE 3 END, abs(${column})`;

/** Prepare the reader's statements (the tables must exist); `version` is the file's schema version. */
export function prepareReaderStatements(db: Database.Database, version = 2): ReaderStatements {
  return {
    run: db.prepare(
      "SELECT experiment, trial, status, started_at, ended_at, updated_at, resume_step FROM run WHERE id = 1",
    ),
    keys: db.prepare(KEYS("")),
    keysOfKind: db.prepare(KEYS("WHERE k.kind = ?")),
    ranks: db.prepare(
      version >= 2
        ? `SELECT rank, rank_name, role, thread, host FROM ranks ORDER BY ${LINE_ORDER("rank")}`
        : `SELECT rank, rank_name, NULL AS role, NULL AS thread, NULL AS host FROM ranks ORDER BY ${LINE_ORDER("rank")}`,
    ),
    keyId: db.prepare("SELECT id FROM keys WHERE key = ? AND kind = ?"),
    lowestRank: db.prepare(`SELECT rank AS r FROM series WHERE key_id = ? ORDER BY ${LINE_ORDER("rank")} LIMIT 1`),
    lastValues: db.prepare(
      `SELECT k.key AS key, s.rank AS rank,
         (SELECT step FROM points p WHERE p.key_id = k.id AND p.rank = s.rank ORDER BY p.step DESC LIMIT 1) AS pstep,
         (SELECT value FROM points p WHERE p.key_id = k.id AND p.rank = s.rank ORDER BY p.step DESC LIMIT 1) AS pvalue,
         (SELECT last_step FROM chunks c WHERE c.key_id = k.id AND c.rank = s.rank AND c.first_seq IS NULL ORDER BY c.first_step DESC LIMIT 1) AS cstep,
         (SELECT last FROM chunks c WHERE c.key_id = k.id AND c.rank = s.rank AND c.first_seq IS NULL ORDER BY c.first_step DESC LIMIT 1) AS cvalue
       FROM keys k JOIN series s ON s.key_id = k.id
       WHERE k.kind = 'scalar' AND s.rank = (SELECT rank FROM series WHERE key_id = k.id ORDER BY ${LINE_ORDER("rank")} LIMIT 1)
       ORDER BY k.key`,
    ),
    samples: db.prepare(RECORDS("samples", "records", false)),
    samplesOfKey: db.prepare(RECORDS("samples", "records", true)),
    histograms: db.prepare(RECORDS("histograms", "data", false)),
    histogramsOfKey: db.prepare(RECORDS("histograms", "data", true)),
    config: db.prepare("SELECT value FROM config WHERE name = ?"),
    scalarChunks: db.prepare(
      `SELECT ${CHUNK_META}, first_step AS pos_first, last_step AS pos_last FROM chunks
       WHERE key_id = ? AND rank = ? AND last_step > ? AND first_step < ? AND first_seq IS NULL ORDER BY first_step`,
    ),
    streamChunks: db.prepare(
      `SELECT ${CHUNK_META}, first_seq AS pos_first, last_seq AS pos_last FROM chunks
       WHERE key_id = ? AND rank = ? AND last_seq > ? AND first_seq < ? ORDER BY first_seq`,
    ),
    points: db
      .prepare<WindowParams, [number, number, number | null]>(
        "SELECT step, wall, value FROM points WHERE key_id = ? AND rank = ? AND step > ? AND step < ? ORDER BY step",
      )
      .raw(true),
    chunkBlobs: db.prepare("SELECT steps, walls, vals FROM chunks WHERE id = ?"),
    chunkBlocks: db.prepare<[number], Buffer>("SELECT blocks FROM chunks WHERE id = ?").pluck(true),
    rawPoints: db
      .prepare<WindowParams, [number, number, number, number | null]>(
        "SELECT seq, step, wall, value FROM stream_points WHERE key_id = ? AND rank = ? AND seq > ? AND seq < ? ORDER BY seq",
      )
      .raw(true),
    rawPointsAfter: db
      .prepare<[number, number, number, number], [number, number, number, number | null]>(
        "SELECT seq, step, wall, value FROM stream_points WHERE key_id = ? AND rank = ? AND seq > ? ORDER BY seq LIMIT ?",
      )
      .raw(true),
  };
}

/** An alert event row: its position and the event as JSON. */
interface AlertRow {
  readonly seq: number;
  readonly event: string;
}

/** The alerts statements: the newest events after a position (the reader reverses them), and the oldest (a reader paging forward). */
export interface AlertsStatements {
  readonly newest: Statement<[after: number, limit: number], AlertRow>;
  readonly oldest: Statement<[after: number, limit: number], AlertRow>;
}

/** The alerts statements, prepared only once the table exists (a store written before alerts has none). */
export function prepareAlertsStatements(db: Database.Database): AlertsStatements | null {
  const table = db
    .prepare<[], { n: number }>("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'alerts'")
    .get();
  if (table === undefined || table.n === 0) return null;
  return {
    newest: db.prepare("SELECT seq, event FROM alerts WHERE seq > ? ORDER BY seq DESC LIMIT ?"),
    oldest: db.prepare("SELECT seq, event FROM alerts WHERE seq > ? ORDER BY seq LIMIT ?"),
  };
}
