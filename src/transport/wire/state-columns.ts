/**
 * A frame's states in columns, as the encoder (`encoder.ts`) gathers them before laying the frame
 * out: per state its key id and section kind, count and one or two numbers (SUM, EXTREME,
 * MOMENTS), or the state itself (JSON, SKETCH: its record's bytes counted). One instance is reused from frame to frame.
 */
import type { QuantilesState } from "../../core/accumulators/quantiles.js";
import type { AccumulatorState } from "../../core/reduce.js";
import { isSketchState, sketchRecordSize } from "./sketch.js";
import { isSketchReduce, SectionKind } from "./format.js";

/** A frame's states in columns, before they are laid out (reused from frame to frame). */
export class StateColumns {
  n = 0;
  ids = new Uint32Array(0);
  kinds = new Uint8Array(0);
  counts = new Float64Array(0);
  a = new Float64Array(0);
  b = new Float64Array(0);
  readonly perKind = [0, 0, 0, 0, 0, 0];
  json: AccumulatorState[] = [];
  sketches: QuantilesState[] = [];
  /** Bytes of every sketch's record (`sketchRecordSize`). */
  sketchBytes = 0;
  f64Counts = false;

  start(capacity: number): void {
    if (this.ids.length < capacity) {
      const size = Math.max(capacity, this.ids.length * 2);
      this.ids = new Uint32Array(size);
      this.kinds = new Uint8Array(size);
      this.counts = new Float64Array(size);
      this.a = new Float64Array(size);
      this.b = new Float64Array(size);
    }
    this.n = 0;
    this.perKind.fill(0);
    this.json = [];
    this.sketches = [];
    this.sketchBytes = 0;
    this.f64Counts = false;
  }

  /** One state of a binary layout. */
  push(id: number, kind: SectionKind, count: number, a: number, b: number): void {
    const i = this.n++;
    this.ids[i] = id;
    this.kinds[i] = kind;
    this.counts[i] = count;
    this.a[i] = a;
    this.b[i] = b;
    this.perKind[kind] = (this.perKind[kind] ?? 0) + 1;
    if (!(count >= 0 && count <= 0xffffffff && Number.isInteger(count))) this.f64Counts = true;
  }

  /**
   * One state as its binary layout when its shape is exactly the known one, else for the JSON
   * section. The built-in reductions cannot be replaced (`registerReduce` refuses their names) and
   * their version-1 states are exactly these fields, so only the fields written are checked
   * (enumerating each state's fields cost more than the rest of the encoding); another state
   * version goes to the JSON section.
   */
  pushState(id: number, reduce: string, state: AccumulatorState): void {
    const c = state.count;
    if (state.v === 1 && typeof c === "number") {
      if (reduce === "mean" || reduce === "sum") {
        if ("sum" in state && typeof state.sum === "number") return this.push(id, SectionKind.Sum, c, state.sum, 0);
      } else if (reduce === "max" || reduce === "min") {
        if ("value" in state && typeof state.value === "number")
          return this.push(id, SectionKind.Extreme, c, state.value, 0);
      } else if (reduce === "std") {
        if ("mean" in state && "m2" in state && typeof state.mean === "number" && typeof state.m2 === "number")
          return this.push(id, SectionKind.Moments, c, state.mean, state.m2);
      } else if (isSketchReduce(reduce) && isSketchState(state)) {
        // A sketch whose counts are not all safe integers goes to the JSON section below.
        const bytes = sketchRecordSize(state);
        if (bytes >= 0) {
          this.sketches.push(state);
          this.sketchBytes += bytes;
          return this.push(id, SectionKind.Sketch, c, 0, 0);
        }
      }
    }
    const i = this.n++;
    this.ids[i] = id;
    this.kinds[i] = SectionKind.Json;
    this.perKind[SectionKind.Json] = (this.perKind[SectionKind.Json] ?? 0) + 1;
    this.json.push(state);
  }
}
