/**
 * The stream ring: a single-producer single-consumer queue of fixed-size slots in a
 * SharedArrayBuffer, written by the recording thread and drained by the writer worker.
 *
 * The producer owns `head`, the consumer owns `tail`; both are ever-increasing int32 counters
 * (wrapping is harmless: only their difference is used, and capacity is far below 2^31). A slot is
 * written first and published by the `Atomics.store` of head, so the consumer never sees half a
 * slot; it frees slots by storing tail only after it has read them. A full ring drops the record
 * and counts it: the producer never waits, never allocates, never does I/O.
 *
 * Layout (bytes):
 * ```
 *   0  int32 head            (producer)
 *  64  int32 tail            (consumer; own cache line)
 * 128  float64 ringFull      (records dropped because the ring was full; producer only)
 * 256  slots: capacity × (6 + values) float64 words
 *        word 0  timestamp, ms since the epoch
 *        word 1  value (metric records)
 *        word 2  step (metric records)
 *        word 3  index (probes)
 *        word 4  int32 key id | int32 kind + dtype
 *        word 5  length of the probed array
 *        word 6… first `values` values of the probed array
 * ```
 */

/** Int32 index of head in the ring header. */
const HEAD = 0;
/** Int32 index of tail in the ring header. */
export const TAIL = 16;
/** Float64 index of the ring-full drop counter. */
const RING_FULL = 16;
/** Bytes before the first slot. */
const HEADER_BYTES = 256;
/** Float64 words of a slot before the probe values. */
const SLOT_FIXED_WORDS = 6;
/** Float64 index of the first slot. */
const FIRST_SLOT = HEADER_BYTES / 8;

/** What a slot holds. */
export const KIND_METRIC = 1;
export const KIND_PROBE = 2;

/** Element types a probe can come from, as written in the `dtype` field. */
const DTYPES = ["number", "f32", "f64"] as const;
export type Dtype = (typeof DTYPES)[number];
const DTYPE_NUMBER = 0;
const DTYPE_F32 = 1;
const DTYPE_F64 = 2;

/**
 * The process-wide control words shared by every ring's producer, the writer and the main thread.
 * Int32 indices into `control`.
 */
export const CONTROL = {
  /** Bumped (then notified) by anyone who wants the writer to look now. */
  WAKE: 0,
  /** Non-zero: drain everything, write the final line and stop; the value is a StopReason code. */
  STOP: 1,
  /** Set to 1 by the writer when it has stopped. */
  DONE: 2,
  /** Flush requests (counter) and the last one completed. */
  FLUSH_REQ: 3,
  FLUSH_DONE: 4,
  /** 1 while some backend wants decoded batches (`logStream`). */
  WANT_BATCHES: 5,
  /** Batches posted to the main thread, and batches it has taken (bounds memory in between). */
  POSTED: 6,
  CONSUMED: 7,
  /** Records per batch that wake the writer early. */
  BATCH: 8,
  /** 1 while the writer advances COUNTERS.CLOCK every millisecond (records are flowing). */
  CLOCK_LIVE: 9,
  /** 1 once the writer's file thread runs (the file's writes are made there). */
  FILE_THREAD: 10,
} as const;
/** Float64 indices (in the same control buffer, after its first 16 int32 words) of the writer's counters. */
export const COUNTERS = {
  WRITTEN: 8,
  WRITE_FAILED: 9,
  BACKEND_DROPPED: 10,
  /** Date.now() as last written by the writer: the producers' clock while CLOCK_LIVE is 1. */
  CLOCK: 11,
} as const;
/** How often the writer advances the shared clock while records flow, ms. */
export const CLOCK_TICK_MS = 1;
/** How long after the last record the writer stops ticking the clock, ms. */
export const CLOCK_IDLE_MS = 250;
/** Bytes of the control buffer. */
const CONTROL_BYTES = 128;

/** A float64 index of `COUNTERS`. */
type CounterIndex = (typeof COUNTERS)[keyof typeof COUNTERS];

/**
 * The writer's counters in a control buffer, read and added to by name. The buffer is fixed in
 * size and every index is inside it, so a read is always a number.
 */
export class SharedCounters {
  private readonly f64: Float64Array;

  constructor(control: Int32Array) {
    this.f64 = new Float64Array(control.buffer, 0, CONTROL_BYTES / 8);
  }

  get(index: CounterIndex): number {
    return this.f64[index] ?? 0;
  }

  set(index: CounterIndex, value: number): void {
    this.f64[index] = value;
  }

  add(index: CounterIndex, n: number): void {
    this.f64[index] = this.get(index) + n;
  }
}

/** Why the writer stopped, as stored in CONTROL.STOP. */
export const STOP_REASONS = ["", "stop", "exit", "beforeExit", "SIGINT", "SIGTERM", "uncaughtException"] as const;
export type StopReason = Exclude<(typeof STOP_REASONS)[number], "">;

/** A ring's buffer and shape, as handed to the writer. */
export interface RingShape {
  readonly buffer: SharedArrayBuffer;
  /** Slots; a power of two. */
  readonly capacity: number;
  /** Probe values per slot. */
  readonly values: number;
}

/** Typed views over a ring's buffer. */
export class RingView {
  readonly i32: Int32Array;
  readonly f64: Float64Array;
  readonly capacity: number;
  readonly mask: number;
  readonly values: number;
  /** Float64 words per slot. */
  readonly stride: number;

  constructor(shape: RingShape) {
    this.i32 = new Int32Array(shape.buffer);
    this.f64 = new Float64Array(shape.buffer);
    this.capacity = shape.capacity;
    this.mask = shape.capacity - 1;
    this.values = shape.values;
    this.stride = SLOT_FIXED_WORDS + shape.values;
  }

  /** Float64 index of slot `sequence`'s first word. */
  slotBase(sequence: number): number {
    return FIRST_SLOT + (sequence & this.mask) * this.stride;
  }

  /** Records published and not yet taken by the consumer. */
  pending(): number {
    return (Atomics.load(this.i32, HEAD) - Atomics.load(this.i32, TAIL)) | 0;
  }

  /** Records dropped because the ring was full. */
  get ringFull(): number {
    return this.f64[RING_FULL] ?? 0;
  }
}

/** Allocate a ring with at least `capacity` slots (rounded up to a power of two). */
export function createRing(capacity: number, values: number): RingShape {
  let slots = 1;
  while (slots < capacity) slots *= 2;
  const bytes = HEADER_BYTES + slots * (SLOT_FIXED_WORDS + values) * 8;
  const buffer = new SharedArrayBuffer(bytes);
  // Touch every page now, so the hot path never takes a page fault on a slot it writes first.
  new Uint8Array(buffer).fill(0);
  return { buffer, capacity: slots, values };
}

/** A fresh control buffer. */
export function createControl(batchSize: number): Int32Array {
  const control = new Int32Array(new SharedArrayBuffer(CONTROL_BYTES));
  control[CONTROL.BATCH] = batchSize;
  return control;
}

/**
 * The writing end of one ring. Only one thread may own it. Every method is allocation-free and
 * returns at once: a full ring counts the record in `ringFull` and drops it.
 */
export class RingProducer {
  private head: number;
  private readonly i32: Int32Array;
  private readonly f64: Float64Array;
  private readonly mask: number;
  private readonly capacity: number;
  private readonly stride: number;
  private readonly values: number;
  private readonly clock: Float64Array;
  /** Records that wake the writer (fixed when the stream starts). */
  private readonly batch: number;
  private lastClockRequest = 0;

  constructor(
    shape: RingShape,
    private readonly control: Int32Array,
  ) {
    this.clock = new Float64Array(control.buffer);
    const view = new RingView(shape);
    this.i32 = view.i32;
    this.f64 = view.f64;
    this.mask = view.mask;
    this.capacity = view.capacity;
    this.stride = view.stride;
    this.values = view.values;
    this.head = Atomics.load(this.i32, HEAD);
    this.batch = control[CONTROL.BATCH] ?? 0;
  }

  /**
   * Milliseconds since the epoch, cheaply: while records flow the writer advances a shared clock
   * every millisecond and this is one memory read (Date.now() costs tens of ns on many VMs). When
   * the writer is idle it is Date.now(), and the writer is asked (at most every 10 ms) to tick.
   */
  now(): number {
    if (this.control[CONTROL.CLOCK_LIVE] === 1) return this.clock[COUNTERS.CLOCK] ?? 0;
    const now = Date.now();
    if (now - this.lastClockRequest >= 10) this.requestClock(now);
    return now;
  }

  /** Ask the writer to tick the shared clock (it is idle or busy writing). */
  private requestClock(now: number): void {
    this.lastClockRequest = now;
    Atomics.add(this.control, CONTROL.WAKE, 1);
    Atomics.notify(this.control, CONTROL.WAKE);
  }

  /**
   * Append one metric value, stamped now (or at `timestamp`); false if the ring was full (the
   * record is counted as dropped).
   */
  pushValue(keyId: number, value: number, step: number, timestamp?: number): boolean {
    const head = this.head;
    const fill = (head - Atomics.load(this.i32, TAIL)) | 0;
    if (fill >= this.capacity) {
      this.f64[RING_FULL] = (this.f64[RING_FULL] ?? 0) + 1;
      return false;
    }
    const f64 = this.f64;
    const base = FIRST_SLOT + (head & this.mask) * this.stride;
    // Stamped here rather than by the caller, and each source stored by its own branch: a double
    // passed or returned across a call, or merged with a call's result, would be boxed.
    if (timestamp !== undefined) f64[base] = timestamp;
    else if (this.control[CONTROL.CLOCK_LIVE] === 1) f64[base] = this.clock[COUNTERS.CLOCK] ?? 0;
    else {
      // Date.now() stored straight into the slot: returned from a helper it would be boxed.
      const now = Date.now();
      f64[base] = now;
      if (now - this.lastClockRequest >= 10) this.requestClock(now);
    }
    f64[base + 1] = value;
    f64[base + 2] = step;
    const word = (base + 4) * 2;
    this.i32[word] = keyId;
    this.i32[word + 1] = KIND_METRIC;
    this.publish(head, fill);
    return true;
  }

  /**
   * Append a probe: the first `values` entries of `data` (zeros beyond its length), its length, its
   * element type and the caller's index, stamped now (or at `timestamp`). False if the ring was full.
   */
  pushProbe(keyId: number, data: ArrayLike<number>, index: number, timestamp?: number): boolean {
    const head = this.head;
    const fill = (head - Atomics.load(this.i32, TAIL)) | 0;
    if (fill >= this.capacity) {
      this.f64[RING_FULL] = (this.f64[RING_FULL] ?? 0) + 1;
      return false;
    }
    const f64 = this.f64;
    const base = FIRST_SLOT + (head & this.mask) * this.stride;
    const length = data.length;
    const n = length < this.values ? length : this.values;
    const first = base + SLOT_FIXED_WORDS;
    for (let i = 0; i < n; i++) f64[first + i] = data[i] ?? Number.NaN; // a hole reads as NaN, as a Float64Array stores undefined
    if (timestamp !== undefined) f64[base] = timestamp;
    else if (this.control[CONTROL.CLOCK_LIVE] === 1) f64[base] = this.clock[COUNTERS.CLOCK] ?? 0;
    else {
      // Date.now() stored straight into the slot: returned from a helper it would be boxed.
      const now = Date.now();
      f64[base] = now;
      if (now - this.lastClockRequest >= 10) this.requestClock(now);
    }
    f64[base + 3] = index;
    f64[base + 5] = length;
    const dtype = data instanceof Float32Array ? DTYPE_F32 : data instanceof Float64Array ? DTYPE_F64 : DTYPE_NUMBER;
    const word = (base + 4) * 2;
    this.i32[word] = keyId;
    this.i32[word + 1] = KIND_PROBE | (dtype << 4);
    this.publish(head, fill);
    return true;
  }

  /** Records dropped because the ring was full. */
  get ringFull(): number {
    return this.f64[RING_FULL] ?? 0;
  }

  /** Count `n` records lost before they could be pushed (a worker's values that waited for its ring). */
  countDropped(n: number): void {
    this.f64[RING_FULL] = (this.f64[RING_FULL] ?? 0) + n;
  }

  private publish(head: number, fill: number): void {
    const next = (head + 1) | 0;
    this.head = next;
    Atomics.store(this.i32, HEAD, next);
    // Wake the writer once per batch, when the fill crosses the batch size upwards — unless its
    // clock is live: then it looks every millisecond anyway, and a notify would cost this thread a
    // system call (a futex wake, microseconds on a VM) in the middle of the caller's loop.
    if (fill + 1 === this.batch && this.control[CONTROL.CLOCK_LIVE] !== 1) {
      Atomics.add(this.control, CONTROL.WAKE, 1);
      Atomics.notify(this.control, CONTROL.WAKE);
    }
  }
}

/** A decoded slot, as the writer reads it. Reused by the reader: copy what you keep. */
export interface SlotRecord {
  kind: number;
  keyId: number;
  timestamp: number;
  value: number;
  step: number;
  index: number;
  length: number;
  dtype: Dtype;
  /** Offset of the first probe value in `view.f64`; `count` values follow. */
  valuesAt: number;
  count: number;
}

/** Decode slot `sequence` of `view` into `out` (no allocation). */
export function readSlot(view: RingView, sequence: number, out: SlotRecord): SlotRecord {
  const base = view.slotBase(sequence);
  const f64 = view.f64;
  const word = (base + 4) * 2;
  const kindDtype = view.i32[word + 1] ?? 0;
  out.kind = kindDtype & 15;
  out.keyId = view.i32[word] ?? 0;
  out.timestamp = f64[base] ?? 0;
  out.value = f64[base + 1] ?? 0;
  out.step = f64[base + 2] ?? 0;
  out.index = f64[base + 3] ?? 0;
  out.length = f64[base + 5] ?? 0;
  out.dtype = DTYPES[kindDtype >> 4] ?? "number";
  out.valuesAt = base + SLOT_FIXED_WORDS;
  out.count = out.length < view.values ? out.length : view.values;
  return out;
}

/** An empty SlotRecord to decode into. */
export function emptySlot(): SlotRecord {
  return {
    kind: 0,
    keyId: 0,
    timestamp: 0,
    value: 0,
    step: 0,
    index: 0,
    length: 0,
    dtype: "number",
    valuesAt: 0,
    count: 0,
  };
}
