/**
 * The SKETCH section of the wire format, the receiver's side (the layout is `sketch.ts`'s): the
 * records are checked once when the frame is decoded — every varint, flag, run and count, as
 * `checkQuantiles` checks a state — and then read in place, from the frame's own bytes: merged
 * straight into a `Sketch` (`foldSketchRecord`, no state object, no bucket array) or, when someone
 * asks for the state, built into one (`sketchRecordState`).
 */
import {
  HIGHEST_KEY,
  LOWEST_KEY,
  type BucketRun,
  type QuantilesState,
  type Sketch,
} from "../../core/accumulators/quantiles.js";
import { WireFormatError } from "./format.js";
import {
  SKETCH_FLAGS,
  SKETCH_MAX_IS_MIN,
  SKETCH_NEGATIVE,
  SKETCH_POSITIVE,
  SKETCH_SPECIALS,
  SKETCH_SUM_IS_MIN,
} from "./sketch.js";

/** A SKETCH section's records: the frame's bytes (views, not copies) and where each state's record starts. */
export interface SketchRecords {
  readonly bytes: Uint8Array;
  readonly view: DataView;
  /** By the section's state index, the record's offset in `bytes`. */
  readonly at: Uint32Array;
}

/** Reads records' varints and numbers at `pos`, every read bounds-checked (one per decoder or merger, reused). */
export class RecordReader {
  pos = 0;
  private bytes: Uint8Array<ArrayBufferLike> = new Uint8Array(0);
  private view: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));
  private end = 0;

  over(bytes: Uint8Array, view: DataView, pos: number): this {
    this.bytes = bytes;
    this.view = view;
    this.end = bytes.length;
    this.pos = pos;
    return this;
  }

  f64(): number {
    if (this.pos + 8 > this.end) throw new WireFormatError("a sketch record runs past the end of its section");
    const x = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return x;
  }

  skip(bytes: number): void {
    if (this.pos + bytes > this.end) throw new WireFormatError("a sketch record runs past the end of its section");
    this.pos += bytes;
  }

  u8(): number {
    if (this.pos >= this.end) throw new WireFormatError("a sketch record runs past the end of its section");
    return this.bytes[this.pos++] ?? 0;
  }

  /** An unsigned LEB128 varint of at most 8 bytes, a safe integer, without a redundant last byte. */
  varint(): number {
    let b = this.u8();
    if (b < 0x80) return b;
    let value = b & 0x7f;
    let scale = 128;
    for (let i = 1; ; i++) {
      b = this.u8();
      value += (b & 0x7f) * scale;
      if (b < 0x80) {
        if (b === 0) throw new WireFormatError("a sketch record's varint has a redundant last byte");
        break;
      }
      if (i === 7) throw new WireFormatError("a sketch record's varint is longer than 8 bytes");
      scale *= 128;
    }
    if (value > Number.MAX_SAFE_INTEGER) throw new WireFormatError("a sketch record's count is past 2^53");
    return value;
  }

  /** A run's offset: a zigzag varint, an i32. */
  offset(): number {
    const z = this.varint();
    const n = z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    if (n < -0x80000000 || n > 0x7fffffff) throw new WireFormatError(`a sketch run's offset ${n} is not an i32`);
    return n;
  }
}

const invalid = (problem: string): WireFormatError =>
  new WireFormatError(`a quantiles state is not valid: ${problem}`, "invalidState");

/** Check one run at the reader (offset, length, counts: its keys within a double's); returns its total. */
function checkRun(reader: RecordReader, name: string): number {
  const offset = reader.offset();
  const length = reader.varint();
  if (length > 0 && (offset < LOWEST_KEY || offset + length - 1 > HIGHEST_KEY))
    throw invalid(`${name} buckets ${offset}..${offset + length - 1} lie outside ${LOWEST_KEY}..${HIGHEST_KEY}`);
  let total = 0;
  for (let i = 0; i < length; i++) total += reader.varint();
  return total;
}

/** Check the record at the reader against its state's count (as `checkQuantiles`: everything held adds up to count). */
function checkRecord(reader: RecordReader, count: number): void {
  const flags = reader.u8();
  if ((flags & ~SKETCH_FLAGS) !== 0) throw new WireFormatError(`a sketch record's flags are ${flags}`);
  // Any f64 is a valid min, max or sum: only their bytes are checked.
  reader.skip(8 * (1 + ((flags & SKETCH_MAX_IS_MIN) === 0 ? 1 : 0) + ((flags & SKETCH_SUM_IS_MIN) === 0 ? 1 : 0)));
  const special = (flags & SKETCH_SPECIALS) !== 0;
  const zeros = special ? reader.varint() : 0;
  const nan = special ? reader.varint() : 0;
  const posInf = special ? reader.varint() : 0;
  const negInf = special ? reader.varint() : 0;
  const positive = (flags & SKETCH_POSITIVE) !== 0 ? checkRun(reader, "positive") : 0;
  const negative = (flags & SKETCH_NEGATIVE) !== 0 ? checkRun(reader, "negative") : 0;
  // Added in `checkQuantiles`' order, so a sum past 2^53 rounds as it does there.
  const held = positive + negative + zeros + nan + posInf + negInf;
  if (held !== count) throw invalid(`its buckets and special counts hold ${held} values, but count is ${count}`);
}

/**
 * Check the section's `m` records in `bytes` (the u32 length already read) against the counts
 * column; returns where each starts. Throws `WireFormatError` for anything a record may not hold,
 * or when the records do not end exactly at the section's length.
 */
export function readSketchRecords(
  bytes: Uint8Array,
  view: DataView,
  m: number,
  counts: ArrayLike<number>,
  reader: RecordReader,
): SketchRecords {
  const at = new Uint32Array(m);
  reader.over(bytes, view, 0);
  for (let j = 0; j < m; j++) {
    at[j] = reader.pos;
    checkRecord(reader, counts[j] ?? 0);
  }
  if (reader.pos !== bytes.length)
    throw new WireFormatError(`a sketch section is ${bytes.length} bytes but its records end at ${reader.pos}`);
  return { bytes, view, at };
}

/** The record's numbers: min, max, sum (max and sum from min when the flags say). */
function readNumbers(reader: RecordReader, flags: number): [min: number, max: number, sum: number] {
  const min = reader.f64();
  const max = (flags & SKETCH_MAX_IS_MIN) !== 0 ? min : reader.f64();
  const sum = (flags & SKETCH_SUM_IS_MIN) !== 0 ? min : reader.f64();
  return [min, max, sum];
}

/** Add the run at the reader to one sign of `sketch` (`Sketch.addState`'s `addRun`: counts > 0 only). */
function foldRun(reader: RecordReader, buckets: Sketch["positive"]): void {
  const offset = reader.offset();
  const length = reader.varint();
  for (let i = 0; i < length; i++) {
    const n = reader.varint();
    if (n > 0) buckets.add(offset + i, n);
  }
}

/** Merge record `j` of `records` (a state of `count` values) into `sketch`, exactly as `sketch.addState(state)` would. */
export function foldSketchRecord(
  sketch: Sketch,
  records: SketchRecords,
  j: number,
  count: number,
  reader: RecordReader,
): void {
  reader.over(records.bytes, records.view, records.at[j] ?? 0);
  const flags = reader.u8();
  const min = reader.f64();
  const max = (flags & SKETCH_MAX_IS_MIN) !== 0 ? min : reader.f64();
  const sum = (flags & SKETCH_SUM_IS_MIN) !== 0 ? min : reader.f64();
  const special = (flags & SKETCH_SPECIALS) !== 0;
  const zeros = special ? reader.varint() : 0;
  const nan = special ? reader.varint() : 0;
  const posInf = special ? reader.varint() : 0;
  const negInf = special ? reader.varint() : 0;
  sketch.addScalars(count, sum, min, max, zeros, nan, posInf, negInf);
  if ((flags & SKETCH_POSITIVE) !== 0) foldRun(reader, sketch.positive);
  if ((flags & SKETCH_NEGATIVE) !== 0) foldRun(reader, sketch.negative);
}

function readRun(reader: RecordReader): BucketRun {
  const offset = reader.offset();
  const length = reader.varint();
  const counts: number[] = [];
  for (let i = 0; i < length; i++) counts.push(reader.varint());
  return { offset, counts };
}

const EMPTY_RUN: BucketRun = { offset: 0, counts: [] };

/** Record `j` of `records` as the state it was written from (a state of `count` values). */
export function sketchRecordState(
  records: SketchRecords,
  j: number,
  count: number,
  reader = new RecordReader(),
): QuantilesState {
  reader.over(records.bytes, records.view, records.at[j] ?? 0);
  const flags = reader.u8();
  const [min, max, sum] = readNumbers(reader, flags);
  const special = (flags & SKETCH_SPECIALS) !== 0;
  const zeros = special ? reader.varint() : 0;
  const nan = special ? reader.varint() : 0;
  const posInf = special ? reader.varint() : 0;
  const negInf = special ? reader.varint() : 0;
  const positive = (flags & SKETCH_POSITIVE) !== 0 ? readRun(reader) : { ...EMPTY_RUN, counts: [] };
  const negative = (flags & SKETCH_NEGATIVE) !== 0 ? readRun(reader) : { ...EMPTY_RUN, counts: [] };
  return { v: 1, count, sum, min, max, zeros, nan, posInf, negInf, positive, negative };
}
