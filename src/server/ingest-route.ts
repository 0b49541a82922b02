/**
 * The ingest API: `POST /api/ingest/v1/batch` (a gzipped batch, `src/sync/wire.ts`) and
 * `GET /api/ingest/v1/state?run=` (how far the server has each series, records and file of a run,
 * where a sync resumes from). The body is inflated as it arrives (never held compressed), with a
 * limit on what arrives, on what one request inflates to, and on what all requests hold inflated
 * together (`InflateBudget`: past it a 503 with `Retry-After`), so an oversized batch or a "zip
 * bomb" — one or many at once — costs the server only its limits; a body that is not a batch is
 * refused at its first bytes. A malformed batch is a 400 saying what was wrong; nothing of a
 * refused batch is stored.
 */
import type { IncomingMessage } from "node:http";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { pipeline } from "node:stream";
import { createGunzip, type Gunzip } from "node:zlib";
import type pg from "pg";
import { WireError, checkRunId, decodeBatch, type RefusedPart } from "../sync/wire.js";
import { HttpError } from "../ui/security.js";
import { inTransaction, sqlState } from "./db.js";
import { ConflictError } from "./ingest-conflict.js";
import { applyBatch, type IngestResult } from "./ingest.js";
import type { ServerMetrics } from "./metrics.js";

/** Limits of ingest requests. */
export interface IngestLimits {
  /** Bytes of the (compressed) body at most. */
  readonly maxBodyBytes: number;
  /** Bytes of the inflated batch at most. */
  readonly maxBatchBytes: number;
  /** Bytes inflated and held by all ingest requests together at most (default 256 MiB); past it: 503. */
  readonly maxInflatingBytes?: number;
}

export const DEFAULT_INGEST_LIMITS = {
  maxBodyBytes: 32 * 1024 * 1024,
  maxBatchBytes: 128 * 1024 * 1024,
  maxInflatingBytes: 256 * 1024 * 1024,
} as const satisfies IngestLimits;

/** Seconds a request refused for the inflate budget is told to wait. */
const BUSY_RETRY_S = 2;

/** Bytes given back after which an idle budget asks for a garbage collection. */
const COLLECT_AFTER_BYTES = 64 * 1024 * 1024;

/**
 * V8's `gc()`, exposed at run time: inflated batches are large buffers only a collection frees,
 * and nothing else may allocate enough to start one after a burst, so memory would stay taken.
 */
function collector(): (() => void) | null {
  try {
    setFlagsFromString("--expose-gc");
    const gc: unknown = runInNewContext("gc");
    return typeof gc === "function" ? () => void gc() : null;
  } catch {
    return null;
  }
}

/**
 * Inflated bytes held by all of a server's ingest requests, against one bound. Once the requests
 * holding them are done and much was given back, it asks for a collection (at most once a second;
 * bytes given back inside that second are collected when it ends) so the memory goes back to the
 * system.
 */
export class InflateBudget {
  used = 0;
  private given = 0;
  private collecting: NodeJS.Timeout | null = null;

  /** `gc`: what collects (V8's own when it can be exposed; a test counts its calls). */
  constructor(
    readonly max: number,
    private readonly gc: (() => void) | null = collector(),
  ) {}

  /** Hold `n` more bytes; false (nothing held) when that would pass the bound. */
  take(n: number): boolean {
    if (this.used + n > this.max) return false;
    this.used += n;
    return true;
  }

  give(n: number): void {
    this.used -= n;
    this.given += n;
    this.collectIfDue();
  }

  /**
   * A collection once nothing is held and enough was given back; inside the second after one, the
   * next waits for that second to end (a burst's last bytes, given back then, are not left uncollected).
   */
  private collectIfDue(): void {
    if (this.used > 0 || this.given < COLLECT_AFTER_BYTES || this.collecting !== null || this.gc === null) return;
    const gc = this.gc;
    this.collecting = setTimeout(() => {
      this.given = 0;
      gc();
      this.collecting = setTimeout(() => {
        this.collecting = null;
        this.collectIfDue();
      }, 1000).unref();
    }, 0).unref();
  }
}

/** The server is inflating all it may at once: a 503 with `Retry-After`. */
export class InflateBusy extends HttpError {
  readonly retryAfterS = BUSY_RETRY_S;

  constructor(max: number) {
    super(503, `this server is inflating ${max} bytes of batches at once, its bound; send again in ${BUSY_RETRY_S} s`);
  }
}

/**
 * Capacity of the buffer a batch of several pieces is gathered into: above glibc's largest mmap
 * threshold (32 MiB), so it is a mapping of its own that goes back to the system once collected,
 * and its pages are resident only as they are written. Held as zlib's 1 MiB pieces instead, a
 * burst left the freed pieces in malloc's arenas and the server's memory did not come back.
 */
const GATHER_BYTES = 64 * 1024 * 1024;

/** One request's inflated bytes as they arrive, against its limits and the server's budget. */
class Inflating {
  /** The first piece, kept as it is while it is the only one (most batches). */
  private first: Buffer | null = null;
  /** The pieces so far, gathered once there are several. */
  private gathered: Buffer | null = null;
  /** Bytes held of the budget. */
  held = 0;
  received = 0;

  constructor(
    private readonly limits: IngestLimits,
    private readonly budget: InflateBudget,
  ) {}

  get maxBodyBytes(): number {
    return this.limits.maxBodyBytes;
  }

  /** Keep `chunk` of the inflated batch; throws the refusal once a limit is passed. */
  add(chunk: Buffer): void {
    if (this.held + chunk.length > this.limits.maxBatchBytes)
      throw new HttpError(413, `the batch inflates to more than ${this.limits.maxBatchBytes} bytes`);
    // Refused at its first bytes when it is not a batch at all.
    if (this.held === 0 && chunk.length >= 4 && chunk.readUInt32LE(0) !== BATCH_MAGIC)
      throw new HttpError(400, "malformed batch: not a rankscope ingest batch (it does not start with RSB1)");
    if (!this.budget.take(chunk.length)) throw new InflateBusy(this.budget.max);
    if (this.held === 0) this.first = chunk;
    else this.gather(chunk);
    this.held += chunk.length;
  }

  /** Copy `chunk` after the bytes held, into a buffer grown (once at most, to the batch limit) as needed. */
  private gather(chunk: Buffer): void {
    const need = this.held + chunk.length;
    let into = this.gathered;
    if (into === null || need > into.length) {
      const capacity = Math.max(GATHER_BYTES, 2 * (into?.length ?? 0), need);
      const grown = Buffer.allocUnsafe(Math.min(this.limits.maxBatchBytes, capacity));
      (into ?? this.first)?.copy(grown, 0, 0, this.held);
      this.first = null;
      this.gathered = into = grown;
    }
    chunk.copy(into, this.held);
  }

  /** Count a chunk of the body as it arrived; a 413 past the body limit. */
  arrived(n: number): void {
    this.received += n;
    if (this.received > this.limits.maxBodyBytes)
      throw new HttpError(
        413,
        `the body is over ${this.limits.maxBodyBytes} bytes; this server takes at most ${this.limits.maxBodyBytes} per request (split the batch)`,
      );
  }

  /** The inflated batch in one buffer (no copy: the pieces were gathered as they came). */
  joined(): Buffer {
    return this.first ?? this.gathered?.subarray(0, this.held) ?? Buffer.alloc(0);
  }

  release(): void {
    this.budget.give(this.held);
    this.held = 0;
    this.first = null;
    this.gathered = null;
  }
}

/** `RSB1` little-endian: a batch's first four bytes (`src/sync/wire.ts`). */
const BATCH_MAGIC = 0x31425352;

/** zlib's output pieces: large enough to be whole mappings the allocator hands back to the system. */
const INFLATE_CHUNK = 1024 * 1024;

/**
 * Read the body, inflating it as it arrives (gzip) or as it is (identity), into `into`. On a
 * refusal the rest of the body is drained, not kept.
 */
async function inflateBody(req: IncomingMessage, into: Inflating): Promise<Buffer> {
  const encoding = String(req.headers["content-encoding"] ?? "identity").toLowerCase();
  if (encoding !== "gzip" && encoding !== "identity")
    throw new HttpError(415, `Content-Encoding must be gzip or identity, got ${JSON.stringify(encoding.slice(0, 40))}`);
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (Number.isFinite(declared) && declared > into.maxBodyBytes) {
    req.resume();
    throw new HttpError(
      413,
      `the body is ${declared} bytes; this server takes at most ${into.maxBodyBytes} per request (split the batch)`,
    );
  }
  const gunzip: Gunzip | null = encoding === "gzip" ? createGunzip({ chunkSize: INFLATE_CHUNK }) : null;
  try {
    if (gunzip === null) {
      for await (const chunk of req) {
        const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
        into.arrived(b.length);
        into.add(b);
      }
    } else {
      req.on("data", (b: Buffer) => {
        try {
          into.arrived(b.length);
        } catch (error) {
          gunzip.destroy(error instanceof Error ? error : new Error(String(error)));
        }
      });
      // `pipeline`, not `pipe`: a client that goes away mid-body (its request aborted, the socket
      // closed) ends the inflating with an error, so the batch's ingest slot is given back instead
      // of waiting forever for the rest of a body that will not come.
      pipeline(req, gunzip, () => undefined);
      try {
        for await (const chunk of gunzip) into.add(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
      } catch (error) {
        if (error instanceof HttpError) throw error;
        if (req.destroyed && !req.complete) throw new HttpError(400, "the client went away before its body arrived");
        throw new HttpError(400, "the body is not valid gzip");
      }
    }
  } catch (error) {
    gunzip?.destroy();
    req.unpipe();
    req.resume();
    throw error;
  }
  return into.joined();
}

/** Read, check and apply one batch for a project. */
export async function ingestBatch(
  req: IncomingMessage,
  pool: pg.Pool,
  projectId: number,
  limits: IngestLimits,
  metrics: ServerMetrics,
  budget: InflateBudget,
): Promise<IngestResult & { refused: readonly RefusedPart[] }> {
  const inflating = new Inflating(limits, budget);
  try {
    return await ingestInflated(req, pool, projectId, metrics, inflating);
  } catch (error) {
    if (error instanceof InflateBusy) metrics.rejected.inc({ reason: "inflate_busy" });
    throw error;
  } finally {
    inflating.release();
  }
}

async function ingestInflated(
  req: IncomingMessage,
  pool: pg.Pool,
  projectId: number,
  metrics: ServerMetrics,
  inflating: Inflating,
): Promise<IngestResult & { refused: readonly RefusedPart[] }> {
  let raw: Buffer;
  try {
    raw = await inflateBody(req, inflating);
  } finally {
    metrics.bodyBytes.inc(inflating.received);
  }
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
