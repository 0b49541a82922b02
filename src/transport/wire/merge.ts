/**
 * Merging decoded frames column by column: a host agent merges its ranks' flush answers straight
 * from the frames' typed arrays into one slot per key, without a state object per rank·key.
 *
 * The result is exactly what `mergeRankKeyStates` gives for the same states in the same order —
 * bit for bit: sums add from 0 in rank order, extremes compare from ±Infinity, moments combine
 * with Chan's formula from an empty state, one state alone passes through unchanged, and every
 * other reduction (sketches, samples, user reductions, the JSON section) is merged by its own
 * definition. A key recorded with two reductions (or sent in two layouts) in one flush is not
 * merged here: the caller then merges the states themselves, which names the ranks in conflict.
 */
import type { KeyState } from "../../core/key-state.js";
import { describeError, reportError } from "../../core/diagnostics.js";
import type { AccumulatorState } from "../../core/reduce.js";
import { chanM2, chanMean } from "../../core/accumulators/moments.js";
import { Sketch, type QuantilesState } from "../../core/accumulators/quantiles.js";
import { getReduceDefinition } from "../../core/registry.js";
import type { DecodedFrame } from "./decoder.js";
import { extremeState, momentsState, sumState } from "./decoder.js";
import { isSketchReduce, SectionKind, sectionKindForReduce } from "./format.js";
import { isSketchState } from "./sketch.js";
import { foldSketchRecord, RecordReader, sketchRecordState, type SketchRecords } from "./sketch-records.js";

/** How the binary layouts of the built-in reductions merge (any other pairing is merged by its definition). */
const enum Op {
  Sum = 1,
  Max = 2,
  Min = 3,
  Moments = 4,
  Json = 5,
  /** Quantile sketches, from a SKETCH section's records or from states: summed into a `Sketch` per slot. */
  Sketch = 6,
}

function opOf(kind: SectionKind, reduce: string): Op | undefined {
  switch (kind) {
    case SectionKind.Sum:
      return reduce === "mean" || reduce === "sum" ? Op.Sum : undefined;
    case SectionKind.Extreme:
      return reduce === "max" ? Op.Max : reduce === "min" ? Op.Min : undefined;
    case SectionKind.Moments:
      return reduce === "std" ? Op.Moments : undefined;
    case SectionKind.Sketch:
      return isSketchReduce(reduce) ? Op.Sketch : undefined;
    default:
      return Op.Json;
  }
}

/** Merges the frames of one flush into one state per key; reused from flush to flush. */
export class FrameMerger {
  /** Slot by reduce name, then key. */
  private readonly slotsByReduce = new Map<string, Map<string, number>>();
  private slotKeys: string[] = [];
  private slotReduces: string[] = [];
  /** Slot ids by a key table's id (-1: not looked up yet), per table. */
  private readonly tableSlots = new WeakMap<readonly string[], Int32Array>();
  // Per slot, this flush: its merge, how many states, the running merge from empty, the first state.
  private op = new Uint8Array(0);
  private n = new Uint32Array(0);
  private count = new Float64Array(0);
  private a = new Float64Array(0);
  private b = new Float64Array(0);
  private firstCount = new Float64Array(0);
  private firstA = new Float64Array(0);
  private firstB = new Float64Array(0);
  private json: Array<AccumulatorState[] | undefined> = [];
  /** Op.Sketch: the slot's first state (its records, at index `firstA`, or the state), and the sketch the states are added into (kept from flush to flush). */
  private firstSketch: Array<SketchRecords | QuantilesState | undefined> = [];
  private sketches: Array<Sketch | undefined> = [];
  private readonly reader = new RecordReader();
  private touched: number[] = [];
  /** A key came in two reductions or two layouts: `result` gives up. */
  private conflict = false;

  /** Start a flush. */
  begin(): void {
    for (const slot of this.touched) {
      this.n[slot] = 0;
      this.json[slot] = undefined;
      this.firstSketch[slot] = undefined;
    }
    this.touched = [];
    this.conflict = false;
  }

  /** Number of (key, reduce) slots held (a caller bounds its memory by starting a new merger past a limit). */
  get size(): number {
    return this.slotKeys.length;
  }

  /**
   * Merge one answer's states given as objects (a JSON answer, or late answers carried into this
   * one), in the same rank order as frames: a version-1 state of a built-in arithmetic reduction
   * joins its column, any other state its key's list (merged by its definition).
   */
  addStates(states: readonly KeyState[]): void {
    for (const { key, reduce, state } of states) this.foldState(this.slotOf(key, reduce), reduce, state);
  }

  /** Fold one state given as an object into its slot: into its layout's columns (or sketch) when it is a version-1 state of one. */
  private foldState(slot: number, reduce: string, state: AccumulatorState): void {
    const kind = sectionKindForReduce(reduce);
    if (state.v === 1 && typeof state.count === "number") {
      if (kind === SectionKind.Sum && "sum" in state && typeof state.sum === "number")
        return this.fold(slot, kind, state.count, state.sum, 0, undefined);
      if (kind === SectionKind.Extreme && "value" in state && typeof state.value === "number")
        return this.fold(slot, kind, state.count, state.value, 0, undefined);
      if (
        kind === SectionKind.Moments &&
        "mean" in state &&
        "m2" in state &&
        typeof state.mean === "number" &&
        typeof state.m2 === "number"
      )
        return this.fold(slot, kind, state.count, state.mean, state.m2, undefined);
      if (kind === SectionKind.Sketch && isSketchState(state)) return this.foldSketch(slot, state.count, state, 0);
    }
    this.fold(slot, SectionKind.Json, state.count, 0, 0, state);
  }

  /** Merge one frame's states (call in the order `mergeRankKeyStates` would see the ranks). */
  add(frame: DecodedFrame): void {
    const { keys, reduces } = frame.table;
    let slots = this.tableSlots.get(keys);
    if (slots === undefined || slots.length < keys.length) {
      const grown = new Int32Array(Math.max(keys.length, (slots?.length ?? 0) * 2, 16)).fill(-1);
      if (slots !== undefined) grown.set(slots);
      slots = grown;
      this.tableSlots.set(keys, slots);
    }
    for (const section of frame.sections) {
      const { kind, ids, counts, a, b, sketches } = section;
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i] ?? 0;
        let slot = slots[id] ?? -1;
        if (slot < 0) {
          slot = this.slotOf(keys[id] ?? "", reduces[id] ?? "");
          slots[id] = slot;
        }
        if (sketches !== undefined) this.foldSketch(slot, counts[i] ?? 0, sketches, i);
        else if (kind !== SectionKind.Json) this.fold(slot, kind, counts[i] ?? 0, a[i] ?? 0, b[i] ?? 0, undefined);
        else {
          const state = section.states[i];
          if (state !== undefined) this.foldState(slot, reduces[id] ?? "", state);
        }
      }
    }
  }

  /**
   * Fold one quantile sketch into its slot: record `j` of `source` (a SKETCH section's), or the
   * state `source`. The first is kept as it is (one state alone passes through unchanged); from
   * the second on they are added in order into the slot's `Sketch`, reset first — exactly
   * `sketchOf(states)`, the definition's merge, without a state object per answer.
   */
  private foldSketch(slot: number, count: number, source: SketchRecords | QuantilesState, j: number): void {
    if (this.enter(slot, SectionKind.Sketch, count, j, 0) === undefined) return;
    const seen = (this.n[slot] ?? 1) - 1;
    if (seen === 0) {
      this.firstSketch[slot] = source;
      return;
    }
    let sketch = this.sketches[slot];
    if (seen === 1) {
      if (sketch === undefined) this.sketches[slot] = sketch = new Sketch();
      else sketch.reset();
      this.addSketch(sketch, this.firstSketch[slot], this.firstA[slot] ?? 0, this.firstCount[slot] ?? 0);
    }
    if (sketch !== undefined) this.addSketch(sketch, source, j, count);
  }

  private addSketch(
    sketch: Sketch,
    source: SketchRecords | QuantilesState | undefined,
    j: number,
    count: number,
  ): void {
    if (source === undefined) return;
    if ("at" in source) foldSketchRecord(sketch, source, j, count, this.reader);
    else sketch.addState(source);
  }

  /** The merged sketch of a slot: its one state as it came, or the states added. */
  private sketchResult(slot: number): QuantilesState | undefined {
    if (this.n[slot] !== 1) return this.sketches[slot]?.toState();
    const first = this.firstSketch[slot];
    if (first === undefined || !("at" in first)) return first;
    return sketchRecordState(first, this.firstA[slot] ?? 0, this.firstCount[slot] ?? 0, this.reader);
  }

  /** Fold one state (its layout `kind`, count, columns a and b, or the state itself for JSON) into its slot. */
  private fold(
    slot: number,
    kind: SectionKind,
    c: number,
    x: number,
    y: number,
    jsonState: AccumulatorState | undefined,
  ): void {
    const op = this.enter(slot, kind, c, x, y);
    switch (op) {
      case Op.Sum:
        this.a[slot] = (this.a[slot] ?? 0) + x;
        this.count[slot] = (this.count[slot] ?? 0) + c;
        break;
      case Op.Max:
        this.a[slot] = Math.max(this.a[slot] ?? 0, x);
        this.count[slot] = (this.count[slot] ?? 0) + c;
        break;
      case Op.Min:
        this.a[slot] = Math.min(this.a[slot] ?? 0, x);
        this.count[slot] = (this.count[slot] ?? 0) + c;
        break;
      case Op.Moments: {
        // Chan et al., as `mergeMoments` (which skips empty states).
        if (c === 0) break;
        const before = this.count[slot] ?? 0;
        const total = before + c;
        const mean = this.a[slot] ?? 0;
        const delta = x - mean;
        this.a[slot] = chanMean(mean, before, delta, x, c, total);
        this.b[slot] = chanM2(this.b[slot] ?? 0, y, delta, before, c, total);
        this.count[slot] = total;
        break;
      }
      case Op.Json: {
        const state = jsonState;
        if (state === undefined) break;
        const list = this.json[slot];
        if (list === undefined) this.json[slot] = [state];
        else list.push(state);
        break;
      }
    }
  }

  /**
   * Count one more state of the slot (its layout `kind`, count, columns a and b) and return the
   * slot's merge; undefined (and the merge gives up) when the slot already holds states of
   * another reduction or layout.
   */
  private enter(slot: number, kind: SectionKind, c: number, x: number, y: number): Op | undefined {
    const seen = this.n[slot] ?? 0;
    const op = seen === 0 ? opOf(kind, this.slotReduces[slot] ?? "") : (this.op[slot] ?? Op.Json);
    if (op === undefined || (seen > 0 && opOf(kind, this.slotReduces[slot] ?? "") !== op)) {
      this.conflict = true;
      return undefined;
    }
    if (seen === 0) {
      this.touched.push(slot);
      this.op[slot] = op;
      this.firstCount[slot] = c;
      this.firstA[slot] = x;
      this.firstB[slot] = y;
      this.count[slot] = 0;
      this.a[slot] = op === Op.Max ? -Infinity : op === Op.Min ? Infinity : 0;
      this.b[slot] = 0;
    }
    this.n[slot] = seen + 1;
    return op;
  }

  /**
   * The merged states, sorted by key; undefined when a key came with two reductions or layouts
   * (merge the states with `mergeRankKeyStates` instead: it reports the conflict by rank).
   */
  result(): KeyState[] | undefined {
    if (this.conflict) return undefined;
    const keys = this.slotKeys;
    const order = this.touched.slice().sort((x, y) => {
      const kx = keys[x] ?? "";
      const ky = keys[y] ?? "";
      return kx < ky ? -1 : kx > ky ? 1 : 0;
    });
    for (let i = 1; i < order.length; i++) if (keys[order[i] ?? 0] === keys[order[i - 1] ?? 0]) return undefined;
    const merged: KeyState[] = [];
    for (const slot of order) {
      const key = keys[slot] ?? "";
      const reduce = this.slotReduces[slot] ?? "";
      const single = this.n[slot] === 1;
      const count = single ? (this.firstCount[slot] ?? 0) : (this.count[slot] ?? 0);
      const a = single ? (this.firstA[slot] ?? 0) : (this.a[slot] ?? 0);
      switch (this.op[slot]) {
        case Op.Sum:
          merged.push({ key, reduce, state: sumState(count, a) });
          break;
        case Op.Max:
        case Op.Min:
          merged.push({ key, reduce, state: extremeState(count, a) });
          break;
        case Op.Moments:
          merged.push({
            key,
            reduce,
            state: momentsState(count, a, single ? (this.firstB[slot] ?? 0) : (this.b[slot] ?? 0)),
          });
          break;
        default: {
          try {
            const state = this.definedResult(slot, reduce);
            if (state !== undefined) merged.push({ key, reduce, state });
          } catch (error) {
            reportError(
              `reduce.merge:${key}`,
              `could not merge metric "${key}" (reduce "${reduce}"): ${describeError(error)}`,
            );
          }
        }
      }
    }
    return merged;
  }

  /** A slot merged by its reduction's definition (`merge`), or summed into a sketch; throws what the definition throws. */
  private definedResult(slot: number, reduce: string): AccumulatorState | undefined {
    const definition = getReduceDefinition(reduce);
    if (this.op[slot] === Op.Sketch) return this.sketchResult(slot);
    const states = this.json[slot] ?? [];
    const first = states[0];
    return first === undefined ? undefined : states.length === 1 ? first : definition.merge(states);
  }

  private slotOf(key: string, reduce: string): number {
    let byKey = this.slotsByReduce.get(reduce);
    if (byKey === undefined) {
      byKey = new Map();
      this.slotsByReduce.set(reduce, byKey);
    }
    let slot = byKey.get(key);
    if (slot === undefined) {
      slot = this.slotKeys.length;
      byKey.set(key, slot);
      this.slotKeys.push(key);
      this.slotReduces.push(reduce);
      if (slot >= this.n.length) this.grow(Math.max(64, this.n.length * 2));
    }
    return slot;
  }

  private grow(size: number): void {
    const f64 = (old: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> => {
      const next = new Float64Array(size);
      next.set(old);
      return next;
    };
    const op = new Uint8Array(size);
    op.set(this.op);
    this.op = op;
    const n = new Uint32Array(size);
    n.set(this.n);
    this.n = n;
    this.count = f64(this.count);
    this.a = f64(this.a);
    this.b = f64(this.b);
    this.firstCount = f64(this.firstCount);
    this.firstA = f64(this.firstA);
    this.firstB = f64(this.firstB);
  }
}
