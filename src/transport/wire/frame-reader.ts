/**
 * Reading a frame's bytes (see `format.ts`), every read bounds-checked: the cursor over an
 * 8-aligned copy, the key definitions a frame adds, and its sections as raw columns (ids, counts,
 * values) or states (JSON, sketches). What the ids mean is the decoder's (`decoder.ts`).
 */
import { decodeMessage } from "../../core/json.js";
import { keyNameProblem, reduceNameProblem } from "../../core/key-state-check.js";
import type { AccumulatorState } from "../../core/reduce.js";
import { FIXED, isWireFrame, pad8, SectionKind, sectionKindOf, utf8Decoder, WireFormatError } from "./format.js";
import { readSketchRecords, RecordReader, type SketchRecords } from "./sketch-records.js";

const EMPTY_F64: Float64Array<ArrayBufferLike> = new Float64Array(0);

function isAccumulatorState(value: unknown): value is AccumulatorState {
  return (
    value !== null &&
    typeof value === "object" &&
    "v" in value &&
    "count" in value &&
    typeof value.v === "number" &&
    typeof value.count === "number"
  );
}

/**
 * A frame's bytes and the reading position in them. The frame is read from an 8-aligned copy so
 * the columns can be read as typed arrays (`new Uint8Array(x)` copies; a Node Buffer's `slice`
 * would not).
 */
export class FrameCursor {
  offset = 0;

  private constructor(
    readonly buffer: ArrayBufferLike,
    readonly start: number,
    readonly view: DataView,
    readonly end: number,
  ) {}

  static over(data: Uint8Array): FrameCursor {
    if (!isWireFrame(data)) throw new WireFormatError("not a rankscope wire frame (bad magic)");
    if (data.length < FIXED)
      throw new WireFormatError(`frame of ${data.length} bytes is shorter than its fixed header (${FIXED})`);
    const aligned = data.byteOffset % 8 === 0;
    const buffer = aligned ? data.buffer : new Uint8Array(data).buffer;
    const start = aligned ? data.byteOffset : 0;
    return new FrameCursor(buffer, start, new DataView(buffer, start, data.length), data.length);
  }

  /** Throws unless `bytes` bytes from `offset` lie inside the frame. */
  readonly need = (offset: number, bytes: number, what: string): void => {
    if (offset + bytes > this.end)
      throw new WireFormatError(`${what} runs past the end of the frame (${offset + bytes} > ${this.end} bytes)`);
  };

  /** The frame's bytes `[offset, offset + length)` (a view, not a copy). */
  bytes(offset: number, length: number): Uint8Array {
    return new Uint8Array(this.buffer, this.start + offset, length);
  }

  /** A column of `m` f64 values at the cursor, which moves past it. */
  f64(m: number): Float64Array<ArrayBufferLike> {
    const column = new Float64Array(this.buffer, this.start + this.offset, m);
    this.offset += m * 8;
    return column;
  }
}

/** The `[key, reduce]` definitions at the cursor (`count` of them), each name checked. */
export function readKeyDefinitions(cursor: FrameCursor, count: number): Array<[string, string]> {
  const { view, need } = cursor;
  const definitions: Array<[string, string]> = [];
  for (let i = 0; i < count; i++) {
    let offset = cursor.offset;
    need(offset, 2, "a key definition");
    const keyLength = view.getUint16(offset, true);
    need(offset + 2, keyLength + 1, "a key definition");
    const key = utf8(cursor.bytes(offset + 2, keyLength), "a key");
    offset += 2 + keyLength;
    const reduceLength = view.getUint8(offset);
    need(offset + 1, reduceLength, "a reduce name");
    const reduce = utf8(cursor.bytes(offset + 1, reduceLength), "a reduce name");
    cursor.offset = offset + 1 + reduceLength;
    const nameProblem = keyNameProblem(key) ?? reduceNameProblem(reduce);
    if (nameProblem !== undefined)
      throw new WireFormatError(`a key definition is refused: ${nameProblem}`, "invalidName");
    definitions.push([key, reduce]);
  }
  return definitions;
}

/** One section as sent: ids the decoder may not know yet, and its columns or states. */
export interface RawSection {
  readonly kind: SectionKind;
  readonly rawIds: Uint32Array<ArrayBufferLike> | Uint16Array<ArrayBufferLike>;
  readonly rawCounts: Float64Array<ArrayBufferLike> | Uint32Array<ArrayBufferLike>;
  readonly a: Float64Array<ArrayBufferLike>;
  readonly b: Float64Array<ArrayBufferLike>;
  readonly states: AccumulatorState[];
  /** SKETCH: the records, checked, read in place. */
  readonly sketches?: SketchRecords;
}

/** The section at the cursor (its header, ids, counts, then values or states); the cursor moves past it. */
export function readSection(cursor: FrameCursor, idBytes: number, countBytes: number): RawSection {
  const { buffer, start, view, need } = cursor;
  need(cursor.offset, 8, "a section header");
  const kindByte = view.getUint8(cursor.offset);
  const kind = sectionKindOf(kindByte);
  if (kind === undefined) throw new WireFormatError(`unknown section kind ${kindByte}`);
  const m = view.getUint32(cursor.offset + 4, true);
  let offset = cursor.offset + 8;
  need(offset, pad8(m * idBytes) + pad8(m * countBytes), "a section's ids and counts");
  const rawIds =
    idBytes === 4 ? new Uint32Array(buffer, start + offset, m) : new Uint16Array(buffer, start + offset, m);
  offset += pad8(m * idBytes);
  const rawCounts =
    countBytes === 8 ? new Float64Array(buffer, start + offset, m) : new Uint32Array(buffer, start + offset, m);
  cursor.offset = offset + pad8(m * countBytes);
  let a = EMPTY_F64;
  let b = EMPTY_F64;
  let states: AccumulatorState[] = [];
  if (kind === SectionKind.Json) {
    states = readJsonStates(cursor, m);
  } else if (kind === SectionKind.Sketch) {
    return { kind, rawIds, rawCounts, a, b, states, sketches: readSketchSection(cursor, m, rawCounts) };
  } else {
    const columns = kind === SectionKind.Moments ? 2 : 1;
    need(cursor.offset, m * 8 * columns, "a section's values");
    a = cursor.f64(m);
    if (columns === 2) b = cursor.f64(m);
  }
  return { kind, rawIds, rawCounts, a, b, states };
}

/** A SKETCH section's `m` records at the cursor (a length, then the records), checked against the counts column. */
function readSketchSection(cursor: FrameCursor, m: number, counts: ArrayLike<number>): SketchRecords {
  const { offset, need } = cursor;
  need(offset, 4, "a sketch section's length");
  const length = cursor.view.getUint32(offset, true);
  need(offset + 4, length, "a sketch section");
  const at = cursor.start + offset + 4;
  const records = readSketchRecords(
    new Uint8Array(cursor.buffer, at, length),
    new DataView(cursor.buffer, at, length),
    m,
    counts,
    new RecordReader(),
  );
  cursor.offset = offset + pad8(4 + length);
  return records;
}

/** A JSON section's `m` states at the cursor (a length, then a JSON array), each shaped as a state. */
function readJsonStates(cursor: FrameCursor, m: number): AccumulatorState[] {
  const { offset, need } = cursor;
  need(offset, 4, "a JSON section's length");
  const length = cursor.view.getUint32(offset, true);
  need(offset + 4, length, "a JSON section");
  let parsed: unknown;
  try {
    parsed = decodeMessage(utf8Decoder.decode(cursor.bytes(offset + 4, length)));
  } catch {
    throw new WireFormatError("a JSON section is not valid JSON");
  }
  if (!Array.isArray(parsed) || parsed.length !== m) throw new WireFormatError(`a JSON section must hold ${m} states`);
  const states: AccumulatorState[] = [];
  for (const state of parsed) {
    if (!isAccumulatorState(state)) throw new WireFormatError("a JSON state must carry v and count");
    states.push(state);
  }
  cursor.offset = offset + pad8(4 + length);
  return states;
}

/**
 * The numbers of a section's columns that a state of its kind may not hold: a count that is not a
 * finite number ≥ 0 (only f64 counts can be one), a negative M2 (a sum of squares).
 */
export function checkColumns(
  kind: SectionKind,
  counts: Float64Array,
  m2: Float64Array<ArrayBufferLike>,
  f64Counts: boolean,
): void {
  if (f64Counts) {
    for (let i = 0; i < counts.length; i++) {
      const c = counts[i] ?? 0;
      if (!(c >= 0 && c < Infinity))
        throw new WireFormatError(`a state's count is ${c}; counts are finite numbers ≥ 0`, "invalidState");
    }
  }
  if (kind === SectionKind.Moments) {
    for (let i = 0; i < m2.length; i++)
      if ((m2[i] ?? 0) < 0)
        throw new WireFormatError("a std state's M2 is negative; it is a sum of squares", "invalidState");
  }
}

function utf8(bytes: Uint8Array, what: string): string {
  try {
    return utf8Decoder.decode(bytes);
  } catch {
    throw new WireFormatError(`${what} is not valid UTF-8`);
  }
}
