/**
 * A series' points as the server's `chunks` rows: the local store's packed layout (float64 blobs,
 * min/max/last columns, pre-aggregated blocks from `columns.ts`), written with one binary `COPY`
 * per batch (pg-copy-streams).
 *
 * Binary COPY, not `INSERT … VALUES` or `unnest`: a row's blobs go to PostgreSQL as their raw
 * bytes (no bind-message buffer to grow and copy, no per-statement parameter list), numbers as
 * 8-byte big-endian fields, and PostgreSQL stores them without parsing text. The rows of a COPY
 * are packed into buffers of about `COPY_PART_BYTES` so the socket sees a few large writes.
 */
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import { requireOptional } from "../core/optional-packages.js";
import { packFloat64, unpackFloat64 } from "../store/codec.js";
import { blockSummaries, extremes, f64, type SeriesColumns } from "../store/columns.js";

/** `COPY … FROM STDIN` as a stream (pg-copy-streams: an optional peer dependency, with pg, of `rankscope server`). */
const { from: copyFrom } = requireOptional<typeof import("pg-copy-streams")>("server", "pg-copy-streams");

/** One chunk to insert. `firstPos`: its first point's position (a step for scalars, the server's arrival number otherwise). */
export interface ChunkRow {
  readonly keyId: number;
  readonly rank: number;
  readonly firstPos: number;
  readonly points: SeriesColumns;
  /** Positions are the steps (scalars) or consecutive arrival numbers from `firstPos`. */
  readonly byStep: boolean;
}

/** The columns a COPY fills, in the order `writeRow` writes them. */
const COLUMNS = [
  "key_id",
  "rank",
  "first_pos",
  "last_pos",
  "first_step",
  "last_step",
  "n",
  "first_wall",
  "last_wall",
  "min",
  "min_step",
  "min_wall",
  "max",
  "max_step",
  "max_wall",
  "last",
  "nan_count",
  "blocks",
  "steps",
  "walls",
  "vals",
] as const;

/** Bytes of the COPY stream handed to the socket at a time. */
const COPY_PART_BYTES = 1024 * 1024;

/** `PGCOPY\n\377\r\n\0`, no flags, no header extension. */
const COPY_HEADER = Buffer.concat([Buffer.from("PGCOPY\n\xff\r\n\0", "latin1"), Buffer.alloc(8)]);
/** The end of a binary COPY: a tuple of -1 fields. */
const COPY_TRAILER = Buffer.from([0xff, 0xff]);

/**
 * Bytes of a row besides its blobs' bytes: the field count, 21 field lengths, and the 17 fixed
 * fields (key_id 8, rank 4, four positions and steps 32, n 4, two walls 16, the extremes 48, last 8, nan_count 4).
 */
const FIXED_BYTES = 2 + 21 * 4 + 124;

/** A chunk's blob-free part: where its positions and steps run, its extremes and NaN count. */
interface RowSummary {
  readonly lastPos: number;
  readonly firstStep: number;
  readonly lastStep: number;
  readonly minAt: number;
  readonly maxAt: number;
  readonly nans: number;
  readonly blocks: Float64Array;
}

function summarise(c: ChunkRow): RowSummary {
  const { steps, values } = c.points;
  const n = steps.length;
  const { minAt, maxAt, nans } = extremes(values);
  let firstStep = f64(steps, 0);
  let lastStep = f64(steps, n - 1);
  if (!c.byStep) {
    for (const s of steps) {
      if (s < firstStep) firstStep = s;
      if (s > lastStep) lastStep = s;
    }
  }
  return {
    lastPos: c.byStep ? lastStep : c.firstPos + n - 1,
    firstStep,
    lastStep,
    minAt,
    maxAt,
    nans,
    blocks: blockSummaries(c.points),
  };
}

/** Writes COPY binary fields into a buffer. */
class FieldWriter {
  constructor(
    readonly buf: Buffer,
    public o: number,
  ) {}

  count(fields: number): void {
    this.o = this.buf.writeInt16BE(fields, this.o);
  }

  bigint(v: number): void {
    this.o = this.buf.writeInt32BE(8, this.o);
    this.o = this.buf.writeUInt32BE(Math.floor(v / 2 ** 32), this.o);
    this.o = this.buf.writeUInt32BE(v >>> 0, this.o);
  }

  int(v: number): void {
    this.o = this.buf.writeInt32BE(4, this.o);
    this.o = this.buf.writeInt32BE(v, this.o);
  }

  double(v: number | null): void {
    if (v === null) {
      this.o = this.buf.writeInt32BE(-1, this.o);
      return;
    }
    this.o = this.buf.writeInt32BE(8, this.o);
    this.o = this.buf.writeDoubleBE(v, this.o);
  }

  /** A bytea field: the array's bytes as they are (little-endian float64, as the store packs them). */
  blob(a: Float64Array): void {
    this.o = this.buf.writeInt32BE(a.byteLength, this.o);
    this.o += packFloat64(a).copy(this.buf, this.o);
  }
}

/** Bytes one row takes in the COPY stream. */
function rowBytes(c: ChunkRow, s: RowSummary): number {
  return FIXED_BYTES + s.blocks.byteLength + 3 * c.points.steps.byteLength;
}

/** One row, in `COLUMNS` order. */
function writeRow(w: FieldWriter, c: ChunkRow, s: RowSummary): void {
  const { steps, walls, values } = c.points;
  const n = steps.length;
  const at = (a: Float64Array, i: number): number | null => (i < 0 ? null : f64(a, i));
  w.count(COLUMNS.length);
  w.bigint(c.keyId);
  w.int(c.rank);
  w.double(c.firstPos);
  w.double(s.lastPos);
  w.double(s.firstStep);
  w.double(s.lastStep);
  w.int(n);
  w.double(f64(walls, 0));
  w.double(f64(walls, n - 1));
  w.double(at(values, s.minAt));
  w.double(at(steps, s.minAt));
  w.double(at(walls, s.minAt));
  w.double(at(values, s.maxAt));
  w.double(at(steps, s.maxAt));
  w.double(at(walls, s.maxAt));
  w.double(f64(values, n - 1));
  w.int(s.nans);
  w.blob(s.blocks);
  w.blob(steps);
  w.blob(walls);
  w.blob(values);
}

/** The COPY stream of `rows`: the header, the rows packed into parts of about `COPY_PART_BYTES`, the trailer. */
function* copyStream(rows: readonly ChunkRow[]): Generator<Buffer> {
  yield COPY_HEADER;
  let w = new FieldWriter(Buffer.allocUnsafe(COPY_PART_BYTES), 0);
  for (const row of rows) {
    const summary = summarise(row);
    const size = rowBytes(row, summary);
    if (w.o + size > w.buf.length) {
      if (w.o > 0) yield w.buf.subarray(0, w.o);
      w = new FieldWriter(Buffer.allocUnsafe(Math.max(COPY_PART_BYTES, size)), 0);
    }
    writeRow(w, row, summary);
  }
  if (w.o > 0) yield w.buf.subarray(0, w.o);
  yield COPY_TRAILER;
}

/** Insert chunk rows: one binary COPY on the client's connection (inside its transaction, if one is open). */
export async function insertChunks(client: pg.ClientBase, rows: readonly ChunkRow[]): Promise<void> {
  if (rows.length === 0) return;
  const copy = client.query(copyFrom(`COPY chunks (${COLUMNS.join(",")}) FROM STDIN (FORMAT binary)`));
  await pipeline(Readable.from(copyStream(rows), { objectMode: false }), copy);
}

/** A stored chunk's points. */
export function decodeChunkBlobs(row: { steps: Buffer; walls: Buffer; vals: Buffer }): SeriesColumns {
  return { steps: unpackFloat64(row.steps), walls: unpackFloat64(row.walls), values: unpackFloat64(row.vals) };
}
