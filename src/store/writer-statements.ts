/**
 * Every SQL statement the store's writer runs, prepared once per writer, each typed with its
 * parameters and its row. The set is an object type, not a string map: a misspelt statement name
 * is a compile error (test/store/statements.test.ts), and so is a wrong parameter
 * count or a row field the query does not select.
 */
import type Database from "better-sqlite3";
import type { KeyKind } from "./schema.js";

/** A prepared statement taking `P` and giving rows `R` (`never`: it gives none). */
type Statement<P extends unknown[], R = never> = Database.Statement<P, R>;

/** A packed chunk's blobs (see `chunks` in schema.ts). */
interface ChunkBlobs {
  readonly id: number;
  readonly steps: Buffer;
  readonly walls: Buffer;
  readonly vals: Buffer;
}

/** A chunk with its series and its arrival numbering (null for scalar chunks). */
interface ChunkOfSeries extends ChunkBlobs {
  readonly key_id: number;
  readonly first_seq: number | null;
}

/** `(key_id, rank)` of a series. */
type SeriesParams = [keyId: number, rank: number];

/** The small chunks of a series: `(key_id, rank, CHUNK_POINTS)` twice (the query looks at the last full chunk too). */
type SmallChunkParams = [
  keyId: number,
  rank: number,
  chunkPoints: number,
  keyId: number,
  rank: number,
  chunkPoints: number,
];

/** The columns of a `chunks` row, in `chunkInsert`'s order. */
type ChunkInsertParams = [
  keyId: number,
  rank: number,
  firstStep: number,
  lastStep: number,
  n: number,
  firstSeq: number | null,
  lastSeq: number | null,
  firstWall: number,
  lastWall: number,
  min: number | null,
  minStep: number | null,
  minWall: number | null,
  max: number | null,
  maxStep: number | null,
  maxWall: number | null,
  last: number | null,
  nanCount: number,
  blocks: Buffer,
  steps: Buffer,
  walls: Buffer,
  vals: Buffer,
];

/** A point row: `(key_id, rank, step, wall, value)`; value NULL stands for NaN. */
type PointParams = [keyId: number, rank: number, step: number, wall: number, value: number | null];

/** A sample or histogram row: `(key_id, rank, step, wall, json)`. */
type RecordParams = [keyId: number, rank: number, step: number, wall: number, json: string];

/** The writer's statements. */
export interface WriterStatements {
  // The run and its writers.
  readonly runInsert: Statement<
    [experiment: string, trial: string, startedAt: number, updatedAt: number, resumeStep: number]
  >;
  readonly runRunning: Statement<[updatedAt: number]>;
  readonly runResume: Statement<[resumeStep: number]>;
  readonly runEnd: Statement<[status: string, endedAt: number, updatedAt: number]>;
  readonly runTimes: Statement<[startedAt: number, endedAt: number]>;
  readonly touch: Statement<[updatedAt: number]>;
  readonly writersSupersede: Statement<[endedAt: number, role: string, rank: number, pid: number]>;
  readonly writerInsert: Statement<
    [
      id: string,
      role: string,
      rank: number,
      rankName: string,
      pid: number,
      startedAt: number,
      host: string,
      heartbeatAt: number,
    ]
  >;
  readonly writerBeat: Statement<[heartbeatAt: number, id: string]>;
  readonly lostRankInsert: Statement<
    [rank: number, rankName: string, step: number | null, wall: number, reason: string]
  >;
  readonly lostRankBack: Statement<[backStep: number | null, backWall: number, rankName: string]>;
  readonly writerEnd: Statement<[endedAt: number, status: string, id: string]>;
  readonly writersWithStatus: Statement<[status: string], { n: number }>;
  readonly rankInsert: Statement<[rank: number, rankName: string, role: string, thread: number, host: string | null]>;
  readonly rankReplace: Statement<[rank: number, rankName: string, role: string, thread: number, host: string | null]>;
  // Keys and series.
  readonly keyInsert: Statement<[key: string, kind: KeyKind, reduce: string | null]>;
  readonly keySelect: Statement<[key: string, kind: KeyKind], { id: number; reduce: string | null }>;
  readonly keySetReduce: Statement<[reduce: string, id: number]>;
  readonly seriesInsert: Statement<SeriesParams>;
  // Scalar series: rows, then packed chunks.
  readonly packedThrough: Statement<SeriesParams, { s: number | null }>;
  readonly rowCount: Statement<SeriesParams, { n: number }>;
  readonly smallChunkCount: Statement<SmallChunkParams, { n: number }>;
  readonly smallChunks: Statement<SmallChunkParams, ChunkBlobs>;
  readonly pointUpsert: Statement<PointParams>;
  readonly pointsOfSeries: Statement<SeriesParams, { step: number; wall: number; value: number | null }>;
  readonly pointsDelete: Statement<SeriesParams>;
  readonly chunkInsert: Statement<ChunkInsertParams>;
  readonly chunksFrom: Statement<[keyId: number, rank: number, step: number], ChunkBlobs>;
  readonly chunkDelete: Statement<[id: number]>;
  // Stream series: chunks numbered by arrival.
  readonly streamNext: Statement<SeriesParams, { s: number | null }>;
  // Rows of system metrics, samples, histograms; documents.
  readonly rawInsert: Statement<PointParams>;
  readonly sampleInsert: Statement<RecordParams>;
  readonly histogramInsert: Statement<RecordParams>;
  readonly configSelect: Statement<[name: string], { value: string }>;
  readonly configUpsert: Statement<[name: string, value: string]>;
  readonly alertInsert: Statement<
    [alertId: string, rule: string, state: string, level: string, step: number | null, wall: number, event: string]
  >;
  // Per-rank timings at each flush (the Ranks view).
  readonly rankListInsert: Statement<[ranks: string]>;
  readonly rankTimingUpsert: Statement<
    [step: number, wall: number, listId: number, report: string, stepMs: Buffer, latenessMs: Buffer, waitMs: Buffer]
  >;
  readonly rankTimingDeleteFrom: Statement<[step: number]>;
  // A resume: this writer's rows at or after a step.
  readonly pointsDeleteFrom: Statement<[rank: number, step: number]>;
  readonly samplesDeleteFrom: Statement<[rank: number, step: number]>;
  readonly histogramsDeleteFrom: Statement<[rank: number, step: number]>;
  readonly chunksDeleteFrom: Statement<[rank: number, step: number]>;
  readonly chunksAcross: Statement<[rank: number, step: number], ChunkOfSeries>;
}

/** The small trailing chunks of a series: after its last full one. */
const SMALL_CHUNKS_WHERE = `key_id = ? AND rank = ? AND first_seq IS NULL AND n < ? AND first_step >
  coalesce((SELECT max(last_step) FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NULL AND n >= ?), -1e308)`;

/** Prepare the writer's statements on a connection whose schema exists. */
export function prepareWriterStatements(db: Database.Database): WriterStatements {
  return {
    runInsert: db.prepare(
      "INSERT OR IGNORE INTO run (id, experiment, trial, status, started_at, updated_at, resume_step) VALUES (1, ?, ?, 'running', ?, ?, ?)",
    ),
    runRunning: db.prepare("UPDATE run SET status = 'running', ended_at = NULL, updated_at = ? WHERE id = 1"),
    runResume: db.prepare("UPDATE run SET resume_step = ? WHERE id = 1"),
    runEnd: db.prepare("UPDATE run SET status = ?, ended_at = ?, updated_at = ? WHERE id = 1"),
    runTimes: db.prepare("UPDATE run SET started_at = ?, ended_at = ? WHERE id = 1"),
    touch: db.prepare("UPDATE run SET updated_at = ? WHERE id = 1"),
    writersSupersede: db.prepare(
      "UPDATE writers SET status = 'superseded', ended_at = ? WHERE role = ? AND rank = ? AND status = 'running' AND pid != ?",
    ),
    writerInsert: db.prepare(
      "INSERT OR REPLACE INTO writers (id, role, rank, rank_name, pid, started_at, ended_at, status, host, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, NULL, 'running', ?, ?)",
    ),
    writerBeat: db.prepare("UPDATE writers SET heartbeat_at = ? WHERE id = ? AND status = 'running'"),
    lostRankInsert: db.prepare("INSERT INTO lost_ranks (rank, rank_name, step, wall, reason) VALUES (?, ?, ?, ?, ?)"),
    lostRankBack: db.prepare(
      "UPDATE lost_ranks SET back_step = ?, back_wall = ? WHERE id = (SELECT max(id) FROM lost_ranks WHERE rank_name = ? AND back_wall IS NULL)",
    ),
    writerEnd: db.prepare("UPDATE writers SET ended_at = ?, status = ? WHERE id = ?"),
    writersWithStatus: db.prepare("SELECT count(*) AS n FROM writers WHERE status = ?"),
    rankInsert: db.prepare("INSERT OR IGNORE INTO ranks (rank, rank_name, role, thread, host) VALUES (?, ?, ?, ?, ?)"),
    rankReplace: db.prepare(
      "INSERT OR REPLACE INTO ranks (rank, rank_name, role, thread, host) VALUES (?, ?, ?, ?, ?)",
    ),
    keyInsert: db.prepare("INSERT OR IGNORE INTO keys (key, kind, reduce) VALUES (?, ?, ?)"),
    keySelect: db.prepare("SELECT id, reduce FROM keys WHERE key = ? AND kind = ?"),
    keySetReduce: db.prepare("UPDATE keys SET reduce = ? WHERE id = ?"),
    seriesInsert: db.prepare("INSERT OR IGNORE INTO series (key_id, rank) VALUES (?, ?)"),
    packedThrough: db.prepare(
      "SELECT max(last_step) AS s FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NULL",
    ),
    rowCount: db.prepare("SELECT count(*) AS n FROM points WHERE key_id = ? AND rank = ?"),
    smallChunkCount: db.prepare(`SELECT count(*) AS n FROM chunks WHERE ${SMALL_CHUNKS_WHERE}`),
    smallChunks: db.prepare(
      `SELECT id, steps, walls, vals FROM chunks WHERE ${SMALL_CHUNKS_WHERE} ORDER BY first_step`,
    ),
    pointUpsert: db.prepare("INSERT OR REPLACE INTO points (key_id, rank, step, wall, value) VALUES (?, ?, ?, ?, ?)"),
    pointsOfSeries: db.prepare("SELECT step, wall, value FROM points WHERE key_id = ? AND rank = ? ORDER BY step"),
    pointsDelete: db.prepare("DELETE FROM points WHERE key_id = ? AND rank = ?"),
    chunkInsert: db.prepare(
      `INSERT INTO chunks (key_id, rank, first_step, last_step, n, first_seq, last_seq, first_wall, last_wall, min, min_step, min_wall,
       max, max_step, max_wall, last, nan_count, blocks, steps, walls, vals) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    chunksFrom: db.prepare(
      "SELECT id, steps, walls, vals FROM chunks WHERE key_id = ? AND rank = ? AND last_step >= ? AND first_seq IS NULL ORDER BY first_step",
    ),
    chunkDelete: db.prepare("DELETE FROM chunks WHERE id = ?"),
    streamNext: db.prepare(
      "SELECT max(last_seq) AS s FROM chunks WHERE key_id = ? AND rank = ? AND first_seq IS NOT NULL",
    ),
    rawInsert: db.prepare("INSERT INTO stream_points (key_id, rank, step, wall, value) VALUES (?, ?, ?, ?, ?)"),
    sampleInsert: db.prepare("INSERT INTO samples (key_id, rank, step, wall, records) VALUES (?, ?, ?, ?, ?)"),
    histogramInsert: db.prepare("INSERT INTO histograms (key_id, rank, step, wall, data) VALUES (?, ?, ?, ?, ?)"),
    configSelect: db.prepare("SELECT value FROM config WHERE name = ?"),
    alertInsert: db.prepare(
      "INSERT INTO alerts (alert_id, rule, state, level, step, wall, event) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    configUpsert: db.prepare("INSERT OR REPLACE INTO config (name, value) VALUES (?, ?)"),
    rankListInsert: db.prepare("INSERT INTO rank_lists (ranks) VALUES (?)"),
    rankTimingUpsert: db.prepare(
      "INSERT OR REPLACE INTO rank_timing (step, wall, list_id, report, step_ms, lateness_ms, wait_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    rankTimingDeleteFrom: db.prepare("DELETE FROM rank_timing WHERE step >= ?"),
    pointsDeleteFrom: db.prepare("DELETE FROM points WHERE rank = ? AND step >= ?"),
    samplesDeleteFrom: db.prepare("DELETE FROM samples WHERE rank = ? AND step >= ?"),
    histogramsDeleteFrom: db.prepare("DELETE FROM histograms WHERE rank = ? AND step >= ?"),
    chunksDeleteFrom: db.prepare("DELETE FROM chunks WHERE rank = ? AND first_step >= ?"),
    chunksAcross: db.prepare(
      "SELECT id, key_id, first_seq, steps, walls, vals FROM chunks WHERE rank = ? AND last_step >= ?",
    ),
  };
}
