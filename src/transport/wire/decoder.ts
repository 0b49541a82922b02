/**
 * The receiver's side of the wire format (see `format.ts`): the sender's key table, and frame
 * decoding into columns (typed arrays over the frame's own bytes where they are aligned). Reading
 * the frame's bytes is `frame-reader.ts`.
 */
import type { KeyState } from "../../core/key-state.js";
import type { AccumulatorState } from "../../core/reduce.js";
import { ReceivedStates } from "../../core/key-state-check.js";
import {
  FIXED,
  FLAG_F64_COUNTS,
  FLAG_U32_IDS,
  pad8,
  parseHeader,
  SectionKind,
  sectionKindForReduce,
  WIRE_VERSION,
  WireFormatError,
  type FrameHeader,
  type KeyTable,
} from "./format.js";
import { describeError } from "../../core/diagnostics.js";
import { checkColumns, FrameCursor, readKeyDefinitions, readSection, type RawSection } from "./frame-reader.js";
import { sketchRecordState, type SketchRecords } from "./sketch-records.js";

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
  /** JSON: the states, in the order of `ids`. */
  readonly states: readonly AccumulatorState[];
  /** SKETCH: the states' records, read in place (`sketchRecordState`, `foldSketchRecord`), in the order of `ids`. */
  readonly sketches?: SketchRecords;
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
    const { kind, rawIds, rawCounts, a, b, states, sketches } = raw;
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
    if (known === m) return { kind, ids, counts, a, b, states, ...(sketches === undefined ? {} : { sketches }) };
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
      ...(sketches === undefined
        ? {}
        : { sketches: { ...sketches, at: Uint32Array.from(kept, (i) => sketches.at[i] ?? 0) } }),
    };
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
        case SectionKind.Sketch:
          state = section.sketches === undefined ? { v: 1, count: 0 } : sketchRecordState(section.sketches, i, count);
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
