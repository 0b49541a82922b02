-- metrics.db, schema version 1
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
CREATE TABLE points (
  key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, wall REAL NOT NULL,
  value REAL, -- NULL stands for NaN (SQLite cannot store NaN); ±Infinity are stored as themselves
  PRIMARY KEY (key_id, rank, step)
) WITHOUT ROWID;
CREATE TABLE ranks (rank INTEGER PRIMARY KEY, rank_name TEXT);
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
  pid INTEGER, started_at REAL, ended_at REAL, status TEXT NOT NULL
);
CREATE INDEX chunks_series ON chunks (key_id, rank, first_step);
CREATE INDEX chunks_stream ON chunks (key_id, rank, first_seq) WHERE first_seq IS NOT NULL;
CREATE INDEX histograms_series ON histograms (key_id, rank, seq);
CREATE INDEX samples_series ON samples (key_id, rank, seq);
CREATE INDEX stream_points_series ON stream_points (key_id, rank, seq);
