/**
 * Applying an ingest batch (`src/sync/wire.ts`) to PostgreSQL: one transaction per batch, a few
 * set-based statements whatever the number of series, every value a bound parameter.
 *
 * Exactly once: the run row is locked for the batch (one run's batches apply one at a time, from
 * however many servers), each series row holds how far the job's store has been applied
 * (`src_cursor`), and only points past it are stored; records are keyed by the store's sequence
 * numbers, files by byte offset. A batch that continues from a cursor the server has not reached
 * (a gap) is refused with a `ConflictError`, and the sync re-reads the server's state.
 *
 * A batch's series points are stored by `ingest-series.ts`.
 */
import type pg from "pg";
import { metaHash, type Batch, type RunMeta } from "../sync/wire.js";
import { parseAlertEvent } from "../core/alert-json.js";
import { ConflictError } from "./ingest-conflict.js";
import { type SeriesPlan, newPoints, replacePoints, seriesRows, storeSeries } from "./ingest-series.js";
import { truncateRun } from "./truncate.js";

/** What applying a batch did. */
export interface IngestResult {
  readonly runId: number;
  /** Points stored (points already applied are not counted). */
  readonly points: number;
  /** Samples, histograms and alert events stored (those already applied are not counted). */
  readonly records: number;
  readonly fileBytes: number;
}

/** The run's row, created when new, locked for the transaction. */
async function lockRun(
  client: pg.ClientBase,
  projectId: number,
  run: string,
  meta: RunMeta | undefined,
): Promise<{ id: number; resume_step: number }> {
  const parts = run.split("/");
  const experiment = meta?.experiment ?? (parts.length > 1 ? parts.slice(0, -1).join("/") : "");
  const trial = meta?.trial ?? parts[parts.length - 1] ?? run;
  const result = await client.query<{ id: number; resume_step: number }>(
    `INSERT INTO runs (project_id, run_key, experiment, trial) VALUES ($1, $2, $3, $4)
     ON CONFLICT (project_id, run_key) DO UPDATE SET run_key = EXCLUDED.run_key RETURNING id, resume_step`,
    [projectId, run, experiment, trial],
  );
  const row = result.rows[0];
  if (row === undefined) throw new Error(`the run ${run} vanished while it was being locked`);
  return row;
}

async function applyMeta(client: pg.ClientBase, runId: number, meta: RunMeta): Promise<void> {
  await client.query(
    `UPDATE runs SET experiment = $2, trial = $3, status = $4, started_at = $5, ended_at = $6, updated_at = $7, resume_step = $8,
       tags = $9, grp = $10, params = $11, hparams = $12, rank_names = $13, config_yaml = $14, version_json = $15, meta_hash = $16, lost_ranks = $17, received_at = now()
     WHERE id = $1`,
    [
      runId,
      meta.experiment,
      meta.trial,
      meta.status,
      meta.startedAt,
      meta.endedAt,
      meta.updatedAt,
      meta.resumeStep,
      meta.tags,
      meta.group,
      JSON.stringify(meta.params),
      meta.hparamsJson,
      JSON.stringify(meta.rankNames),
      meta.configYaml,
      meta.versionJson,
      metaHash(meta),
      JSON.stringify(meta.lostRanks),
    ],
  );
}

/** Key ids of (kind, key) pairs of a run, registering new ones. */
async function keyIds(
  client: pg.ClientBase,
  runId: number,
  wanted: readonly { kind: string; key: string; reduce: string | null }[],
): Promise<Map<string, number>> {
  const unique = new Map<string, { kind: string; key: string; reduce: string | null }>();
  for (const w of wanted) if (!unique.has(`${w.kind}\0${w.key}`)) unique.set(`${w.kind}\0${w.key}`, w);
  const ids = new Map<string, number>();
  if (unique.size === 0) return ids;
  const list = [...unique.values()];
  const result = await client.query<{ id: number; kind: string; key: string }>(
    `INSERT INTO keys (run_id, kind, key, reduce) SELECT $1, u.kind, u.key, u.reduce FROM unnest($2::text[], $3::text[], $4::text[]) AS u(kind, key, reduce)
     ON CONFLICT (run_id, kind, key) DO UPDATE SET reduce = COALESCE(keys.reduce, EXCLUDED.reduce) RETURNING id, kind, key`,
    [runId, list.map((w) => w.kind), list.map((w) => w.key), list.map((w) => w.reduce)],
  );
  for (const r of result.rows) ids.set(`${r.kind}\0${r.key}`, r.id);
  return ids;
}

async function storeRecords(
  client: pg.ClientBase,
  runId: number,
  batch: Batch,
  ids: Map<string, number>,
): Promise<number> {
  const records = batch.header.records;
  if (records.length === 0) return 0;
  const keyOf = (kind: string, key: string): number => ids.get(`${kind}\0${key}`) ?? -1;
  const result = await client.query(
    `INSERT INTO records (key_id, rank, src_seq, step, wall, data) SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::float8[], $5::float8[], $6::text[])
     ON CONFLICT DO NOTHING`,
    [
      records.map((r) => keyOf(r.kind, r.key)),
      records.map((r) => r.rank),
      records.map((r) => r.seq),
      records.map((r) => r.step),
      records.map((r) => r.wall),
      records.map((r) => r.data),
    ],
  );
  for (const kind of ["sample", "histogram"] as const) {
    const seqs = records.filter((r) => r.kind === kind).map((r) => r.seq);
    if (seqs.length === 0) continue;
    await client.query(
      `INSERT INTO run_cursors (run_id, name, value) VALUES ($1, $2, $3) ON CONFLICT (run_id, name) DO UPDATE SET value = GREATEST(run_cursors.value, EXCLUDED.value)`,
      [runId, kind, Math.max(...seqs)],
    );
  }
  return result.rowCount ?? 0;
}

/**
 * Alert events by the store's sequence number (one sent twice is kept once), and the run's `alert`
 * cursor. The columns are taken from the event the wire check parsed, never from the batch beside it.
 */
async function storeAlerts(client: pg.ClientBase, runId: number, batch: Batch): Promise<number> {
  const alerts = batch.header.alerts ?? [];
  if (alerts.length === 0) return 0;
  const events = alerts.map((a) => {
    const event = parseAlertEvent(a.event);
    if (typeof event === "string")
      throw new Error(`alert ${a.seq} passed the wire check but is not an event: ${event}`);
    return event;
  });
  const result = await client.query(
    `INSERT INTO alerts (run_id, src_seq, alert_id, rule, state, level, step, wall, event)
     SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::float8[], $9::text[]) ON CONFLICT DO NOTHING`,
    [
      runId,
      alerts.map((a) => a.seq),
      events.map((e) => e.id),
      events.map((e) => e.rule),
      events.map((e) => e.state),
      events.map((e) => e.level),
      events.map((e) => e.step),
      events.map((e) => e.at),
      alerts.map((a) => a.event),
    ],
  );
  await client.query(
    `INSERT INTO run_cursors (run_id, name, value) VALUES ($1, 'alert', $2) ON CONFLICT (run_id, name) DO UPDATE SET value = GREATEST(run_cursors.value, EXCLUDED.value)`,
    [runId, Math.max(...alerts.map((a) => a.seq))],
  );
  return result.rowCount ?? 0;
}

/**
 * Per-rank timings: the window's rank list once per run (by its text), then one row per flush,
 * replacing a flush sent again (the store replaces it too), and the run's `timing` cursor.
 */
async function storeTimings(client: pg.ClientBase, runId: number, batch: Batch): Promise<number> {
  const t = batch.header.timings;
  if (t === undefined || t.steps.length === 0) return 0;
  const list = await client.query<{ id: string }>(
    `INSERT INTO rank_timing_lists (run_id, ranks) VALUES ($1, $2) ON CONFLICT (run_id, md5(ranks)) DO UPDATE SET ranks = EXCLUDED.ranks RETURNING id`,
    [runId, JSON.stringify(t.ranks)],
  );
  const listId = list.rows[0]?.id;
  if (listId === undefined) throw new Error("the rank list was not stored");
  const cols = t.steps.length;
  const column = (matrix: ReadonlyArray<number | null>, col: number): Array<number | null> =>
    t.ranks.map((_r, row) => matrix[row * cols + col] ?? null);
  // Every flush of the window in one statement (steps increase strictly, so no row is hit twice).
  const rows: string[] = [];
  const values: unknown[] = [runId, listId];
  for (let col = 0; col < cols; col++) {
    const at = values.length;
    rows.push(
      `($1, $${at + 1}, $${at + 2}, $2, $${at + 3}, $${at + 4}::real[], $${at + 5}::real[], $${at + 6}::real[])`,
    );
    values.push(
      t.steps[col],
      t.walls[col],
      t.reports[col],
      column(t.stepMs, col),
      column(t.latenessMs, col),
      column(t.waitMs, col),
    );
  }
  await client.query(
    `INSERT INTO rank_timing (run_id, step, wall, list_id, report, step_ms, lateness_ms, wait_ms) VALUES ${rows.join(", ")}
     ON CONFLICT (run_id, step) DO UPDATE SET wall = EXCLUDED.wall, list_id = EXCLUDED.list_id, report = EXCLUDED.report,
       step_ms = EXCLUDED.step_ms, lateness_ms = EXCLUDED.lateness_ms, wait_ms = EXCLUDED.wait_ms`,
    values,
  );
  await client.query(
    `INSERT INTO run_cursors (run_id, name, value) VALUES ($1, 'timing', $2) ON CONFLICT (run_id, name) DO UPDATE SET value = GREATEST(run_cursors.value, EXCLUDED.value)`,
    [runId, t.steps[cols - 1]],
  );
  return cols;
}

async function storeFiles(client: pg.ClientBase, runId: number, batch: Batch): Promise<number> {
  let stored = 0;
  for (const [i, f] of batch.header.files.entries()) {
    const bytes = batch.fileBytes[i] ?? Buffer.alloc(0);
    const name = `file:${f.path}`;
    const result = await client.query<{ value: number }>(
      "SELECT value FROM run_cursors WHERE run_id = $1 AND name = $2 FOR UPDATE",
      [runId, name],
    );
    const size = result.rows[0]?.value ?? 0;
    if (f.offset > size)
      throw new ConflictError(`file ${f.path} continues from byte ${f.offset}, but the server has ${size} bytes of it`);
    const skip = size - f.offset;
    if (skip >= bytes.length) continue;
    await client.query("INSERT INTO run_files (run_id, path, file_offset, data) VALUES ($1, $2, $3, $4)", [
      runId,
      f.path,
      size,
      bytes.subarray(skip),
    ]);
    await client.query(
      "INSERT INTO run_cursors (run_id, name, value) VALUES ($1, $2, $3) ON CONFLICT (run_id, name) DO UPDATE SET value = EXCLUDED.value",
      [runId, name, f.offset + bytes.length],
    );
    stored += bytes.length - skip;
  }
  return stored;
}

/** Apply a checked batch for a project, in the client's open transaction. */
export async function applyBatch(client: pg.ClientBase, projectId: number, batch: Batch): Promise<IngestResult> {
  const { header } = batch;
  const run = await lockRun(client, projectId, header.run, header.meta);
  if (header.meta !== undefined) {
    if (header.meta.resumeStep !== run.resume_step && header.meta.resumeStep > 0)
      await truncateRun(client, run.id, header.meta.resumeStep);
    await applyMeta(client, run.id, header.meta);
  }
  const ids = await keyIds(client, run.id, [
    ...header.series.map((s) => ({ kind: s.kind, key: s.key, reduce: s.reduce })),
    ...header.records.map((r) => ({ kind: r.kind, key: r.key, reduce: r.kind })),
  ]);
  const pairs = new Map<string, [number, number]>();
  const idOf = (kind: string, key: string): number => {
    const id = ids.get(`${kind}\0${key}`);
    if (id === undefined)
      throw new Error(`key ${JSON.stringify(key)} (${kind}) was not registered in its own transaction`);
    return id;
  };
  for (const s of header.series) pairs.set(`${idOf(s.kind, s.key)}:${s.rank}`, [idOf(s.kind, s.key), s.rank]);
  for (const r of header.records) pairs.set(`${idOf(r.kind, r.key)}:${r.rank}`, [idOf(r.kind, r.key), r.rank]);
  const rows = await seriesRows(client, [...pairs.values()]);
  const plans: SeriesPlan[] = [];
  const replacements: SeriesPlan[] = [];
  const seen = new Set<string>();
  for (const [i, s] of header.series.entries()) {
    const k = `${idOf(s.kind, s.key)}:${s.rank}`;
    const once = `${k}:${s.replace === true ? "replace" : "append"}`;
    if (seen.has(once))
      throw new ConflictError(
        `series ${JSON.stringify(s.key.slice(0, 80))} rank ${s.rank} appears twice in one batch; send one segment per series`,
      );
    seen.add(once);
    const row = rows.get(k);
    const cols = batch.columns[i];
    if (row === undefined || cols === undefined) throw new Error(`series ${k} has no row after being registered`);
    if (s.replace === true) {
      newPoints(s, cols, row);
      replacements.push({ row, segment: s, points: cols });
      continue;
    }
    const points = newPoints(s, cols, row);
    if (points !== null && points.steps.length > 0) plans.push({ row, segment: s, points });
  }
  await replacePoints(client, replacements);
  const points = await storeSeries(client, plans);
  const records =
    (await storeRecords(client, run.id, batch, ids)) +
    (await storeAlerts(client, run.id, batch)) +
    (await storeTimings(client, run.id, batch));
  const fileBytes = await storeFiles(client, run.id, batch);
  return { runId: run.id, points, records, fileBytes };
}
