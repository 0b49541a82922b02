/**
 * TFRecord framing, as TensorFlow's record writer lays records out (all little-endian):
 *
 *   u64 length · u32 masked CRC-32C of the 8 length bytes · data · u32 masked CRC-32C of the data
 *
 * The mask rotates the CRC right by 15 bits and adds 0xa282ead8, so a CRC of data that itself
 * holds CRCs does not look like a valid checksum.
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
