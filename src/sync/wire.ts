/**
 * The ingest batch: what a job's sync (and `rankscope sync`) sends the team server, and the
 * server's check of it. Both sides use this file, so the contract is written once.
 *
 * A batch is `RSB1`, a little-endian u32 header length, the header (UTF-8 JSON), zero padding to a
 * multiple of 8, then the points of every series segment as float64 columns (each segment's steps,
 * walls, values, in header order), then the bytes of every file segment. It travels gzipped
 * (`Content-Encoding: gzip`). Numbers as float64 columns, not JSON text: parsing a million JSON
 * numbers a second would cost the server more CPU than storing them.
 *
 * Idempotency rides on positions, not on batch ids: each segment says from which cursor it
 * continues (`after`) and where it ends (`cursor`), in the job's store's own positions (a step for
 * scalars, an arrival number for streams and system metrics); records and alert events carry the
 * store's sequence numbers; file segments their byte offset. The server applies what lies past its own cursor, in
 * one transaction per batch, so a batch re-sent after a timeout, a restart or a crash changes
 * nothing the second time.
 *
 * The batch's parts and caps are `wire-types.ts`; the server's check of a header, field by field,
 * is `wire-check.ts`.
 */
import { createHash } from "node:crypto";
import { checkHeader, checkSegment, fail } from "./wire-check.js";
import { MAGIC, WIRE_LIMITS, type Batch, type RunMeta } from "./wire-types.js";

export { checkRunId } from "./wire-check.js";
export { WIRE_LIMITS } from "./wire-types.js";
export {
  WIRE_VERSION,
  WireError,
  type AlertHeader,
  type Batch,
  type BatchHeader,
  type FileSegment,
  type RecordHeader,
  type RefusedPart,
  type RunMeta,
  type SegmentHeader,
  type TimingHeader,
  type WireSeriesKind,
} from "./wire-types.js";

/** A digest of a run's metadata: the server keeps the last one applied, so a sync resends it only when it changed. */
export function metaHash(meta: RunMeta): string {
  return createHash("sha256").update(JSON.stringify(meta)).digest("base64url");
}

/** Encode a batch (not yet compressed). */
export function encodeBatch(batch: Batch): Buffer {
  const header = Buffer.from(JSON.stringify(batch.header), "utf8");
  const headEnd = 8 + header.length;
  const pad = (8 - (headEnd % 8)) % 8;
  const floats = batch.columns.reduce((n, c) => n + c.steps.length * 3, 0);
  const bytes = batch.fileBytes.reduce((n, b) => n + b.length, 0);
  const out = Buffer.alloc(headEnd + pad + floats * 8 + bytes);
  out.writeUInt32LE(MAGIC, 0);
  out.writeUInt32LE(header.length, 4);
  header.copy(out, 8);
  let o = headEnd + pad;
  for (const c of batch.columns) {
    for (const a of [c.steps, c.walls, c.values]) {
      Buffer.from(a.buffer, a.byteOffset, a.byteLength).copy(out, o);
      o += a.byteLength;
    }
  }
  for (const b of batch.fileBytes) {
    b.copy(out, o);
    o += b.length;
  }
  return out;
}

/** Decode and check a batch (already decompressed); a `WireError` saying what is wrong. */
export function decodeBatch(body: Buffer): Batch {
  if (body.length < 8 || body.readUInt32LE(0) !== MAGIC)
    fail("not a rankscope ingest batch (it does not start with RSB1)");
  const headerLength = body.readUInt32LE(4);
  if (headerLength > WIRE_LIMITS.header || 8 + headerLength > body.length)
    fail(`the header length ${headerLength} runs past the body (${body.length} bytes)`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8", 8, 8 + headerLength));
  } catch {
    fail("the header is not JSON");
  }
  const { header, refused, segments } = checkHeader(parsed);
  const { files } = header;
  const points = segments.reduce((n: number, s) => n + (typeof s === "number" ? s : s.n), 0);
  if (points > WIRE_LIMITS.points) fail(`the batch holds ${points} points, at most ${WIRE_LIMITS.points}`);
  const headEnd = 8 + headerLength;
  let o = headEnd + ((8 - (headEnd % 8)) % 8);
  const fileTotal = files.reduce((n, f) => n + f.length, 0);
  const expected = o + points * 24 + fileTotal;
  if (body.length !== expected)
    fail(
      `the body is ${body.length} bytes; its header announces ${expected} (${points} points, ${fileTotal} file bytes)`,
    );
  // One aligned copy of the columns; segments are views into it.
  const floats = new Float64Array(points * 3);
  new Uint8Array(floats.buffer).set(body.subarray(o, o + points * 24));
  const columns: Batch["columns"] = [];
  let f = 0;
  for (const s of segments) {
    if (typeof s === "number") {
      f += 3 * s;
      continue;
    }
    const steps = floats.subarray(f, f + s.n);
    const walls = floats.subarray(f + s.n, f + 2 * s.n);
    const values = floats.subarray(f + 2 * s.n, f + 3 * s.n);
    f += 3 * s.n;
    checkSegment(s, steps, walls);
    columns.push({ steps, walls, values });
  }
  o += points * 24;
  const fileBytes: Buffer[] = [];
  for (const file of files) {
    fileBytes.push(body.subarray(o, o + file.length));
    o += file.length;
  }
  return { header, columns, fileBytes, refused };
}
