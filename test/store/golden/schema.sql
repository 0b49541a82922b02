-- metrics.db, schema version 2
CREATE TABLE alerts (
  seq INTEGER PRIMARY KEY, alert_id TEXT NOT NULL, rule TEXT NOT NULL, state TEXT NOT NULL,
  level TEXT NOT NULL, step INTEGER, wall REAL NOT NULL, event TEXT NOT NULL
);
CREATE TABLE chunks (
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
CREATE TABLE config (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE histograms (
  seq INTEGER PRIMARY KEY, key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  wall REAL NOT NULL, data TEXT NOT NULL
);
CREATE TABLE keys (
  id INTEGER PRIMARY KEY, key TEXT NOT NULL, kind TEXT NOT NULL, reduce TEXT, UNIQUE (key, kind)
);
CREATE TABLE lost_ranks (
  id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, rank_name TEXT NOT NULL, step INTEGER, wall REAL NOT NULL,
  reason TEXT NOT NULL, back_step INTEGER, back_wall REAL
);
CREATE TABLE points (
  key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, wall REAL NOT NULL,
  value REAL, -- NULL stands for NaN (SQLite cannot store NaN); ±Infinity are stored as themselves
  PRIMARY KEY (key_id, rank, step)
) WITHOUT ROWID;
CREATE TABLE rank_lists (
  id INTEGER PRIMARY KEY,
  ranks TEXT NOT NULL -- JSON: [[rank, rankName, host], ...], the order of rank_timing's blobs
);
CREATE TABLE rank_timing (
  step INTEGER PRIMARY KEY, wall REAL NOT NULL, list_id INTEGER NOT NULL,
  report TEXT NOT NULL, -- the flush's straggler report (JSON); kept before the blobs so reading it does not read them
  step_ms BLOB NOT NULL, lateness_ms BLOB NOT NULL, wait_ms BLOB NOT NULL -- float32 per rank, NaN where none
);
CREATE TABLE ranks (rank INTEGER PRIMARY KEY, rank_name TEXT, role TEXT, thread INTEGER, host TEXT);
CREATE TABLE run (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  experiment TEXT, trial TEXT, status TEXT NOT NULL,
  started_at REAL, ended_at REAL, updated_at REAL, resume_step INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE samples (
  seq INTEGER PRIMARY KEY, key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  wall REAL NOT NULL, records TEXT NOT NULL
);
CREATE TABLE series (
  key_id INTEGER NOT NULL, rank INTEGER NOT NULL, PRIMARY KEY (key_id, rank)
) WITHOUT ROWID;
CREATE TABLE stream_points (
  seq INTEGER PRIMARY KEY, key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  wall REAL NOT NULL, value REAL
);
CREATE TABLE writers (
  id TEXT PRIMARY KEY, role TEXT NOT NULL, rank INTEGER NOT NULL, rank_name TEXT,
  pid INTEGER, started_at REAL, ended_at REAL, status TEXT NOT NULL, host TEXT, heartbeat_at REAL
);
CREATE INDEX chunks_series ON chunks (key_id, rank, first_step);
CREATE INDEX chunks_stream ON chunks (key_id, rank, first_seq) WHERE first_seq IS NOT NULL;
CREATE INDEX histograms_series ON histograms (key_id, rank, seq);
CREATE INDEX samples_series ON samples (key_id, rank, seq);
CREATE INDEX stream_points_series ON stream_points (key_id, rank, seq);
