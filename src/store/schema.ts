/**
 * The store's SQLite schema and connections: one `metrics.db` per run directory, in WAL mode so a
 * reader (the dashboard, `rankscope tail`) never blocks a writer and is never blocked by one.
 *
 * Tables (see docs/store.md for the full description):
 * - `run`: one row of run metadata (experiment, trial, status, start/end time).
 * - `writers`: one row per process that wrote (its role, rank, pid, host and heartbeat), so status
 *   can be derived — also for a writer that died without saying (see `liveness.ts`).
 * - `lost_ranks`: ranks the controller stopped expecting without them leaving (a crash), by step.
 * - `keys`: one row per (key, kind); every other table refers to keys by id.
 * - `ranks`: one row per line (`rank` columns hold lines: −1 global, −2 the controller, r ≥ 0 rank r,
 *   thread lines for a user worker's raw values; `lineOf` in core/rank-identity.ts), with its
 *   name, role, thread and host.
 * - `series`: which (key, rank) pairs exist, so listing keys never scans points.
 * - `points`: the recent points of a scalar series, one row each, (key, rank, step) unique.
 * - `chunks`: older points of a scalar series, packed: up to `CHUNK_POINTS` steps, wall times and
 *   values as little-endian float64 blobs, with the chunk's min, max and last kept in columns.
 * - `stream_points`: system metrics, one row each, in arrival order.
 * - Stream values (`per_rank_no_reduce`) go into `chunks` too, one or more per write batch,
 *   numbered by arrival (`first_seq`..`last_seq`) instead of keyed by step.
 * - `samples`, `histograms`: JSON per key per flush.
 * - `config`: the run's hyperparameters and other documents, JSON by name.
 * - `alerts`: the run's alert events (firing and resolved), in order: a few columns to find them
 *   by, and the whole event as JSON (docs/alerts.md).
 * - `rank_timing`: per flush, every rank's step time, lateness and barrier wait (float32 blobs in
 *   the order of a `rank_lists` row) and the flush's straggler report (JSON), for the dashboard's
 *   Ranks view (docs/stragglers.md); `rank_lists`: the ranks those blobs follow, written when they change.
 */
import { join } from "node:path";
import { STORE_FILE } from "./store-file.js";
import { errorCode } from "../core/errors.js";
import { retrySync } from "../core/retry.js";
import { GLOBAL_RANK, SERIES_KINDS, type KeyKind, type SeriesKind } from "./read-types.js";

export { STORE_FILE, GLOBAL_RANK, SERIES_KINDS, type KeyKind, type SeriesKind };

/**
 * Version of the schema below; written to `PRAGMA user_version`. 2: `ranks` names every line
 * (`role`, `thread`, `host`; the controller's own line is `CONTROLLER_RANK`, −2, and a user worker's
 * raw values have thread lines, see `lineOf`), the writers' `host` and `heartbeat_at`, and the
 * `lost_ranks`, `alerts`, `rank_timing` and `rank_lists` tables. A version-1 file is migrated when
 * opened for writing (new tables come from `SCHEMA`, new columns are added; a reader of a file
 * without `alerts` finds no alerts, without `rank_timing` no timings).
 */
export const SCHEMA_VERSION = 2;

/** Points per packed chunk: large enough that a million points are ~500 rows, small enough to rewrite. */
export const CHUNK_POINTS = 2048;

/** Points per block of a chunk's pre-aggregated level. */
export const BLOCK_POINTS = 64;

/**
 * The float64 fields of one block summary, in order. `min*`/`max*` are NaN when every value of the
 * block is NaN; `nanStep`/`nanWall` are NaN when none is.
 */
export const BLOCK_FIELDS = [
  "n",
  "firstStep",
  "firstWall",
  "lastStep",
  "lastWall",
  "last",
  "min",
  "minStep",
  "minWall",
  "max",
  "maxStep",
  "maxWall",
  "nanStep",
  "nanWall",
] as const;

/** How often a writer notes that its process is alive (`writers.heartbeat_at`). */
export const HEARTBEAT_MS = 5000;

/**
 * A writer whose heartbeat is older than this is taken for dead by readers (on another host, or
 * when its pid cannot be checked); on the writer's own host a reader sees at once that its process
 * is gone. Six heartbeats: a busy disk or a stalled thread can miss a few.
 */
export const HEARTBEAT_STALE_MS = 6 * HEARTBEAT_MS;

/** How long a connection waits for another process's write lock before SQLite reports busy. */
export const BUSY_TIMEOUT_MS = 10_000;

/** The tables and indexes, created by `openForWriting` (connection.ts). */
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS run (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  experiment TEXT, trial TEXT, status TEXT NOT NULL,
  started_at REAL, ended_at REAL, updated_at REAL, resume_step INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS writers (
  id TEXT PRIMARY KEY, role TEXT NOT NULL, rank INTEGER NOT NULL, rank_name TEXT,
  pid INTEGER, started_at REAL, ended_at REAL, status TEXT NOT NULL, host TEXT, heartbeat_at REAL
);
CREATE TABLE IF NOT EXISTS lost_ranks (
  id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, rank_name TEXT NOT NULL, step INTEGER, wall REAL NOT NULL,
  reason TEXT NOT NULL, back_step INTEGER, back_wall REAL
);
CREATE TABLE IF NOT EXISTS keys (
  id INTEGER PRIMARY KEY, key TEXT NOT NULL, kind TEXT NOT NULL, reduce TEXT, UNIQUE (key, kind)
);
CREATE TABLE IF NOT EXISTS ranks (rank INTEGER PRIMARY KEY, rank_name TEXT, role TEXT, thread INTEGER, host TEXT);
CREATE TABLE IF NOT EXISTS series (
  key_id INTEGER NOT NULL, rank INTEGER NOT NULL, PRIMARY KEY (key_id, rank)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS points (
  key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, wall REAL NOT NULL,
  value REAL, -- NULL stands for NaN (SQLite cannot store NaN); ±Infinity are stored as themselves
  PRIMARY KEY (key_id, rank, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY, key_id INTEGER NOT NULL, rank INTEGER NOT NULL,
  first_step INTEGER NOT NULL, last_step INTEGER NOT NULL, n INTEGER NOT NULL,
  -- Streams only: arrival positions of the first and last point in their series (NULL for scalars).
  first_seq INTEGER, last_seq INTEGER,
  first_wall REAL NOT NULL, last_wall REAL NOT NULL,
  min REAL, min_step INTEGER, min_wall REAL, max REAL, max_step INTEGER, max_wall REAL,
  last REAL, nan_count INTEGER NOT NULL,
  -- Pre-aggregated level: per block of BLOCK_POINTS points, its summary (see BLOCK_FIELDS). Kept
  -- before the point blobs so reading it does not read them.
  blocks BLOB NOT NULL,
  steps BLOB NOT NULL, walls BLOB NOT NULL, vals BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_series ON chunks (key_id, rank, first_step);
CREATE INDEX IF NOT EXISTS chunks_stream ON chunks (key_id, rank, first_seq) WHERE first_seq IS NOT NULL;
CREATE TABLE IF NOT EXISTS stream_points (
  seq INTEGER PRIMARY KEY, key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  wall REAL NOT NULL, value REAL
);
CREATE INDEX IF NOT EXISTS stream_points_series ON stream_points (key_id, rank, seq);
CREATE TABLE IF NOT EXISTS samples (
  seq INTEGER PRIMARY KEY, key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  wall REAL NOT NULL, records TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_series ON samples (key_id, rank, seq);
CREATE TABLE IF NOT EXISTS histograms (
  seq INTEGER PRIMARY KEY, key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  wall REAL NOT NULL, data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS histograms_series ON histograms (key_id, rank, seq);
CREATE TABLE IF NOT EXISTS config (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS alerts (
  seq INTEGER PRIMARY KEY, alert_id TEXT NOT NULL, rule TEXT NOT NULL, state TEXT NOT NULL,
  level TEXT NOT NULL, step INTEGER, wall REAL NOT NULL, event TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rank_lists (
  id INTEGER PRIMARY KEY,
  ranks TEXT NOT NULL -- JSON: [[rank, rankName, host], ...], the order of rank_timing's blobs
);
CREATE TABLE IF NOT EXISTS rank_timing (
  step INTEGER PRIMARY KEY, wall REAL NOT NULL, list_id INTEGER NOT NULL,
  report TEXT NOT NULL, -- the flush's straggler report (JSON); kept before the blobs so reading it does not read them
  step_ms BLOB NOT NULL, lateness_ms BLOB NOT NULL, wait_ms BLOB NOT NULL -- float32 per rank, NaN where none
);
`;

/** Columns added to `ranks` by schema version 2, for a version-1 file opened for writing. */
export const RANKS_V2_COLUMNS = ["role TEXT", "thread INTEGER", "host TEXT"] as const;

/** The store file of a run directory. */
export function storePath(runDir: string): string {
  return join(runDir, STORE_FILE);
}

/** True for SQLite's "another connection holds the lock" errors, which are worth retrying. */
export function isBusyError(error: unknown): boolean {
  const code = errorCode(error);
  return code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED");
}

/**
 * Run `fn`, retrying while SQLite reports busy (beyond its own busy timeout: a WAL snapshot that
 * went stale, a lock held through a checkpoint). Backs off (the one retry helper, jittered) up to
 * `attempts` times, then throws.
 */
export function withBusyRetry<T>(fn: () => T, attempts = 20): T {
  return retrySync(fn, { attempts, initialMs: 10, maxMs: 200, shouldRetry: isBusyError });
}
