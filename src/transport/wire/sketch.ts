/**
 * The SKETCH section of the wire format (see `format.ts`), the sender's side: quantile sketches
 * (DDSketch states) as one record each — a flags byte, the f64 extremes and sum (max and sum left
 * out when they are min's bits), then varints: the special counts when any is not 0, each run's
 * offset (zigzag) and length, and its bucket counts. A state goes here only when every count in it
 * is a safe integer (not -0); any other goes to the JSON section, so the format stays exact.
 * Reading the records is `sketch-records.ts`.
 */
import type { BucketRun, QuantilesState } from "../../core/accumulators/quantiles.js";
import type { AccumulatorState } from "../../core/reduce.js";

/** Record flags: max is min's bits (not written), sum is min's bits (not written), special counts, a positive run, a negative run. */
export const SKETCH_MAX_IS_MIN = 1;
export const SKETCH_SUM_IS_MIN = 2;
export const SKETCH_SPECIALS = 4;
export const SKETCH_POSITIVE = 8;
export const SKETCH_NEGATIVE = 16;
/** Every flag a record may carry: a byte with another bit set is malformed. */
export const SKETCH_FLAGS = 31;

/** True when `a` and `b` are the same f64 (-0 and 0 apart; NaN never, so a NaN is always written). */
export const sameBits = (a: number, b: number): boolean => a === b && (a !== 0 || Object.is(a, b));

/** A count a varint carries exactly: a safe integer ≥ 0, not -0. */
const isVarintCount = (n: number): boolean => Number.isSafeInteger(n) && n >= 0 && !Object.is(n, -0);

/** Bytes of `n` (a safe integer ≥ 0) as an unsigned LEB128 varint. */
export function varintSize(n: number): number {
  let size = 1;
  for (let v = n; v > 0x7f; v = Math.floor(v / 128)) size++;
  return size;
}

/** Write `n` (a safe integer ≥ 0) as an unsigned LEB128 varint at `at`; returns the offset after it. */
export function writeVarint(bytes: Uint8Array, at: number, n: number): number {
  let offset = at;
  let v = n;
  while (v > 0x7f) {
    const low = v & 0x7f; // ToInt32 keeps the low bits of any safe integer
    bytes[offset++] = low | 0x80;
    v = (v - low) / 128;
  }
  bytes[offset++] = v;
  return offset;
}

/** A run's offset (an i32) as a zigzag number: 0, -1, 1, -2 … → 0, 1, 2, 3 … */
export const zigzag = (n: number): number => (n >= 0 ? 2 * n : -2 * n - 1);

function runFlag(run: BucketRun, flag: number): number {
  return run.counts.length > 0 || run.offset !== 0 ? flag : 0;
}

/** The record's flags for `s`. */
function flagsOf(s: QuantilesState): number {
  // Written unless all four are +0 (a -0 among them is written, and sends the state to JSON).
  const specials = !sameBits(s.zeros, 0) || !sameBits(s.nan, 0) || !sameBits(s.posInf, 0) || !sameBits(s.negInf, 0);
  return (
    (sameBits(s.max, s.min) ? SKETCH_MAX_IS_MIN : 0) |
    (sameBits(s.sum, s.min) ? SKETCH_SUM_IS_MIN : 0) |
    (specials ? SKETCH_SPECIALS : 0) |
    runFlag(s.positive, SKETCH_POSITIVE) |
    runFlag(s.negative, SKETCH_NEGATIVE)
  );
}

/** Bytes of a run's record part (offset, length, counts), or -1 when a count is not a varint's. */
function runSize(run: BucketRun): number {
  let size = varintSize(zigzag(run.offset)) + varintSize(run.counts.length);
  for (const c of run.counts) {
    if (!isVarintCount(c)) return -1;
    size += varintSize(c);
  }
  return size;
}

/** Bytes of the record of `s`, or -1 when it cannot be one (a count that is not a safe integer): it then travels as JSON. */
export function sketchRecordSize(s: QuantilesState): number {
  const flags = flagsOf(s);
  let size = 1 + 8;
  if ((flags & SKETCH_MAX_IS_MIN) === 0) size += 8;
  if ((flags & SKETCH_SUM_IS_MIN) === 0) size += 8;
  if ((flags & SKETCH_SPECIALS) !== 0) {
    for (const n of [s.zeros, s.nan, s.posInf, s.negInf]) {
      if (!isVarintCount(n)) return -1;
      size += varintSize(n);
    }
  }
  for (const [run, flag] of [
    [s.positive, SKETCH_POSITIVE],
    [s.negative, SKETCH_NEGATIVE],
  ] as const) {
    if ((flags & flag) === 0) continue;
    const bytes = runSize(run);
    if (bytes < 0) return -1;
    size += bytes;
  }
  return size;
}

function writeRun(bytes: Uint8Array, at: number, run: BucketRun): number {
  let offset = writeVarint(bytes, at, zigzag(run.offset));
  offset = writeVarint(bytes, offset, run.counts.length);
  for (const c of run.counts) offset = writeVarint(bytes, offset, c);
  return offset;
}

/**
 * Write the records of `sketches` (each one `sketchRecordSize` accepted) at `at`, after a u32 of
 * their length `length`; returns the offset after them. The caller pads to 8.
 */
export function writeSketches(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  length: number,
  sketches: readonly QuantilesState[],
): number {
  view.setUint32(at, length, true);
  let offset = at + 4;
  for (const s of sketches) {
    const flags = flagsOf(s);
    bytes[offset] = flags;
    view.setFloat64(offset + 1, s.min, true);
    offset += 9;
    if ((flags & SKETCH_MAX_IS_MIN) === 0) {
      view.setFloat64(offset, s.max, true);
      offset += 8;
    }
    if ((flags & SKETCH_SUM_IS_MIN) === 0) {
      view.setFloat64(offset, s.sum, true);
      offset += 8;
    }
    if ((flags & SKETCH_SPECIALS) !== 0)
      for (const n of [s.zeros, s.nan, s.posInf, s.negInf]) offset = writeVarint(bytes, offset, n);
    if ((flags & SKETCH_POSITIVE) !== 0) offset = writeRun(bytes, offset, s.positive);
    if ((flags & SKETCH_NEGATIVE) !== 0) offset = writeRun(bytes, offset, s.negative);
  }
  if (offset !== at + 4 + length) throw new Error(`sketch records: wrote ${offset - at - 4} bytes of ${length}`);
  return offset;
}

function isRun(value: unknown): value is BucketRun {
  if (value === null || typeof value !== "object" || !("offset" in value) || !("counts" in value)) return false;
  const { offset, counts } = value;
  if (
    typeof offset !== "number" ||
    !Number.isInteger(offset) ||
    offset < -0x80000000 ||
    offset > 0x7fffffff ||
    !Array.isArray(counts)
  )
    return false;
  for (const c of counts) if (typeof c !== "number") return false;
  return true;
}

/** A quantile sketch's version-1 state, exactly (what a SKETCH section can carry when its counts are varints'). */
export function isSketchState(state: AccumulatorState): state is QuantilesState {
  return (
    "sum" in state &&
    typeof state.sum === "number" &&
    "min" in state &&
    typeof state.min === "number" &&
    "max" in state &&
    typeof state.max === "number" &&
    "zeros" in state &&
    typeof state.zeros === "number" &&
    "nan" in state &&
    typeof state.nan === "number" &&
    "posInf" in state &&
    typeof state.posInf === "number" &&
    "negInf" in state &&
    typeof state.negInf === "number" &&
    "positive" in state &&
    isRun(state.positive) &&
    "negative" in state &&
    isRun(state.negative)
  );
}
