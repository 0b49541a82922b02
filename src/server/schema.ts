/**
 * The team server's PostgreSQL schema, as numbered migrations applied in order.
 *
 * `migrate` runs in one transaction under a transaction-scoped advisory lock, so two servers
 * starting at once against one database apply each migration exactly once (the second waits, then
 * finds it applied). A server refuses to start on a database migrated by a newer version.
 *
 * Layout (docs/server.md describes it):
 * - `projects`, `tokens` (only a SHA-256 of each token is kept), `runs` (one row per run of a
 *   project, named `experiment/trial`; status, times, labels, parameters, config files).
 * - `keys` per run and kind; `series` per (key, rank): the sync's cursor (how far the job's store
 *   has been applied), the server's own arrival numbering for streams and system metrics, and the
 *   last value.
 * - `chunks`: a series' points packed as in the local store — up to `CHUNK_POINTS` steps, wall
 *   times and values as little-endian float64 blobs with min/max/last columns and pre-aggregated
 *   blocks — so a million-point series is ~500 rows and a downsampled read folds summaries, never
 *   one row per point (MLflow's 11 GiB primary-key index at 100 M rows).
 * - `records`: samples and histograms (JSON) by the job's sequence number; `run_cursors`: how far
 *   a run's records and files have been applied; `run_files`: text logs and trace files, appended
 *   by byte offset.
 * - Migration 5: `rank_timing`, `rank_timing_lists`: per-rank step time, lateness and wait per
 *   flush, as the job's store keeps them (the Ranks view).
 * - Migration 3: `alerts`: a run's alert events (docs/alerts.md) by the job's store sequence
 *   number, with the columns to find them by and the whole event as JSON, as the store keeps them.
 */
import type pg from "pg";

/** One migration: applied once, in order, never edited after release. */
interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** Advisory lock key of migrations ("rankscope" in ASCII, truncated to 63 bits). */
const MIGRATION_LOCK_KEY = "7020098440451383151";

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "projects, tokens, runs, series in chunks, records, files",
    sql: `
CREATE TABLE projects (
  id bigserial PRIMARY KEY, name text NOT NULL UNIQUE, created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE tokens (
  id bigserial PRIMARY KEY, project_id bigint NOT NULL REFERENCES projects ON DELETE CASCADE,
  scope text NOT NULL CHECK (scope IN ('read', 'write')), hash bytea NOT NULL UNIQUE, label text,
  created_at timestamptz NOT NULL DEFAULT now(), revoked_at timestamptz
);
CREATE TABLE runs (
  id bigserial PRIMARY KEY, project_id bigint NOT NULL REFERENCES projects ON DELETE CASCADE,
  run_key text NOT NULL, experiment text NOT NULL, trial text NOT NULL,
  status text NOT NULL DEFAULT 'unknown', started_at double precision, ended_at double precision,
  updated_at double precision, resume_step double precision NOT NULL DEFAULT 0,
  tags text[] NOT NULL DEFAULT '{}', grp text, params jsonb NOT NULL DEFAULT '{}', hparams text NOT NULL DEFAULT '{}',
  rank_names jsonb NOT NULL DEFAULT '{}', config_yaml text, version_json text, meta_hash text,
  received_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, run_key)
);
CREATE INDEX runs_by_start ON runs (project_id, started_at DESC NULLS LAST, run_key);
CREATE INDEX runs_by_tags ON runs USING gin (tags);
CREATE INDEX runs_by_params ON runs USING gin (params jsonb_path_ops);
CREATE TABLE keys (
  id bigserial PRIMARY KEY, run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
  key text NOT NULL, kind text NOT NULL, reduce text, UNIQUE (run_id, kind, key)
);
CREATE TABLE series (
  key_id bigint NOT NULL REFERENCES keys ON DELETE CASCADE, rank integer NOT NULL,
  src_cursor double precision, next_pos bigint NOT NULL DEFAULT 0, n bigint NOT NULL DEFAULT 0,
  small_chunks integer NOT NULL DEFAULT 0, small_points integer NOT NULL DEFAULT 0,
  last_step double precision, last_value double precision,
  PRIMARY KEY (key_id, rank)
);
CREATE TABLE chunks (
  id bigserial PRIMARY KEY, key_id bigint NOT NULL REFERENCES keys ON DELETE CASCADE, rank integer NOT NULL,
  first_pos double precision NOT NULL, last_pos double precision NOT NULL,
  first_step double precision NOT NULL, last_step double precision NOT NULL, n integer NOT NULL,
  first_wall double precision NOT NULL, last_wall double precision NOT NULL,
  min double precision, min_step double precision, min_wall double precision,
  max double precision, max_step double precision, max_wall double precision,
  last double precision, nan_count integer NOT NULL,
  blocks bytea NOT NULL, steps bytea NOT NULL, walls bytea NOT NULL, vals bytea NOT NULL
);
CREATE INDEX chunks_by_series ON chunks (key_id, rank, first_pos);
-- Values are float64 noise to a compressor: storing them uncompressed saves pglz's CPU.
ALTER TABLE chunks ALTER COLUMN vals SET STORAGE EXTERNAL;
CREATE TABLE records (
  key_id bigint NOT NULL REFERENCES keys ON DELETE CASCADE, rank integer NOT NULL, src_seq bigint NOT NULL,
  step double precision NOT NULL, wall double precision NOT NULL, data text NOT NULL,
  PRIMARY KEY (key_id, rank, src_seq)
);
CREATE TABLE run_cursors (
  run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE, name text NOT NULL, value double precision NOT NULL,
  PRIMARY KEY (run_id, name)
);
CREATE TABLE run_files (
  run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE, path text NOT NULL, file_offset bigint NOT NULL,
  data bytea NOT NULL, received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, path, file_offset)
);
`,
  },
  {
    version: 2,
    name: "lost ranks of a run",
    sql: `ALTER TABLE runs ADD COLUMN lost_ranks jsonb NOT NULL DEFAULT '[]';`,
  },
  {
    version: 3,
    name: "alerts",
    sql: `
CREATE TABLE alerts (
  run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE, src_seq bigint NOT NULL,
  alert_id text NOT NULL, rule text NOT NULL, state text NOT NULL, level text NOT NULL,
  step double precision, wall double precision NOT NULL, event text NOT NULL,
  PRIMARY KEY (run_id, src_seq)
);
`,
  },
  {
    version: 4,
    name: "chunk blobs compressed with lz4 (pglz cost the server most of its ingest CPU)",
    // pglz compressing steps, walls and blocks took ~90 % of PostgreSQL's CPU in a batch's COPY;
    // lz4 stores them as small for a tenth of it. PostgreSQL 14+ built with lz4 (Debian's, the
    // official images) has it; elsewhere they are stored uncompressed (EXTERNAL), trading disk for
    // the same CPU saving. Only new values are affected: nothing is rewritten.
    sql: `
DO $$
BEGIN
  EXECUTE 'ALTER TABLE chunks ALTER COLUMN steps SET COMPRESSION lz4, ALTER COLUMN walls SET COMPRESSION lz4, ALTER COLUMN blocks SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
  ALTER TABLE chunks ALTER COLUMN steps SET STORAGE EXTERNAL, ALTER COLUMN walls SET STORAGE EXTERNAL, ALTER COLUMN blocks SET STORAGE EXTERNAL;
END
$$;
`,
  },
  {
    version: 5,
    name: "per-rank timings (the Ranks view)",
    // As the job's store keeps them (docs/stragglers.md): a flush's columns in the order of a rank
    // list, each list stored once per run.
    sql: `
CREATE TABLE rank_timing_lists (
  id bigserial PRIMARY KEY, run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE, ranks text NOT NULL
);
CREATE UNIQUE INDEX rank_timing_lists_ranks ON rank_timing_lists (run_id, md5(ranks));
CREATE TABLE rank_timing (
  run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE, step double precision NOT NULL,
  wall double precision NOT NULL, list_id bigint NOT NULL REFERENCES rank_timing_lists ON DELETE CASCADE,
  report text NOT NULL, step_ms real[] NOT NULL, lateness_ms real[] NOT NULL, wait_ms real[] NOT NULL,
  PRIMARY KEY (run_id, step)
);
`,
  },
  {
    version: 6,
    name: "tokens expire",
    sql: `ALTER TABLE tokens ADD COLUMN expires_at timestamptz;`,
  },
  {
    version: 7,
    name: "token formats (1: no check digits; 2: with them)",
    // Tokens made before have no check digits (format 1); the server looks those up only while one
    // is still valid.
    sql: `ALTER TABLE tokens ADD COLUMN format smallint NOT NULL DEFAULT 1;`,
  },
];

/** The schema version this code needs. */
export const SCHEMA_VERSION = MIGRATIONS.reduce((v, m) => Math.max(v, m.version), 0);

/**
 * Bring the database to `SCHEMA_VERSION`: each missing migration in order, all in one transaction
 * under the migration lock. Returns the versions applied (empty when the schema was current).
 */
export async function migrate(pool: pg.Pool, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [MIGRATION_LOCK_KEY]);
    await client.query(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    const done = await client.query<{ version: number }>("SELECT version FROM schema_migrations ORDER BY version");
    const have = new Set(done.rows.map((r) => r.version));
    const newest = Math.max(0, ...have);
    const known = Math.max(0, ...migrations.map((m) => m.version));
    if (newest > known) {
      throw new Error(
        `the database's schema is version ${newest}, newer than this rankscope server's ${known}; upgrade the server (docs/server.md, "Upgrades")`,
      );
    }
    const applied: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (have.has(m.version)) continue;
      await client.query(m.sql);
      await client.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [m.version, m.name]);
      applied.push(m.version);
    }
    await client.query("COMMIT");
    return applied;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
