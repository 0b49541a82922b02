/**
 * The sender's side of the wire format (see `format.ts`): interns keys and writes frames, either
 * from `KeyState`s (a host agent's merged states) or straight from a collector's accumulators (a
 * rank's flush answer: no state object per key, see `encodeTaking`). The states are gathered in
 * columns (`state-columns.ts`) before the frame is laid out.
 */
import { MaxAccumulator, MinAccumulator, StdAccumulator, SumAccumulator } from "../../core/accumulators/moments.js";
import type { MetricEntry } from "../../core/collector.js";
import type { KeyState } from "../../core/key-state.js";
import { encodeMessage } from "../../core/json.js";
import { writeSketches } from "./sketch.js";
import { StateColumns } from "./state-columns.js";
import {
  FIRST_KIND,
  FIXED,
  FLAG_F64_COUNTS,
  FLAG_U32_IDS,
  LAST_KIND,
  MAGIC,
  newSession,
  pad8,
  SectionKind,
  utf8Encoder,
  WIRE_VERSION,
  type FrameHeader,
  type KeyTable,
} from "./format.js";

/** A key not yet defined in a frame, its UTF-8 bytes checked against the length fields. */
interface PendingKey {
  readonly key: Uint8Array;
  readonly reduce: Uint8Array;
}

/** How a frame's sections are laid out: id and count widths, and the JSON section's text (empty when none). */
interface FrameLayout {
  readonly wideIds: boolean;
  readonly idBytes: number;
  readonly countBytes: number;
  readonly jsonText: Uint8Array;
}

/** Write the key definitions from `at` (u16 key length, key, u8 reduce length, reduce); returns the offset after them. */
function writeDefinitions(bytes: Uint8Array, view: DataView, at: number, definitions: readonly PendingKey[]): number {
  let offset = at;
  for (const d of definitions) {
    view.setUint16(offset, d.key.length, true);
    bytes.set(d.key, offset + 2);
    offset += 2 + d.key.length;
    view.setUint8(offset, d.reduce.length);
    bytes.set(d.reduce, offset + 1);
    offset += 1 + d.reduce.length;
  }
  return offset;
}

/** The sender's side of one connection: interns keys and writes frames. */
export class StateEncoder {
  /** Key ids by reduce name, then key (two lookups on the collector's own strings: no string is built per key). */
  private readonly ids = new Map<string, Map<string, number>>();
  /** The session's table (new arrays per session: a kept frame keeps its own). */
  private keys: string[] = [];
  private reduces: string[] = [];
  /** Wire ids by the collector's entry id (`MetricEntry.id`), -1 where unknown; checked against the table. */
  private entryIds = new Int32Array(0);
  /** The last frame's states and their ids (see `encode`). */
  private lastStates: readonly KeyState[] = [];
  private lastIds = new Uint32Array(0);
  /** Key definitions not yet written in a frame. */
  private pending: PendingKey[] = [];
  private defined = 0;
  private sessionId: string;
  private readonly columns = new StateColumns();
  /** The last entry array `encodeTaking` checked for keys too long. */
  private checkedEntries: readonly MetricEntry[] | undefined;

  constructor(session?: string) {
    this.sessionId = session ?? newSession();
  }

  /** The current key-table session. */
  get session(): string {
    return this.sessionId;
  }

  /** Number of keys interned so far. */
  get tableSize(): number {
    return this.keys.length;
  }

  /** Number of states in the last frame written. */
  get lastFrameStates(): number {
    return this.columns.n;
  }

  /** The current session's key table (what a receiver holds after every frame so far). */
  get table(): KeyTable {
    return { session: this.sessionId, keys: this.keys, reduces: this.reduces };
  }

  /** Forget the table and start a new session (the receiver lost it, or is a new receiver). */
  reset(): void {
    this.ids.clear();
    this.keys = [];
    this.reduces = [];
    this.entryIds.fill(-1);
    this.checkedEntries = undefined;
    this.lastStates = [];
    this.lastIds = new Uint32Array(0);
    this.pending = [];
    this.defined = 0;
    this.sessionId = newSession();
  }

  /**
   * Write one frame: `header` (the envelope and message fields; `session` is added) and `states`.
   * Keys seen for the first time are defined in this frame. Throws a RangeError for a key (or
   * reduce name) too long for the length fields.
   */
  encode(header: Omit<FrameHeader, "session">, states: readonly KeyState[]): Uint8Array {
    const n = states.length;
    const columns = this.columns;
    columns.start(n);
    const last = this.lastStates;
    const lastIds = this.lastIds;
    const ids = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const { key, reduce, state } = states[i] ?? missing();
      const before = last[i];
      // The same key at the same place as in the last frame (a loop recording the same keys each
      // step): its id without a lookup. Otherwise the table.
      const id =
        before !== undefined && before.key === key && before.reduce === reduce
          ? (lastIds[i] ?? this.idOf(key, reduce))
          : this.idOf(key, reduce);
      ids[i] = id;
      columns.pushState(id, reduce, state);
    }
    const frame = this.write(header);
    this.lastStates = states;
    this.lastIds = ids;
    return frame;
  }

  /**
   * Take the states of `entries` (a collector's, e.g. `Collector.entriesInKeyOrder()`) straight
   * into one frame, as `Collector.takeStates` followed by `encode` would, without a state object
   * per key: every entry with values is read and reset (so values recorded afterwards belong to
   * the next flush); entries without values are skipped. The arithmetic reductions are read from
   * their accumulators; any other reduction goes through its `state()` as before. If a new key is
   * too long for the format, this throws a RangeError before any entry is taken.
   */
  encodeTaking(header: Omit<FrameHeader, "session">, entries: readonly MetricEntry[]): Uint8Array {
    const columns = this.columns;
    columns.start(entries.length);
    // A collector's entry array is new after each new key: then every key not interned yet is
    // checked first (it may be too long), so nothing is taken from a frame that fails.
    if (entries !== this.checkedEntries) {
      for (const entry of entries) if (this.cachedId(entry) < 0) checkDefinition(entry.key, entry.reduce);
      this.checkedEntries = entries;
    }
    for (const entry of entries) {
      // Each accumulator class in a branch of its own, so every field read sees one shape.
      const accumulator = entry.accumulator;
      const reduce = entry.reduce;
      if (accumulator instanceof SumAccumulator) {
        const count = accumulator.count;
        if (count === 0) continue;
        if (reduce === "mean" || reduce === "sum")
          columns.push(this.idOfEntry(entry), SectionKind.Sum, count, accumulator.sum, 0);
        else columns.pushState(this.idOfEntry(entry), reduce, accumulator.state());
      } else if (accumulator instanceof MaxAccumulator) {
        const count = accumulator.count;
        if (count === 0) continue;
        if (reduce === "max") columns.push(this.idOfEntry(entry), SectionKind.Extreme, count, accumulator.max, 0);
        else columns.pushState(this.idOfEntry(entry), reduce, accumulator.state());
      } else if (accumulator instanceof MinAccumulator) {
        const count = accumulator.count;
        if (count === 0) continue;
        if (reduce === "min") columns.push(this.idOfEntry(entry), SectionKind.Extreme, count, accumulator.min, 0);
        else columns.pushState(this.idOfEntry(entry), reduce, accumulator.state());
      } else if (accumulator instanceof StdAccumulator) {
        const count = accumulator.count;
        if (count === 0) continue;
        if (reduce === "std")
          columns.push(this.idOfEntry(entry), SectionKind.Moments, count, accumulator.mean, accumulator.m2);
        else columns.pushState(this.idOfEntry(entry), reduce, accumulator.state());
      } else {
        if (accumulator.count === 0) continue;
        columns.pushState(this.idOfEntry(entry), reduce, accumulator.state());
      }
      accumulator.reset();
    }
    this.lastStates = [];
    return this.write(header);
  }

  /** Lay out the columns as one frame. */
  private write(header: Omit<FrameHeader, "session">): Uint8Array {
    const { perKind, f64Counts } = this.columns;
    const wideIds = this.keys.length > 0xffff;
    const headerBytes = utf8Encoder.encode(JSON.stringify({ ...header, session: this.sessionId }));
    const definitions = this.pending;
    // JSON sections hold arbitrary states: encode them first to know their length.
    const jsonText =
      this.columns.json.length > 0 ? utf8Encoder.encode(encodeMessage(this.columns.json)) : new Uint8Array(0);
    const layout: FrameLayout = { wideIds, idBytes: wideIds ? 4 : 2, countBytes: f64Counts ? 8 : 4, jsonText };
    let sections = 0;
    for (let kind = FIRST_KIND; kind <= LAST_KIND; kind++) if ((perKind[kind] ?? 0) > 0) sections++;
    const buffer = new ArrayBuffer(this.frameSize(headerBytes.length, definitions, layout));
    const bytes = new Uint8Array(buffer);
    const view = new DataView(buffer);
    bytes.set(MAGIC, 0);
    view.setUint8(4, WIRE_VERSION);
    view.setUint8(5, (wideIds ? FLAG_U32_IDS : 0) | (f64Counts ? FLAG_F64_COUNTS : 0));
    view.setUint16(6, sections, true);
    view.setUint32(8, this.defined, true);
    view.setUint32(12, definitions.length, true);
    view.setUint32(16, headerBytes.length, true);
    bytes.set(headerBytes, FIXED);
    let offset = pad8(writeDefinitions(bytes, view, FIXED + headerBytes.length, definitions));
    for (let kind = FIRST_KIND; kind <= LAST_KIND; kind++) {
      const m = perKind[kind] ?? 0;
      if (m > 0) offset = this.writeSection(bytes, view, offset, kind, m, layout);
    }
    this.defined += definitions.length;
    this.pending = [];
    this.columns.json = [];
    this.columns.sketches = [];
    return bytes;
  }

  /** The bytes of the frame `write` lays out: fixed header, JSON header, definitions, then each section. */
  private frameSize(headerLength: number, definitions: readonly PendingKey[], layout: FrameLayout): number {
    const { perKind } = this.columns;
    let size = FIXED + headerLength;
    for (const d of definitions) size += 3 + d.key.length + d.reduce.length;
    size = pad8(size);
    for (let kind = FIRST_KIND; kind <= LAST_KIND; kind++) {
      const m = perKind[kind] ?? 0;
      if (m === 0) continue;
      size += 8 + pad8(m * layout.idBytes) + pad8(m * layout.countBytes);
      if (kind === SectionKind.Json) size += pad8(4 + layout.jsonText.length);
      else if (kind === SectionKind.Sketch) size += pad8(4 + this.columns.sketchBytes);
      else size += m * 8 * (kind === SectionKind.Moments ? 2 : 1);
    }
    return size;
  }

  /** Write the section of `kind` (its `m` states picked from the columns in order) at `offset`; returns the offset after it. */
  private writeSection(
    bytes: Uint8Array<ArrayBuffer>,
    view: DataView,
    at: number,
    kind: SectionKind,
    m: number,
    layout: FrameLayout,
  ): number {
    const { n, ids, kinds, counts, a: va, b: vb } = this.columns;
    const buffer = bytes.buffer;
    let offset = at;
    view.setUint8(offset, kind);
    view.setUint32(offset + 4, m, true);
    offset += 8;
    const idArray = layout.wideIds ? new Uint32Array(buffer, offset, m) : new Uint16Array(buffer, offset, m);
    offset += pad8(m * layout.idBytes);
    const countArray =
      layout.countBytes === 8 ? new Float64Array(buffer, offset, m) : new Uint32Array(buffer, offset, m);
    offset += pad8(m * layout.countBytes);
    if (kind === SectionKind.Json) {
      let j = 0;
      for (let i = 0; i < n; i++) if (kinds[i] === kind) idArray[j++] = ids[i] ?? 0;
      view.setUint32(offset, layout.jsonText.length, true);
      bytes.set(layout.jsonText, offset + 4);
      return offset + pad8(4 + layout.jsonText.length);
    }
    const a = kind === SectionKind.Sketch ? undefined : new Float64Array(buffer, offset, m);
    if (a !== undefined) offset += m * 8;
    const b = kind === SectionKind.Moments ? new Float64Array(buffer, offset, m) : undefined;
    if (b !== undefined) offset += m * 8;
    let j = 0;
    for (let i = 0; i < n; i++) {
      if (kinds[i] !== kind) continue;
      idArray[j] = ids[i] ?? 0;
      countArray[j] = counts[i] ?? 0;
      if (a !== undefined) a[j] = va[i] ?? 0;
      if (b !== undefined) b[j] = vb[i] ?? 0;
      j++;
    }
    return kind === SectionKind.Sketch
      ? pad8(writeSketches(bytes, view, offset, this.columns.sketchBytes, this.columns.sketches))
      : offset;
  }

  /** The wire id of a collector entry if it is interned in this session (cached by its entry id), else -1. */
  private cachedId(entry: MetricEntry): number {
    const cached = entry.id < this.entryIds.length ? (this.entryIds[entry.id] ?? -1) : -1;
    return cached >= 0 && this.keys[cached] === entry.key && this.reduces[cached] === entry.reduce ? cached : -1;
  }

  /** The wire id of a collector entry, interned if new. */
  private idOfEntry(entry: MetricEntry): number {
    const cached = this.cachedId(entry);
    if (cached >= 0) return cached;
    const id = this.idOf(entry.key, entry.reduce);
    if (entry.id >= this.entryIds.length) {
      const grown = new Int32Array(Math.max(entry.id + 1, this.entryIds.length * 2, 64)).fill(-1);
      grown.set(this.entryIds);
      this.entryIds = grown;
    }
    this.entryIds[entry.id] = id;
    return id;
  }

  private idOf(key: string, reduce: string): number {
    let byKey = this.ids.get(reduce);
    if (byKey === undefined) {
      byKey = new Map();
      this.ids.set(reduce, byKey);
    }
    let id = byKey.get(key);
    if (id === undefined) {
      const definition = checkDefinition(key, reduce);
      id = this.keys.length;
      byKey.set(key, id);
      this.keys.push(key);
      this.reduces.push(reduce);
      this.pending.push(definition);
    }
    return id;
  }
}

/** A key's definition as written in a frame; throws a RangeError for a key (or reduce name) too long for its length field. */
function checkDefinition(key: string, reduce: string): PendingKey {
  const definition = { key: utf8Encoder.encode(key), reduce: utf8Encoder.encode(reduce) };
  if (definition.key.length > 0xffff || definition.reduce.length > 0xff)
    throw new RangeError(
      `a metric key (or reduce name) is too long for the wire format (${definition.key.length} bytes)`,
    );
  return definition;
}

function missing(): never {
  throw new Error("a state array with holes");
}
