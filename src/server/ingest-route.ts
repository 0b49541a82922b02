/**
 * The ingest API: `POST /api/ingest/v1/batch` (a gzipped batch, `src/sync/wire.ts`) and
 * `GET /api/ingest/v1/state?run=` (how far the server has each series, records and file of a run,
 * where a sync resumes from). The body is read with a byte limit before anything is parsed, and
 * inflated with a limit on its output, so an oversized or "zip bomb" batch costs the server only
 * its limit; a malformed one is a 400 saying what was wrong; nothing of a refused batch is stored.
 */
import type { IncomingMessage } from "node:http";
import { promisify } from "node:util";
import { gunzip } from "node:zlib";
import type pg from "pg";
import { WireError, checkRunId, decodeBatch, type RefusedPart } from "../sync/wire.js";
import { HttpError } from "../ui/security.js";
import { inTransaction, sqlState } from "./db.js";
import { ConflictError, applyBatch, type IngestResult } from "./ingest.js";
import type { ServerMetrics } from "./metrics.js";

const gunzipAsync = promisify(gunzip);

/** Limits of one ingest request. */
export interface IngestLimits {
  /** Bytes of the (compressed) body at most. */
  readonly maxBodyBytes: number;
  /** Bytes of the inflated batch at most. */
  readonly maxBatchBytes: number;
}

export const DEFAULT_INGEST_LIMITS: IngestLimits = { maxBodyBytes: 32 * 1024 * 1024, maxBatchBytes: 128 * 1024 * 1024 };

/** The request's body, refused with a 413 past `max` bytes (by Content-Length at once, else as it arrives). */
async function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (Number.isFinite(declared) && declared > max)
    throw new HttpError(
      413,
      `the body is ${declared} bytes; this server takes at most ${max} per request (split the batch)`,
    );
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += b.length;
    if (size > max) {
      req.resume();
      throw new HttpError(
        413,
        `the body is over ${max} bytes; this server takes at most ${max} per request (split the batch)`,
      );
    }
    parts.push(b);
  }
  return Buffer.concat(parts);
}

/** Inflate a gzipped body with a limit on what it inflates to. */
async function inflate(body: Buffer, req: IncomingMessage, limits: IngestLimits): Promise<Buffer> {
  const encoding = String(req.headers["content-encoding"] ?? "identity").toLowerCase();
  if (encoding === "identity") {
    if (body.length > limits.maxBatchBytes) throw new HttpError(413, `the batch is over ${limits.maxBatchBytes} bytes`);
    return body;
  }
  if (encoding !== "gzip")
    throw new HttpError(415, `Content-Encoding must be gzip or identity, got ${JSON.stringify(encoding.slice(0, 40))}`);
  try {
    return await gunzipAsync(body, { maxOutputLength: limits.maxBatchBytes });
  } catch (error) {
    if (
      error instanceof RangeError ||
      (error instanceof Error && "code" in error && error.code === "ERR_BUFFER_TOO_LARGE")
    ) {
      throw new HttpError(413, `the batch inflates to more than ${limits.maxBatchBytes} bytes`);
    }
    throw new HttpError(400, "the body is not valid gzip");
  }
}

/** Read, check and apply one batch for a project. */
export async function ingestBatch(
  req: IncomingMessage,
  pool: pg.Pool,
  projectId: number,
  limits: IngestLimits,
  metrics: ServerMetrics,
): Promise<IngestResult & { refused: readonly RefusedPart[] }> {
  const body = await readBody(req, limits.maxBodyBytes);
  metrics.bodyBytes.inc(body.length);
  const raw = await inflate(body, req, limits);
  let batch;
  try {
    batch = decodeBatch(raw);
  } catch (error) {
    if (error instanceof WireError) throw new HttpError(400, `malformed batch: ${error.message}`);
    throw error;
  }
  // Parts holding a string past the limits were left out; the rest lands, and the answer names them.
  const refused = batch.refused ?? [];
  if (refused.length > 0) metrics.rejected.inc({ reason: "string" }, refused.length);
  const started = performance.now();
  let result: IngestResult;
  try {
    result = await inTransaction(pool, (client) => applyBatch(client, projectId, batch));
  } catch (error) {
    if (error instanceof ConflictError)
      throw new HttpError(409, `${error.message}; read GET /api/ingest/v1/state and continue from there`);
    // Two first batches of one new run racing: the loser retries and finds the run.
    if (sqlState(error) === "23505" || sqlState(error) === "40P01")
      throw new HttpError(503, "a concurrent batch of this run won a race; send again");
    throw error;
  }
  metrics.applySeconds.observe((performance.now() - started) / 1000);
  metrics.batches.inc();
  metrics.points.inc(result.points);
  metrics.records.inc(result.records);
  metrics.fileBytes.inc(result.fileBytes);
  const updatedAt = batch.header.meta?.updatedAt;
  if (updatedAt !== undefined && updatedAt !== null)
    metrics.syncLag.observe(Math.max(0, (Date.now() - updatedAt) / 1000));
  return { ...result, refused };
}

/** What the server has of a run: where each series, the records and each file continue from. */
interface RunState {
  readonly exists: boolean;
  readonly resumeStep: number;
  /** `metaHash` of the metadata last applied (null: none yet). */
  readonly metaHash: string | null;
  readonly series: { kind: string; key: string; rank: number; cursor: number | null; n: number }[];
  /** The store's sequence number of the last sample, histogram and alert event applied, by kind (`sample`, `histogram`, `alert`). */
  readonly records: Record<string, number>;
  readonly files: Record<string, number>;
}

/** `GET /api/ingest/v1/state?run=`. */
export async function runState(pool: pg.Pool, projectId: number, run: string | null): Promise<RunState> {
  if (run === null || run === "") throw new HttpError(400, "missing the run parameter (experiment/trial)");
  try {
    checkRunId(run);
  } catch (error) {
    if (error instanceof WireError) throw new HttpError(400, error.message);
    throw error;
  }
  const found = await pool.query<{ id: number; resume_step: number; meta_hash: string | null }>(
    "SELECT id, resume_step, meta_hash FROM runs WHERE project_id = $1 AND run_key = $2",
    [projectId, run],
  );
  const row = found.rows[0];
  if (row === undefined) return { exists: false, resumeStep: 0, metaHash: null, series: [], records: {}, files: {} };
  const [series, cursors] = await Promise.all([
    pool.query<{ kind: string; key: string; rank: number; src_cursor: number | null; n: number }>(
      "SELECT k.kind, k.key, s.rank, s.src_cursor, s.n FROM keys k JOIN series s ON s.key_id = k.id WHERE k.run_id = $1 AND k.kind IN ('scalar', 'stream', 'system')",
      [row.id],
    ),
    pool.query<{ name: string; value: number }>("SELECT name, value FROM run_cursors WHERE run_id = $1", [row.id]),
  ]);
  const records: Record<string, number> = {};
  const files: Record<string, number> = {};
  for (const c of cursors.rows) {
    if (c.name.startsWith("file:")) files[c.name.slice(5)] = c.value;
    else records[c.name] = c.value;
  }
  return {
    exists: true,
    resumeStep: row.resume_step,
    metaHash: row.meta_hash,
    series: series.rows.map((s) => ({ kind: s.kind, key: s.key, rank: s.rank, cursor: s.src_cursor, n: s.n })),
    records,
    files,
  };
}
