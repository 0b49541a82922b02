/**
 * Packing float64 arrays into SQLite blobs and back. Blobs are the machine's byte order, which the
 * store requires to be little-endian (every platform Node supports today); NaN and ±Infinity keep
 * their bit patterns, unlike SQLite REAL columns where NaN becomes NULL.
 */
import { endianness } from "node:os";

if (endianness() !== "LE")
  throw new Error("the rankscope store packs float64 blobs little-endian and needs a little-endian machine");

/** A blob for SQLite holding the array's bytes (no copy). */
export function packFloat64(values: Float64Array): Buffer {
  return Buffer.from(values.buffer, values.byteOffset, values.byteLength);
}

/** The float64 values of a blob written by `packFloat64`. */
export function unpackFloat64(blob: Buffer | Uint8Array): Float64Array {
  if (blob.byteLength % 8 !== 0)
    throw new Error(`corrupt store chunk: blob of ${blob.byteLength} bytes is not a whole number of float64 values`);
  if (blob.byteOffset % 8 === 0) return new Float64Array(blob.buffer, blob.byteOffset, blob.byteLength / 8);
  // Float64Array views need 8-byte alignment; a blob sliced from a larger buffer may not have it.
  const copy = new Uint8Array(blob.byteLength);
  copy.set(blob);
  return new Float64Array(copy.buffer);
}

/** A blob holding a float32 array's bytes, no copy (the per-rank timings: ms to seven digits is plenty, at half the size). */
export function packFloat32(values: Float32Array): Buffer {
  return Buffer.from(values.buffer, values.byteOffset, values.byteLength);
}

/** The float32 values of a blob written by `packFloat32`. */
export function unpackFloat32(blob: Buffer | Uint8Array): Float32Array {
  if (blob.byteLength % 4 !== 0)
    throw new Error(`corrupt store row: blob of ${blob.byteLength} bytes is not a whole number of float32 values`);
  if (blob.byteOffset % 4 === 0) return new Float32Array(blob.buffer, blob.byteOffset, blob.byteLength / 4);
  const copy = new Uint8Array(blob.byteLength);
  copy.set(blob);
  return new Float32Array(copy.buffer);
}

/** A REAL column value for a number: NaN as NULL (SQLite would turn it into NULL anyway). */
export function toSqlReal(value: number): number | null {
  return Number.isNaN(value) ? null : value;
}

/** A number from a REAL column written with `toSqlReal`. */
export function fromSqlReal(value: number | null): number {
  return value === null ? NaN : value;
}
