/**
 * TFRecord framing, as TensorFlow's record writer lays records out (all little-endian):
 *
 *   u64 length · u32 masked CRC-32C of the 8 length bytes · data · u32 masked CRC-32C of the data
 *
 * The mask rotates the CRC right by 15 bits and adds 0xa282ead8, so a CRC of data that itself
 * holds CRCs does not look like a valid checksum. `readRecord` takes a record back out, checking
 * both CRCs (`rankscope import tensorboard`).
 */
import crc32c from "crc-32/crc32c.js";

const MASK_DELTA = 0xa282ead8;

/** TensorFlow's masked CRC-32C of `bytes`, as an unsigned 32-bit number. */
export function maskedCrc32c(bytes: Uint8Array): number {
  const crc = crc32c.buf(bytes) >>> 0;
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + MASK_DELTA) >>> 0;
}

/** Bytes a record of `dataLength` bytes takes in a file. */
function framedLength(dataLength: number): number {
  return dataLength + 16;
}

/**
 * Write one framed record holding `data` into `target` at `offset`; returns the offset after it.
 * `target` must have `framedLength(data.length)` bytes free from `offset`.
 */
function writeRecord(target: Buffer, offset: number, data: Uint8Array): number {
  const length = data.length;
  // A u64 length: records here are far below 2^32 bytes, so the high word is 0.
  target.writeUInt32LE(length >>> 0, offset);
  target.writeUInt32LE(Math.floor(length / 0x100000000), offset + 4);
  target.writeUInt32LE(maskedCrc32c(target.subarray(offset, offset + 8)), offset + 8);
  target.set(data, offset + 12);
  target.writeUInt32LE(maskedCrc32c(data), offset + 12 + length);
  return offset + 16 + length;
}

/** One framed record holding `data`, in a fresh buffer. */
export function frameRecord(data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(framedLength(data.length));
  writeRecord(out, 0, data);
  return out;
}

/** Frame several records into one buffer (one allocation for a whole flush). */
export function frameRecords(records: readonly Uint8Array[]): Buffer {
  let total = 0;
  for (const r of records) total += framedLength(r.length);
  const out = Buffer.allocUnsafe(total);
  let offset = 0;
  for (const r of records) offset = writeRecord(out, offset, r);
  return out;
}

/** What `readRecord` found at an offset. */
export type ReadRecord =
  /** A whole record: its data (a view into the buffer) and the offset after it. */
  | { readonly kind: "record"; readonly data: Buffer; readonly next: number }
  /** The buffer ends inside the record: `need` bytes from the offset hold all of it. */
  | { readonly kind: "short"; readonly need: number }
  /** Not a record: what is wrong with it. */
  | { readonly kind: "bad"; readonly reason: string };

/** The framed record of `buffer` at `offset` (`buffer` holds `end` bytes), both CRCs checked. */
export function readRecord(buffer: Buffer, offset: number, end: number): ReadRecord {
  if (end - offset < 12) return { kind: "short", need: 12 };
  const length = buffer.readUInt32LE(offset) + buffer.readUInt32LE(offset + 4) * 0x100000000;
  if (buffer.readUInt32LE(offset + 8) !== maskedCrc32c(buffer.subarray(offset, offset + 8)))
    return { kind: "bad", reason: "its length's CRC does not match (not a TFRecord, or corrupt)" };
  if (length > 0x7fffffff) return { kind: "bad", reason: `its length ${length} is beyond any event` };
  if (end - offset < 16 + length) return { kind: "short", need: 16 + length };
  const data = buffer.subarray(offset + 12, offset + 12 + length);
  if (buffer.readUInt32LE(offset + 12 + length) !== maskedCrc32c(data))
    return { kind: "bad", reason: "its data's CRC does not match (corrupt)" };
  return { kind: "record", data, next: offset + 16 + length };
}
