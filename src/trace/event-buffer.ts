/**
 * The perf tracer's in-memory buffer: events in columns (typed arrays for times and lanes, plain
 * arrays for names and args) instead of one object per event.
 *
 * Events wait here for up to a save interval. One object each would survive the young-generation
 * collections and be copied into the old generation — most of the cost of a span. Columns are
 * allocated once (grown by doubling up to the bound) and reused after every save.
 */

/** Event kinds, as stored. */
export const PH_COMPLETE = 0;
export const PH_INSTANT = 1;
export const PH_COUNTER = 2;

const INITIAL_CAPACITY = 1024;

export class EventBuffer {
  length = 0;
  private capacity = 0;
  private ph = new Uint8Array(0);
  private start = new Float64Array(0);
  private end = new Float64Array(0);
  private lane = new Int32Array(0);
  private readonly name: string[] = [];
  private readonly cat: string[] = [];
  private readonly args: (Record<string, unknown> | undefined)[] = [];
  private readonly error: (string | undefined)[] = [];

  constructor(readonly maxEvents: number) {}

  /** Append one event; false when the buffer is at its bound (the caller counts the drop). */
  push(
    ph: number,
    name: string,
    cat: string,
    args: Record<string, unknown> | undefined,
    start: number,
    end: number,
    lane: number,
    error: string | undefined,
  ): boolean {
    const i = this.length;
    if (i === this.capacity && !this.grow()) return false;
    this.ph[i] = ph;
    this.name[i] = name;
    this.cat[i] = cat;
    this.args[i] = args;
    this.start[i] = start;
    this.end[i] = end;
    this.lane[i] = lane;
    this.error[i] = error;
    this.length = i + 1;
    return true;
  }

  // Checked reads of event i (i < length): every column holds a value there.
  phAt(i: number): number {
    return this.ph[i] ?? PH_COMPLETE;
  }
  nameAt(i: number): string {
    return this.name[i] ?? "";
  }
  catAt(i: number): string {
    return this.cat[i] ?? "misc";
  }
  argsAt(i: number): Record<string, unknown> | undefined {
    return this.args[i];
  }
  startAt(i: number): number {
    return this.start[i] ?? 0;
  }
  endAt(i: number): number {
    return this.end[i] ?? 0;
  }
  laneAt(i: number): number {
    return this.lane[i] ?? 0;
  }
  errorAt(i: number): string | undefined {
    return this.error[i];
  }

  /** Forget every event (and drop the references to names and args, so they can be collected). */
  clear(): void {
    const n = this.length;
    for (let i = 0; i < n; i++) {
      this.args[i] = undefined;
      this.error[i] = undefined;
    }
    this.length = 0;
  }

  private grow(): boolean {
    if (this.capacity >= this.maxEvents) return false;
    const capacity = Math.min(this.maxEvents, Math.max(INITIAL_CAPACITY, this.capacity * 2));
    const copy = <T extends Uint8Array | Float64Array | Int32Array>(from: T, to: T): T => {
      to.set(from);
      return to;
    };
    this.ph = copy(this.ph, new Uint8Array(capacity));
    this.start = copy(this.start, new Float64Array(capacity));
    this.end = copy(this.end, new Float64Array(capacity));
    this.lane = copy(this.lane, new Int32Array(capacity));
    this.name.length = capacity;
    this.cat.length = capacity;
    this.args.length = capacity;
    this.error.length = capacity;
    this.capacity = capacity;
    return true;
  }
}
