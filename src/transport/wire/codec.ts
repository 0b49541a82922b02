/**
 * The compact binary wire format for accumulator states (wire version 1).
 *
 * A sender (a host agent; a rank answering its agent) keeps a `StateEncoder` per receiver; the
 * receiver keeps a `StateDecoder` per sender. Keys travel once: the first frame that carries a key defines its id
 * (the key table), later frames name it by id. A frame carries only the keys it has states for —
 * what was recorded since the last flush. Numbers travel as little-endian typed arrays, one
 * section per state layout, so the receiver reads columns and can merge them without building an
 * object per key.
 *
 * Byte layout (every offset from the frame's first byte; numbers little-endian):
 *
 * ```
 *  0  u8[4]  magic "RSWF"
 *  4  u8     wire version (1)
 *  5  u8     flags: bit 0 = key ids are u32 (else u16), bit 1 = counts are f64 (else u32)
 *  6  u16    number of sections S
 *  8  u32    table base B: ids below B were defined by earlier frames of this session
 * 12  u32    new keys K (ids B .. B+K-1, defined in this frame)
 * 16  u32    header length H
 * 20  u8[H]  header: JSON (protocol envelope: proto, v, run, t, session, from, and the message's fields)
 *     then K key definitions: u16 length + UTF-8 key, u8 length + UTF-8 reduce name
 *     then S sections, each starting at a multiple of 8:
 *       u8 kind, u8[3] zero, u32 n,
 *       ids[n] (u16|u32), padded to 8; counts[n] (u32|f64), padded to 8;
 *       kind 1 SUM (mean, sum):      f64 sum[n]
 *       kind 2 EXTREME (max, min):   f64 value[n]
 *       kind 3 MOMENTS (std):        f64 mean[n], f64 m2[n]
 *       kind 4 JSON (anything else): u32 length L, u8[L] JSON array of the states (encodeMessage), padded to 8
 * ```
 *
 * A MEAN/SUM key costs 2 + 4 + 8 = 14 bytes per frame (u16 ids, u32 counts); MAX/MIN the same.
 * States of another version, or of any other reduction, go to the JSON section, so every
 * reduction — quantile sketches, histograms, samples, user reductions — arrives as JSON carries it
 * (NaN and ±Infinity included): merges on the receiver stay exact.
 *
 * Malformed input (wrong magic, a section running past the end, an unknown kind, an id outside the
 * table) throws `WireFormatError`; the receiver counts it (`transport.malformed`) and ignores it.
 */
import type { KeyState } from "../../core/collector.js";
import { decodeMessage, encodeMessage } from "../../core/json.js";
import type { AccumulatorState } from "../../core/reduce.js";

/** The wire version this build writes and reads. */
export const WIRE_VERSION = 1;
const MAGIC = [0x52, 0x53, 0x57, 0x46] as const; // "RSWF"
const FIXED = 20;
const FLAG_U32_IDS = 1;
const FLAG_F64_COUNTS = 2;

/** Section kinds (the state layouts with a binary encoding). */
export const enum SectionKind {
  Sum = 1,
  Extreme = 2,
  Moments = 3,
  Json = 4,
}

/** A frame that cannot be read. */
export class WireFormatError extends Error {
  override name = "WireFormatError";
}

/** True if `data` starts like a wire frame (and not like a JSON protocol message). */
export function isWireFrame(data: unknown): data is Uint8Array {
  return data instanceof Uint8Array && data.length >= 4 && data[0] === MAGIC[0] && data[1] === MAGIC[1] && data[2] === MAGIC[2] && data[3] === MAGIC[3];
}

/** The header of a frame: the protocol envelope and the message's own fields. */
export interface FrameHeader {
  readonly proto: string;
  readonly v: number;
  readonly run: string;
  readonly t: string;
  /** The sender's key-table session: a new session starts with an empty table. */
  readonly session: string;
  readonly [field: string]: unknown;
}

/** One decoded frame: its header and its states, in columns. */
export interface DecodedFrame {
  readonly header: FrameHeader;
  readonly sections: readonly DecodedSection[];
  /** States whose key id this decoder does not know (a frame of the session was lost): not decoded, counted here. */
  readonly unknownKeys: number;
  /** Number of states in the frame. */
  readonly stateCount: number;
  /** True when the frame continues a table this decoder does not fully hold: ask the sender to resend it (`StateEncoder.reset`). */
  readonly tableGap: boolean;
}

/** One section of a decoded frame. `ids` index the decoder's `keys`/`reduces`. */
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
}

const EMPTY_F64: Float64Array<ArrayBufferLike> = new Float64Array(0);

/**
 * Which binary layout a state has, or JSON when it is not a known one; for a binary one, its count
 * and values are written at `i` of `count`, `a`, `b` (each field is read once). The built-in
 * reductions cannot be replaced (`registerReduce` refuses their names) and their version-1 states
 * are exactly these fields, so only the fields written are checked (enumerating each state's
 * fields cost more than the rest of the encoding); another state version goes to the JSON section.
 */
function readState(reduce: string, state: AccumulatorState, i: number, count: Float64Array, a: Float64Array, b: Float64Array): SectionKind {
  const s = state as unknown as { v: unknown; count: unknown; sum?: unknown; value?: unknown; mean?: unknown; m2?: unknown };
  const c = s.count;
  if (s.v !== 1 || typeof c !== "number") return SectionKind.Json;
  let kind: SectionKind = SectionKind.Json;
  if (reduce === "mean" || reduce === "sum") {
    const x = s.sum;
    if (typeof x === "number") {
      a[i] = x;
      kind = SectionKind.Sum;
    }
  } else if (reduce === "max" || reduce === "min") {
    const x = s.value;
    if (typeof x === "number") {
      a[i] = x;
      kind = SectionKind.Extreme;
    }
  } else if (reduce === "std") {
    const x = s.mean;
    const y = s.m2;
    if (typeof x === "number" && typeof y === "number") {
      a[i] = x;
      b[i] = y;
      kind = SectionKind.Moments;
    }
  }
  count[i] = c;
  return kind;
}

const pad8 = (n: number): number => (n + 7) & ~7;
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** The sender's side of one connection: interns keys and writes frames. */
export class StateEncoder {
  /** Key ids by reduce name, then key (two lookups on the collector's own strings: no string is built per key). */
  private readonly ids = new Map<string, Map<string, number>>();
  private size = 0;
  /** The last frame's states and their ids (see `encode`). */
  private lastStates: readonly KeyState[] = [];
  private lastIds = new Uint32Array(0);
  /** Key definitions not yet written in a frame. */
  private pending: Array<{ key: string; reduce: string }> = [];
  private defined = 0;
  private sessionId: string;

  constructor(session?: string) {
    this.sessionId = session ?? newSession();
  }

  /** The current key-table session. */
  get session(): string {
    return this.sessionId;
  }

  /** Number of keys interned so far. */
  get tableSize(): number {
    return this.size;
  }

  /** Forget the table and start a new session (the receiver lost it, or is a new receiver). */
  reset(): void {
    this.ids.clear();
    this.size = 0;
    this.lastStates = [];
    this.lastIds = new Uint32Array(0);
    this.pending = [];
    this.defined = 0;
    this.sessionId = newSession();
  }

  /**
   * Write one frame: `header` (the envelope and message fields; `session` is added) and `states`.
   * Keys seen for the first time are defined in this frame.
   */
  encode(header: Omit<FrameHeader, "session">, states: readonly KeyState[]): Uint8Array {
    const n = states.length;
    const ids = new Uint32Array(n);
    const kinds = new Uint8Array(n);
    const perKind = [0, 0, 0, 0, 0];
    const counts = new Float64Array(n);
    const va = new Float64Array(n);
    const vb = new Float64Array(n);
    let f64Counts = false;
    const last = this.lastStates;
    const lastIds = this.lastIds;
    for (let i = 0; i < n; i++) {
      const { key, reduce, state } = states[i] as KeyState;
      const before = last[i];
      // The same key at the same place as in the last frame (a loop recording the same keys each
      // step): its id without a lookup. Otherwise the table.
      ids[i] = before !== undefined && before.key === key && before.reduce === reduce ? (lastIds[i] as number) : this.idOf(key, reduce);
      const kind = readState(reduce, state, i, counts, va, vb);
      kinds[i] = kind;
      perKind[kind] = (perKind[kind] as number) + 1;
      const c = counts[i] as number;
      if (kind !== SectionKind.Json && !(c >= 0 && c <= 0xffffffff && Number.isInteger(c))) f64Counts = true;
    }
    const wideIds = this.size > 0xffff;
    const idBytes = wideIds ? 4 : 2;
    const countBytes = f64Counts ? 8 : 4;
    const headerBytes = encoder.encode(JSON.stringify({ ...header, session: this.sessionId }));
    const base = this.defined;
    const definitions = this.pending.map(({ key, reduce }) => ({ key: encoder.encode(key), reduce: encoder.encode(reduce) }));
    for (const d of definitions) {
      if (d.key.length > 0xffff || d.reduce.length > 0xff) throw new RangeError(`a metric key (or reduce name) is too long for the wire format (${d.key.length} bytes)`);
    }
    // JSON sections hold arbitrary states: encode them first to know their length.
    let jsonText: Uint8Array | undefined;
    if ((perKind[SectionKind.Json] as number) > 0) {
      const jsonStates: AccumulatorState[] = [];
      for (let i = 0; i < n; i++) if (kinds[i] === SectionKind.Json) jsonStates.push((states[i] as KeyState).state);
      jsonText = encoder.encode(encodeMessage(jsonStates));
    }
    let size = FIXED + headerBytes.length;
    for (const d of definitions) size += 3 + d.key.length + d.reduce.length;
    size = pad8(size);
    let sections = 0;
    for (let kind = SectionKind.Sum; kind <= SectionKind.Json; kind++) {
      const m = perKind[kind] as number;
      if (m === 0) continue;
      sections++;
      size += 8 + pad8(m * idBytes) + pad8(m * countBytes);
      if (kind === SectionKind.Json) size += pad8(4 + (jsonText as Uint8Array).length);
      else size += m * 8 * (kind === SectionKind.Moments ? 2 : 1);
    }
    const buffer = new ArrayBuffer(size);
    const bytes = new Uint8Array(buffer);
    const view = new DataView(buffer);
    bytes.set(MAGIC, 0);
    view.setUint8(4, WIRE_VERSION);
    view.setUint8(5, (wideIds ? FLAG_U32_IDS : 0) | (f64Counts ? FLAG_F64_COUNTS : 0));
    view.setUint16(6, sections, true);
    view.setUint32(8, base, true);
    view.setUint32(12, definitions.length, true);
    view.setUint32(16, headerBytes.length, true);
    bytes.set(headerBytes, FIXED);
    let offset = FIXED + headerBytes.length;
    for (const d of definitions) {
      view.setUint16(offset, d.key.length, true);
      bytes.set(d.key, offset + 2);
      offset += 2 + d.key.length;
      view.setUint8(offset, d.reduce.length);
      bytes.set(d.reduce, offset + 1);
      offset += 1 + d.reduce.length;
    }
    offset = pad8(offset);
    for (let kind = SectionKind.Sum; kind <= SectionKind.Json; kind++) {
      const m = perKind[kind] as number;
      if (m === 0) continue;
      view.setUint8(offset, kind);
      view.setUint32(offset + 4, m, true);
      offset += 8;
      const idArray = wideIds ? new Uint32Array(buffer, offset, m) : new Uint16Array(buffer, offset, m);
      offset += pad8(m * idBytes);
      const countArray = f64Counts ? new Float64Array(buffer, offset, m) : new Uint32Array(buffer, offset, m);
      offset += pad8(m * countBytes);
      if (kind === SectionKind.Json) {
        let j = 0;
        for (let i = 0; i < n; i++) if (kinds[i] === kind) idArray[j++] = ids[i] as number;
        const text = jsonText as Uint8Array;
        view.setUint32(offset, text.length, true);
        bytes.set(text, offset + 4);
        offset += pad8(4 + text.length);
        continue;
      }
      const a = new Float64Array(buffer, offset, m);
      offset += m * 8;
      const b = kind === SectionKind.Moments ? new Float64Array(buffer, offset, m) : undefined;
      if (b !== undefined) offset += m * 8;
      let j = 0;
      for (let i = 0; i < n; i++) {
        if (kinds[i] !== kind) continue;
        idArray[j] = ids[i] as number;
        countArray[j] = counts[i] as number;
        a[j] = va[i] as number;
        if (b !== undefined) b[j] = vb[i] as number;
        j++;
      }
    }
    this.defined += definitions.length;
    this.pending = [];
    this.lastStates = states;
    this.lastIds = ids;
    return bytes;
  }

  private idOf(key: string, reduce: string): number {
    let byKey = this.ids.get(reduce);
    if (byKey === undefined) {
      byKey = new Map();
      this.ids.set(reduce, byKey);
    }
    let id = byKey.get(key);
    if (id === undefined) {
      id = this.size++;
      byKey.set(key, id);
      this.pending.push({ key, reduce });
    }
    return id;
  }
}

/** The receiver's side of one connection: the sender's key table, and frame decoding. */
export class StateDecoder {
  /** Keys by id, in the current session. */
  readonly keys: string[] = [];
  /** Reduce names by id. */
  readonly reduces: string[] = [];
  private sessionId: string | undefined;

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
      throw new WireFormatError(`the frame cannot be read (${error instanceof Error ? error.message : String(error)})`);
    }
  }

  private read(data: Uint8Array): DecodedFrame {
    if (!isWireFrame(data)) throw new WireFormatError("not a rankscope wire frame (bad magic)");
    if (data.length < FIXED) throw new WireFormatError(`frame of ${data.length} bytes is shorter than its fixed header (${FIXED})`);
    // Work on an 8-aligned copy so the columns can be read as typed arrays (`new Uint8Array(x)`
    // copies; a Node Buffer's `slice` would not).
    const buffer = data.byteOffset % 8 === 0 ? data.buffer : new Uint8Array(data).buffer;
    const start = data.byteOffset % 8 === 0 ? data.byteOffset : 0;
    const view = new DataView(buffer, start, data.length);
    const end = data.length;
    const version = view.getUint8(4);
    if (version !== WIRE_VERSION) throw new WireFormatError(`wire version ${version}; this process reads version ${WIRE_VERSION}`);
    const flags = view.getUint8(5);
    const sectionCount = view.getUint16(6, true);
    const base = view.getUint32(8, true);
    const newKeys = view.getUint32(12, true);
    const headerLength = view.getUint32(16, true);
    const need = (offset: number, bytes: number, what: string): void => {
      if (offset + bytes > end) throw new WireFormatError(`${what} runs past the end of the frame (${offset + bytes} > ${end} bytes)`);
    };
    need(FIXED, headerLength, "the header");
    const header = parseHeader(new Uint8Array(buffer, start + FIXED, headerLength));
    if (header.session !== this.sessionId) {
      // A new session (a restarted sender, or a table reset): a fresh table from id 0.
      this.sessionId = header.session;
      this.keys.length = 0;
      this.reduces.length = 0;
    }
    let offset = FIXED + headerLength;
    const definitions: Array<[string, string]> = [];
    for (let i = 0; i < newKeys; i++) {
      need(offset, 2, "a key definition");
      const keyLength = view.getUint16(offset, true);
      need(offset + 2, keyLength + 1, "a key definition");
      const key = utf8(new Uint8Array(buffer, start + offset + 2, keyLength), "a key");
      offset += 2 + keyLength;
      const reduceLength = view.getUint8(offset);
      need(offset + 1, reduceLength, "a reduce name");
      const reduce = utf8(new Uint8Array(buffer, start + offset + 1, reduceLength), "a reduce name");
      offset += 1 + reduceLength;
      if (key.length === 0 || reduce.length === 0) throw new WireFormatError("a key definition has an empty key or reduce name");
      definitions.push([key, reduce]);
    }
    // Definitions continue the table; ones we already hold (a resent frame) are skipped.
    const tableGap = base > this.keys.length;
    if (!tableGap) {
      for (let i = this.keys.length - base; i < definitions.length; i++) {
        const [key, reduce] = definitions[i] as [string, string];
        this.keys.push(key);
        this.reduces.push(reduce);
      }
    }
    offset = pad8(offset);
    const idBytes = (flags & FLAG_U32_IDS) !== 0 ? 4 : 2;
    const countBytes = (flags & FLAG_F64_COUNTS) !== 0 ? 8 : 4;
    const sections: DecodedSection[] = [];
    let unknownKeys = 0;
    let stateCount = 0;
    for (let s = 0; s < sectionCount; s++) {
      need(offset, 8, "a section header");
      const kind = view.getUint8(offset) as SectionKind;
      const m = view.getUint32(offset + 4, true);
      if (kind < SectionKind.Sum || kind > SectionKind.Json) throw new WireFormatError(`unknown section kind ${kind as number}`);
      offset += 8;
      need(offset, pad8(m * idBytes) + pad8(m * countBytes), "a section's ids and counts");
      const rawIds = idBytes === 4 ? new Uint32Array(buffer, start + offset, m) : new Uint16Array(buffer, start + offset, m);
      offset += pad8(m * idBytes);
      const rawCounts = countBytes === 8 ? new Float64Array(buffer, start + offset, m) : new Uint32Array(buffer, start + offset, m);
      offset += pad8(m * countBytes);
      let a = EMPTY_F64;
      let b = EMPTY_F64;
      let states: AccumulatorState[] = [];
      if (kind === SectionKind.Json) {
        need(offset, 4, "a JSON section's length");
        const length = view.getUint32(offset, true);
        need(offset + 4, length, "a JSON section");
        let parsed: unknown;
        try {
          parsed = decodeMessage(decoder.decode(new Uint8Array(buffer, start + offset + 4, length)));
        } catch {
          throw new WireFormatError("a JSON section is not valid JSON");
        }
        if (!Array.isArray(parsed) || parsed.length !== m) throw new WireFormatError(`a JSON section must hold ${m} states`);
        for (const state of parsed as unknown[]) {
          const st = state as Record<string, unknown> | null;
          if (st === null || typeof st !== "object" || typeof st["v"] !== "number" || typeof st["count"] !== "number") throw new WireFormatError("a JSON state must carry v and count");
        }
        states = parsed as AccumulatorState[];
        offset += pad8(4 + length);
      } else {
        const columns = kind === SectionKind.Moments ? 2 : 1;
        need(offset, m * 8 * columns, "a section's values");
        a = new Float64Array(buffer, start + offset, m);
        offset += m * 8;
        if (columns === 2) {
          b = new Float64Array(buffer, start + offset, m);
          offset += m * 8;
        }
      }
      // Keep only states whose key we know (after a lost frame some may be unknown: counted).
      const ids = new Uint32Array(m);
      const counts = new Float64Array(m);
      let known = 0;
      for (let i = 0; i < m; i++) {
        const id = rawIds[i] as number;
        if (id >= this.keys.length) {
          unknownKeys++;
          continue;
        }
        ids[known] = id;
        counts[known] = rawCounts[i] as number;
        known++;
      }
      stateCount += m;
      if (known === m) {
        sections.push({ kind, ids, counts, a, b, states });
        continue;
      }
      const keep = (i: number): boolean => (rawIds[i] as number) < this.keys.length;
      const filter = (column: Float64Array<ArrayBufferLike>): Float64Array<ArrayBufferLike> => (column.length === 0 ? column : Float64Array.from(Array.prototype.filter.call(column, (_v: number, i: number) => keep(i)) as number[]));
      sections.push({ kind, ids: ids.slice(0, known), counts: counts.slice(0, known), a: filter(a), b: filter(b), states: states.filter((_s, i) => keep(i)) });
    }
    if (offset !== end) throw new WireFormatError(`the frame is ${end} bytes but its sections end at byte ${offset}`);
    return { header, sections, unknownKeys, stateCount, tableGap: tableGap || unknownKeys > 0 };
  }

  /**
   * The decoded states of a frame as `KeyState`s, sorted by key unless `sort` is false (a caller
   * that merges them with `mergeRankKeyStates`, which sorts its result, skips the sort).
   */
  toKeyStates(frame: DecodedFrame, sort = true): KeyState[] {
    const out: KeyState[] = [];
    for (const section of frame.sections) {
      const { ids, counts, a, b } = section;
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i] as number;
        const key = this.keys[id] as string;
        const reduce = this.reduces[id] as string;
        const count = counts[i] as number;
        let state: AccumulatorState;
        switch (section.kind) {
          case SectionKind.Sum:
            state = { v: 1, count, sum: a[i] } as AccumulatorState;
            break;
          case SectionKind.Extreme:
            state = { v: 1, count, value: a[i] } as AccumulatorState;
            break;
          case SectionKind.Moments:
            state = { v: 1, count, mean: a[i], m2: b[i] } as AccumulatorState;
            break;
          default:
            state = section.states[i] as AccumulatorState;
        }
        out.push({ key, reduce, state });
      }
    }
    if (sort) out.sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
    return out;
  }
}

function parseHeader(bytes: Uint8Array): FrameHeader {
  let header: FrameHeader;
  try {
    header = JSON.parse(decoder.decode(bytes)) as FrameHeader;
  } catch {
    throw new WireFormatError("the header is not valid UTF-8 JSON");
  }
  if (header === null || typeof header !== "object" || typeof header.session !== "string") throw new WireFormatError("the header carries no session");
  return header;
}

/**
 * Read only the header of a frame (to pick the `StateDecoder` of its sender, named in the header,
 * before decoding it). Throws `WireFormatError`.
 */
export function readFrameHeader(data: Uint8Array): FrameHeader {
  if (!isWireFrame(data)) throw new WireFormatError("not a rankscope wire frame (bad magic)");
  if (data.length < FIXED) throw new WireFormatError(`frame of ${data.length} bytes is shorter than its fixed header (${FIXED})`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const headerLength = view.getUint32(16, true);
  if (FIXED + headerLength > data.length) throw new WireFormatError(`the header runs past the end of the frame (${FIXED + headerLength} > ${data.length} bytes)`);
  return parseHeader(data.subarray(FIXED, FIXED + headerLength));
}

function utf8(bytes: Uint8Array, what: string): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new WireFormatError(`${what} is not valid UTF-8`);
  }
}

let sessions = 0;
function newSession(): string {
  sessions++;
  return `${process.pid.toString(36)}.${Date.now().toString(36)}.${sessions.toString(36)}.${Math.floor(Math.random() * 0x7fffffff).toString(36)}`;
}
