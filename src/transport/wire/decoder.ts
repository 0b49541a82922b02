/**
 * The receiver's side of the wire format (see `format.ts`): the sender's key table, and frame
 * decoding into columns (typed arrays over the frame's own bytes where they are aligned).
 */
import type { KeyState } from "../../core/key-state.js";
import { decodeMessage } from "../../core/json.js";
import type { AccumulatorState } from "../../core/reduce.js";
import { readSketches } from "./sketch.js";
import { keyNameProblem, ReceivedStates, reduceNameProblem } from "../../core/key-state-check.js";
import {
  FIXED,
  FLAG_F64_COUNTS,
  FLAG_U32_IDS,
  isWireFrame,
  pad8,
  parseHeader,
  SectionKind,
  sectionKindForReduce,
  sectionKindOf,
  utf8Decoder,
  WIRE_VERSION,
  WireFormatError,
  type FrameHeader,
  type KeyTable,
} from "./format.js";
import { describeError } from "../../core/diagnostics.js";

/** One decoded frame: its header and its states, in columns. */
export interface DecodedFrame {
  readonly header: FrameHeader;
  readonly sections: readonly DecodedSection[];
  /** The key table the sections' ids index (the sender's session at this frame). */
  readonly table: KeyTable;
  /** States whose key id this decoder does not know (a frame of the session was lost): not decoded, counted here. */
  readonly unknownKeys: number;
  /** Number of states in the frame. */
  readonly stateCount: number;
  /** True when the frame continues a table this decoder does not fully hold: ask the sender to resend it (`StateEncoder.reset`). */
  readonly tableGap: boolean;
}

/** One section of a decoded frame. `ids` index the frame's `table`. */
export interface DecodedSection {
  readonly kind: SectionKind;
  readonly ids: Uint32Array<ArrayBufferLike>;
  readonly counts: Float64Array<ArrayBufferLike>;
  /** SUM: sums; EXTREME: values; MOMENTS: means. */
  readonly a: Float64Array<ArrayBufferLike>;
  /** MOMENTS: M2. */
  readonly b: Float64Array<ArrayBufferLike>;
  /** JSON and SKETCH: the states, in the order of `ids`. */
  readonly states: readonly AccumulatorState[];
}

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

/** The receiver's side of one connection: the sender's key table, and frame decoding. */
export class StateDecoder {
  private keyList: string[] = [];
  private reduceList: string[] = [];
  /** Per key id, the section its reduction's states travel in (`sectionKindForReduce`): a state in another (but JSON) is refused. */
  private kindList: SectionKind[] = [];
  private sessionId: string | undefined;

  /**
   * `maxKeys` bounds the sender's key table held here: a frame whose definitions would grow it
   * past that is refused as a whole (counted by the caller) and the table stays as it was, so the
   * sender's next frames show a gap and it is asked to start a new table.
   */
  constructor(private readonly maxKeys = Number.POSITIVE_INFINITY) {}

  /**
   * A decoder that already holds `table` (e.g. to read again a frame its own sender kept: the
   * sender's `StateEncoder.table`).
   */
  static holding(table: KeyTable): StateDecoder {
    const decoder = new StateDecoder();
    decoder.sessionId = table.session;
    decoder.keyList = [...table.keys];
    decoder.reduceList = [...table.reduces];
    decoder.kindList = table.reduces.map(sectionKindForReduce);
    return decoder;
  }

  /** Keys by id, in the current session. */
  get keys(): readonly string[] {
    return this.keyList;
  }

  /** Reduce names by id. */
  get reduces(): readonly string[] {
    return this.reduceList;
  }

  /** The sender's session this decoder holds a table for. */
  get session(): string | undefined {
    return this.sessionId;
  }

  /**
   * Read a frame. Its key definitions are absorbed even when the caller then discards the values
   * (a late frame), so the table stays in step with the sender. Throws `WireFormatError`.
   */
  decode(data: Uint8Array): DecodedFrame {
    try {
      return this.read(data);
    } catch (error) {
      if (error instanceof WireFormatError) throw error;
      // Whatever else a corrupted frame trips over is still a malformed frame, never a crash.
      throw new WireFormatError(`the frame cannot be read (${describeError(error)})`);
    }
  }

  /**
   * The decoded states of a frame as `KeyState`s, sorted by key unless `sort` is false (a caller
   * that merges them with `mergeRankKeyStates`, which sorts its result, skips the sort).
   */
  toKeyStates(frame: DecodedFrame, sort = true): KeyState[] {
    return frameKeyStates(frame, sort);
  }

  /** Check the states a JSON or SKETCH section carries against their reductions' shapes (their ids known). */
  private checkStates(rawIds: ArrayLike<number>, states: readonly AccumulatorState[]): void {
    const checker = new ReceivedStates();
    for (let i = 0; i < states.length; i++) {
      const id = rawIds[i] ?? 0;
      if (id >= this.keyList.length) continue;
      const problem = checker.problem(this.keyList[id], this.reduceList[id], states[i]);
      if (problem !== undefined)
        throw new WireFormatError(
          `the state of "${this.keyList[id] ?? ""}" is refused: ${problem.problem}`,
          problem.kind,
        );
    }
  }

  private read(data: Uint8Array): DecodedFrame {
    const cursor = FrameCursor.over(data);
    const { view } = cursor;
    const version = view.getUint8(4);
    if (version !== WIRE_VERSION)
      throw new WireFormatError(`wire version ${version}; this process reads version ${WIRE_VERSION}`);
    const flags = view.getUint8(5);
    const sectionCount = view.getUint16(6, true);
    const base = view.getUint32(8, true);
    const newKeys = view.getUint32(12, true);
    const headerLength = view.getUint32(16, true);
    cursor.need(FIXED, headerLength, "the header");
    const header = parseHeader(cursor.bytes(FIXED, headerLength));
    if (header.session !== this.sessionId) this.startSession(header.session);
    cursor.offset = FIXED + headerLength;
    const tableGap = this.absorbDefinitions(base, readKeyDefinitions(cursor, newKeys));
    cursor.offset = pad8(cursor.offset);
    const idBytes = (flags & FLAG_U32_IDS) !== 0 ? 4 : 2;
    const countBytes = (flags & FLAG_F64_COUNTS) !== 0 ? 8 : 4;
    const sections: DecodedSection[] = [];
    let unknownKeys = 0;
    let stateCount = 0;
    for (let s = 0; s < sectionCount; s++) {
      const raw = readSection(cursor, idBytes, countBytes);
      const known = this.knownStates(raw);
      checkColumns(raw.kind, known.counts, raw.b, countBytes === 8);
      if (raw.states.length > 0) this.checkStates(raw.rawIds, raw.states);
      stateCount += raw.rawIds.length;
      unknownKeys += raw.rawIds.length - known.ids.length;
      sections.push(known);
    }
    if (cursor.offset !== cursor.end)
      throw new WireFormatError(`the frame is ${cursor.end} bytes but its sections end at byte ${cursor.offset}`);
    const table: KeyTable = { session: header.session, keys: this.keyList, reduces: this.reduceList };
    return { header, sections, table, unknownKeys, stateCount, tableGap: tableGap || unknownKeys > 0 };
  }

  /**
   * A new session (a restarted sender, or a table reset): a fresh table from id 0 (new arrays, so
   * frames decoded earlier keep theirs).
   */
  private startSession(session: string): void {
    this.sessionId = session;
    this.keyList = [];
    this.reduceList = [];
    this.kindList = [];
  }

  /**
   * Continue the table with a frame's definitions from id `base`; ones already held (a resent
   * frame) are skipped. Returns true when `base` is past the table's end (a frame was lost): then
   * nothing is added.
   */
  private absorbDefinitions(base: number, definitions: ReadonlyArray<readonly [string, string]>): boolean {
    const keys = this.keyList;
    if (base > keys.length) return true;
    if (base + definitions.length > this.maxKeys) {
      throw new WireFormatError(
        `the sender's key table would hold ${base + definitions.length} keys; this receiver holds at most ${this.maxKeys} per sender (RANKSCOPE_MAX_KEYS)`,
      );
    }
    for (let i = keys.length - base; i < definitions.length; i++) {
      const [key, reduce] = definitions[i] ?? ["", ""];
      keys.push(key);
      this.reduceList.push(reduce);
      this.kindList.push(sectionKindForReduce(reduce));
    }
    return false;
  }

  /**
   * A section's states whose key this decoder knows (after a lost frame some may be unknown: the
   * caller counts them), with each id's reduction checked against the section's kind.
   */
  private knownStates(raw: RawSection): DecodedSection {
    const { kind, rawIds, rawCounts, a, b, states } = raw;
    const m = rawIds.length;
    const keys = this.keyList;
    const kinds = this.kindList;
    const ids = new Uint32Array(m);
    const counts = new Float64Array(m);
    let known = 0;
    for (let i = 0; i < m; i++) {
      const id = rawIds[i] ?? 0;
      if (id >= keys.length) continue;
      if (kind !== SectionKind.Json && kinds[id] !== kind)
        throw new WireFormatError(
          `the state of "${keys[id] ?? ""}" (${this.reduceList[id] ?? ""}) is in a section of kind ${kind}, which does not carry that reduction's states`,
          "invalidState",
        );
      ids[known] = id;
      counts[known] = rawCounts[i] ?? 0;
      known++;
    }
    if (known === m) return { kind, ids, counts, a, b, states };
    const kept: number[] = [];
    for (let i = 0; i < m; i++) if ((rawIds[i] ?? 0) < keys.length) kept.push(i);
    const pick = (column: Float64Array<ArrayBufferLike>): Float64Array<ArrayBufferLike> =>
      column.length === 0 ? column : Float64Array.from(kept, (i) => column[i] ?? 0);
    return {
      kind,
      ids: ids.slice(0, known),
      counts: counts.slice(0, known),
      a: pick(a),
      b: pick(b),
      states: states.filter((_s, i) => (rawIds[i] ?? 0) < keys.length),
    };
  }
}

/**
 * A frame's bytes and the reading position in them. The frame is read from an 8-aligned copy so
 * the columns can be read as typed arrays (`new Uint8Array(x)` copies; a Node Buffer's `slice`
 * would not).
 */
class FrameCursor {
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
function readKeyDefinitions(cursor: FrameCursor, count: number): Array<[string, string]> {
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
interface RawSection {
  readonly kind: SectionKind;
  readonly rawIds: Uint32Array<ArrayBufferLike> | Uint16Array<ArrayBufferLike>;
  readonly rawCounts: Float64Array<ArrayBufferLike> | Uint32Array<ArrayBufferLike>;
  readonly a: Float64Array<ArrayBufferLike>;
  readonly b: Float64Array<ArrayBufferLike>;
  readonly states: AccumulatorState[];
}

/** The section at the cursor (its header, ids, counts, then values or states); the cursor moves past it. */
function readSection(cursor: FrameCursor, idBytes: number, countBytes: number): RawSection {
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
    cursor.offset = readSketches(buffer, start, cursor.offset, m, rawCounts, states, need);
  } else {
    const columns = kind === SectionKind.Moments ? 2 : 1;
    need(cursor.offset, m * 8 * columns, "a section's values");
    a = cursor.f64(m);
    if (columns === 2) b = cursor.f64(m);
  }
  return { kind, rawIds, rawCounts, a, b, states };
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
function checkColumns(
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

/**
 * The decoded states of a frame as `KeyState`s, sorted by key unless `sort` is false (a caller
 * that merges them with `mergeRankKeyStates`, which sorts its result, skips the sort).
 */
export function frameKeyStates(frame: DecodedFrame, sort = true): KeyState[] {
  const out: KeyState[] = [];
  const { keys, reduces } = frame.table;
  for (const section of frame.sections) {
    const { ids, counts, a, b } = section;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] ?? 0;
      const key = keys[id] ?? "";
      const reduce = reduces[id] ?? "";
      const count = counts[i] ?? 0;
      let state: AccumulatorState;
      switch (section.kind) {
        case SectionKind.Sum:
          state = sumState(count, a[i] ?? 0);
          break;
        case SectionKind.Extreme:
          state = extremeState(count, a[i] ?? 0);
          break;
        case SectionKind.Moments:
          state = momentsState(count, a[i] ?? 0, b[i] ?? 0);
          break;
        default:
          state = section.states[i] ?? { v: 1, count: 0 };
      }
      out.push({ key, reduce, state });
    }
  }
  if (sort) out.sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
  return out;
}

/** The version-1 state of MEAN/SUM (`SumState`), of MAX/MIN (`ExtremeState`), of STD (`MomentsState`). */
export const sumState = (count: number, sum: number): AccumulatorState & { readonly sum: number } => ({
  v: 1,
  count,
  sum,
});
export const extremeState = (count: number, value: number): AccumulatorState & { readonly value: number } => ({
  v: 1,
  count,
  value,
});
export const momentsState = (
  count: number,
  mean: number,
  m2: number,
): AccumulatorState & { readonly mean: number; readonly m2: number } => ({ v: 1, count, mean, m2 });

function utf8(bytes: Uint8Array, what: string): string {
  try {
    return utf8Decoder.decode(bytes);
  } catch {
    throw new WireFormatError(`${what} is not valid UTF-8`);
  }
}
