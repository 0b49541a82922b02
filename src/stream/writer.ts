/**
 * The stream writer: a worker thread that drains the rings in batches and hands each batch to the
 * stream sinks — the per-rank JSONL file (lines formatted here as bytes; the blocking writes made
 * by its file thread while it formats the next batch, see file-thread.ts) and, when some backend
 * takes `logStream`, the main thread (decoded records, posted with a bound on batches in flight).
 *
 * It sleeps on `Atomics.wait` until a producer says a batch is ready, the flush interval passes, or
 * the main thread asks for a flush or a stop. A write error is reported once per kind (the main
 * thread prints it), the records it held are counted, and the file is reopened on a later cycle;
 * nothing is retained, so a failing disk costs no memory.
 */
import { closeSync, fstatSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { MessageChannel, parentPort, receiveMessageOnPort, workerData, type MessagePort, type Worker } from "node:worker_threads";
import type { StreamRecord } from "../core/metric.js";
import { LineBuffer } from "../core/line-buffer.js";
import { FILE_STATE, FILE_STATE_WORDS, type FileThreadData } from "./file-thread.js";
import { endLine, isoTime, StreamLineFormat, type StreamCounts } from "./format.js";
import { startStreamWorker } from "./workers.js";
import { CLOCK_IDLE_MS, CLOCK_TICK_MS, CONTROL, COUNTERS, emptySlot, KIND_METRIC, readSlot, RingView, STOP_REASONS, TAIL, type RingShape } from "./ring.js";

/** A ring as the writer is told about it. */
export interface RingAttachment {
  readonly shape: RingShape;
  /** Carries `{ id, name }` key registrations from the ring's producer. */
  readonly keys: MessagePort;
}

/** What the writer is started with. */
export interface WriterData {
  readonly control: Int32Array;
  readonly rings: readonly RingAttachment[];
  /** Batches, errors and acknowledgements to the main thread. */
  readonly events: MessagePort;
  readonly file: string;
  readonly flushMs: number;
  /** Make the writes on a file thread (the `fileThread` option). */
  readonly fileThread: boolean;
  readonly rank: number;
  readonly rankName: string;
  /** Batches the main thread may have untaken before further ones are dropped (and counted). */
  readonly maxBatchesInFlight: number;
}

/** Messages the writer posts on `events`. */
export type WriterEvent =
  | { readonly type: "batch"; readonly records: StreamRecord[] }
  | { readonly type: "error"; readonly code: string; readonly message: string }
  | { readonly type: "flushed"; readonly request: number }
  | { readonly type: "done"; readonly counts: StreamCounts };

/** Most lines joined into one write. */
const LINES_PER_WRITE = 4096;
/** Bytes after which a write is made whatever the line count (probes of many values are long). */
const BYTES_PER_WRITE = 1 << 20;
/**
 * Writes at least this long go to the file thread; shorter ones (a steady trickle, drained every
 * millisecond) are made here, which costs less than waking the file thread for each.
 */
const FILE_THREAD_BYTES = 128 * 1024;
/** Most records in one batch posted to the main thread. */
const RECORDS_PER_BATCH = 4096;

interface LiveRing {
  readonly view: RingView;
  readonly keys: MessagePort;
  readonly names: string[];
  /** Per key id, the encoded constant middle of its lines (made at the key's first record). */
  readonly middles: (Uint8Array | undefined)[];
}

class Writer {
  private readonly control: Int32Array;
  private readonly counters: Float64Array;
  private readonly rings: LiveRing[] = [];
  private readonly slot = emptySlot();
  private readonly format: StreamLineFormat;
  /**
   * Two buffers of lines: one is filled while the file thread writes the other. Shared memory, so
   * the file thread reads them in place.
   */
  private readonly buffers = [new LineBuffer(BYTES_PER_WRITE + (1 << 16), true), new LineBuffer(BYTES_PER_WRITE + (1 << 16), true)];
  /** The buffer being filled. */
  private current = 0;
  /** The file thread, once started; its state; what it knows of each buffer. */
  private fileThread: Worker | null = null;
  private readonly fileState = new Int32Array(new SharedArrayBuffer(FILE_STATE_WORDS * 4));
  private readonly sentBuffers: ArrayBufferLike[] = [];
  private bufferPort: MessagePort | null = null;
  private errorPort: MessagePort | null = null;
  /** Writes submitted to the file thread; the records of the one in flight (-1: none). */
  private requests = 0;
  private inFlightRecords = -1;
  private fd = -1;
  private lastOpenAttempt = -Infinity;
  private readonly reported = new Set<string>();
  private flushDone = 0;
  /** True while the producers read their time from the clock this writer ticks. */
  private clockLive = false;
  /** The file is a pipe or device, whose writes may block for long. */
  private blockingSink = false;
  /** One code for every write fault of the file, so a failing disk is one clear error, then counts. */
  private readonly errorCode: string;

  constructor(private readonly data: WriterData) {
    this.control = data.control;
    this.counters = new Float64Array(data.control.buffer);
    this.errorCode = `stream.write:${data.file}`;
    this.format = new StreamLineFormat(data.rank);
    for (const ring of data.rings) this.attach(ring);
  }

  /** The buffer being filled. */
  private get out(): LineBuffer {
    return this.buffers[this.current] as LineBuffer;
  }

  run(): void {
    if (this.data.fileThread) this.startFileThread();
    this.open(true);
    let lastDrain = Date.now();
    let lastActivity = -Infinity;
    let lastHeads = 0;
    let lastWake = 0;
    for (;;) {
      const wake = Atomics.load(this.control, CONTROL.WAKE);
      this.takeCommands();
      if (this.inFlightRecords >= 0 && Atomics.load(this.fileState, FILE_STATE.DONE) === this.requests) this.completeWrite();
      this.noteFileThread();
      const stop = Atomics.load(this.control, CONTROL.STOP);
      const flushRequest = Atomics.load(this.control, CONTROL.FLUSH_REQ);
      const batch = Atomics.load(this.control, CONTROL.BATCH);
      const pending = this.pending();
      const now = Date.now();
      // The producers' clock: ticked every millisecond while records flow, Date.now() otherwise.
      this.counters[COUNTERS.CLOCK] = now;
      // Active: records were published, or a producer asked for the clock (a wake while idle).
      const heads = this.headsSum();
      if (heads !== lastHeads || (wake !== lastWake && !this.clockLive)) lastActivity = now;
      lastHeads = heads;
      lastWake = wake;
      const live = now - lastActivity < CLOCK_IDLE_MS && stop === 0;
      if (live !== this.clockLive) {
        this.clockLive = live;
        Atomics.store(this.control, CONTROL.CLOCK_LIVE, live ? 1 : 0);
      }
      const due = now - lastDrain >= this.data.flushMs;
      if (due) this.checkFile();
      if (stop !== 0 || flushRequest !== this.flushDone || pending >= batch || (pending > 0 && due)) {
        this.drain();
        lastDrain = now;
        if (flushRequest !== this.flushDone) {
          this.completeWrite(); // a flush is done when its records are in the file
          this.flushDone = flushRequest;
          Atomics.store(this.control, CONTROL.FLUSH_DONE, flushRequest);
          Atomics.notify(this.control, CONTROL.FLUSH_DONE);
          this.post({ type: "flushed", request: flushRequest });
        }
        if (stop !== 0) break;
        continue;
      }
      if (due) lastDrain = now;
      const untilFlush = Math.max(1, this.data.flushMs - (now - lastDrain));
      Atomics.wait(this.control, CONTROL.WAKE, wake, this.clockLive ? Math.min(CLOCK_TICK_MS, untilFlush) : untilFlush);
    }
    this.finish(STOP_REASONS[Atomics.load(this.control, CONTROL.STOP)] ?? "stop");
  }

  private attach(ring: RingAttachment): void {
    this.rings.push({ view: new RingView(ring.shape), keys: ring.keys, names: [], middles: [] });
  }

  /** Rings attached after start (other producing threads). */
  private takeCommands(): void {
    if (parentPort === null) return;
    for (let m = receiveMessageOnPort(parentPort); m !== undefined; m = receiveMessageOnPort(parentPort)) {
      const command = m.message as { type: string; ring?: RingAttachment };
      if (command.type === "ring" && command.ring !== undefined) this.attach(command.ring);
    }
  }

  private headsSum(): number {
    let sum = 0;
    for (const ring of this.rings) sum = (sum + Atomics.load(ring.view.i32, 0)) | 0;
    return sum;
  }

  private pending(): number {
    let total = 0;
    for (const ring of this.rings) total += ring.view.pending();
    return total;
  }

  /** Write and hand on everything published so far. */
  private drain(): void {
    for (const ring of this.rings) this.drainRing(ring);
  }

  private drainRing(ring: LiveRing): void {
    const view = ring.view;
    const head = Atomics.load(view.i32, 0);
    // Keys are posted before the slots that use them are published, so they are queued by now.
    for (let m = receiveMessageOnPort(ring.keys); m !== undefined; m = receiveMessageOnPort(ring.keys)) {
      const { id, name } = m.message as { id: number; name: string };
      ring.names[id] = name;
    }
    const wantBatches = Atomics.load(this.control, CONTROL.WANT_BATCHES) === 1;
    let out = this.out;
    const format = this.format;
    let tail = Atomics.load(view.i32, TAIL);
    let lines = 0;
    let records: StreamRecord[] = [];
    const { rank, rankName } = this.data;
    const { f64, i32 } = view;
    while (tail !== head) {
      const base = view.slotBase(tail);
      const keyId = i32[(base + 4) * 2] as number;
      const middle = ring.middles[keyId] ?? this.middleFor(ring, keyId, i32[(base + 4) * 2 + 1] as number);
      if (((i32[(base + 4) * 2 + 1] as number) & 15) === KIND_METRIC) {
        // The common case, kept lean: read the three words and write the line's bytes.
        const timestamp = f64[base] as number;
        const value = f64[base + 1] as number;
        const step = f64[base + 2] as number;
        format.putMetric(out, timestamp, middle, value, step);
        if (wantBatches) records.push({ key: ring.names[keyId] ?? `#${keyId}`, value, step, timestamp, rank, rankName });
      } else {
        format.putProbe(out, middle, readSlot(view, tail, this.slot), f64);
      }
      lines++;
      tail = (tail + 1) | 0;
      // Keep the producers' clock moving while a long drain formats.
      if ((lines & 511) === 0) this.counters[COUNTERS.CLOCK] = Date.now();
      if (lines === LINES_PER_WRITE || out.length >= BYTES_PER_WRITE || tail === head) {
        // The slots are read: free them before the (possibly slow) write.
        Atomics.store(view.i32, TAIL, tail);
        this.write(lines);
        out = this.out;
        lines = 0;
      }
      if (records.length === RECORDS_PER_BATCH || (tail === head && records.length > 0)) {
        this.postBatch(records);
        records = [];
      }
    }
  }

  /** The encoded middle of a key's lines (metric or probe, as its first record says). */
  private middleFor(ring: LiveRing, keyId: number, kindWord: number): Uint8Array {
    const name = ring.names[keyId] ?? `#${keyId}`;
    const middle = (kindWord & 15) === KIND_METRIC ? this.format.metricMiddle(name) : this.format.probeMiddle(name);
    ring.middles[keyId] = middle;
    return middle;
  }

  private postBatch(records: StreamRecord[]): void {
    const inFlight = (Atomics.load(this.control, CONTROL.POSTED) - Atomics.load(this.control, CONTROL.CONSUMED)) | 0;
    if (inFlight >= this.data.maxBatchesInFlight) {
      this.counters[COUNTERS.BACKEND_DROPPED] = (this.counters[COUNTERS.BACKEND_DROPPED] as number) + records.length;
      this.report("stream.backendBehind", `stream: the main thread is not taking stream batches fast enough for logStream backends; records beyond ${this.data.maxBatchesInFlight} batches in flight are dropped for those backends and counted (the stream file still gets them)`);
      return;
    }
    Atomics.add(this.control, CONTROL.POSTED, 1);
    this.post({ type: "batch", records });
  }

  /**
   * Write the lines in `out` (`lines` records): hand a long write to the file thread and go on
   * filling the other buffer; make a short one (or any, until the file thread runs) here, after
   * the one in flight, so lines stay in order.
   */
  private write(lines: number): void {
    this.completeWrite();
    const out = this.out;
    if (this.fd < 0 && !this.open(false)) {
      this.counters[COUNTERS.WRITE_FAILED] = (this.counters[COUNTERS.WRITE_FAILED] as number) + lines;
      out.clear();
      return;
    }
    if (out.length >= FILE_THREAD_BYTES && this.noteFileThread()) {
      this.submit(lines);
      return;
    }
    // A write to a pipe or device can block for long: meanwhile the clock would stand still, so
    // the producers read Date.now() until it returns. Regular files are written to the page
    // cache and return quickly; the clock stays live (Date.now() allocates on the hot path).
    const pausesClock = this.clockLive && this.blockingSink;
    if (pausesClock) Atomics.store(this.control, CONTROL.CLOCK_LIVE, 0);
    try {
      let offset = 0;
      while (offset < out.length) offset += writeSync(this.fd, out.bytes, offset, out.length - offset);
      this.counters[COUNTERS.WRITTEN] = (this.counters[COUNTERS.WRITTEN] as number) + lines;
    } catch (error) {
      this.counters[COUNTERS.WRITE_FAILED] = (this.counters[COUNTERS.WRITE_FAILED] as number) + lines;
      this.writeFailed(error);
    }
    out.clear();
    this.counters[COUNTERS.CLOCK] = Date.now();
    if (pausesClock && this.clockLive) Atomics.store(this.control, CONTROL.CLOCK_LIVE, 1);
  }

  /** Start the file thread; without it (it could not start) every write is made here. */
  private startFileThread(): void {
    try {
      const buffers = new MessageChannel();
      const errors = new MessageChannel();
      const initialBuffers = this.buffers.map((b) => b.bytes.buffer as SharedArrayBuffer);
      const data: FileThreadData = {
        fileState: this.fileState,
        control: this.control,
        initialBuffers,
        buffers: buffers.port2,
        errors: errors.port2,
        wakeIndex: CONTROL.WAKE,
      };
      this.fileThread = startStreamWorker("file-thread", data, [buffers.port2, errors.port2]);
      this.fileThread.unref();
      this.sentBuffers.push(...initialBuffers);
      this.bufferPort = buffers.port1;
      this.errorPort = errors.port1;
    } catch {
      this.fileThread = null;
    }
  }

  /** Is the file thread running? Published in CONTROL.FILE_THREAD (`streamStats().fileThread`). */
  private noteFileThread(): boolean {
    const running = this.fileThread !== null && Atomics.load(this.fileState, FILE_STATE.READY) === 1;
    if (running !== (this.control[CONTROL.FILE_THREAD] === 1)) Atomics.store(this.control, CONTROL.FILE_THREAD, running ? 1 : 0);
    return running;
  }

  /** Hand the current buffer to the file thread and switch to the other (free: see completeWrite). */
  private submit(lines: number): void {
    const out = this.out;
    const state = this.fileState;
    if (this.sentBuffers[this.current] !== out.bytes.buffer) {
      this.sentBuffers[this.current] = out.bytes.buffer;
      this.bufferPort?.postMessage({ index: this.current, buffer: out.bytes.buffer });
    }
    state[FILE_STATE.FD] = this.fd;
    state[FILE_STATE.BUFFER] = this.current;
    state[FILE_STATE.LENGTH] = out.length;
    state[FILE_STATE.RECORDS] = lines;
    this.requests = (this.requests + 1) | 0;
    this.inFlightRecords = lines;
    Atomics.store(state, FILE_STATE.REQUEST, this.requests);
    Atomics.notify(state, FILE_STATE.REQUEST);
    this.current ^= 1;
    this.out.clear();
  }

  /**
   * Wait for the write in flight (if any) and take its result: a failure is counted and reported
   * here, and the file closed, before anything else is written. The producers' clock keeps
   * ticking while this waits (a slow pipe can take long).
   */
  private completeWrite(): void {
    if (this.inFlightRecords < 0) return;
    const state = this.fileState;
    for (;;) {
      const done = Atomics.load(state, FILE_STATE.DONE);
      if (done === this.requests) break;
      if (Atomics.load(state, FILE_STATE.READY) !== 1 && Atomics.load(state, FILE_STATE.DONE) !== this.requests) {
        // The thread ended with the write unfinished (it cannot, short of a fault of its own):
        // count the records as not written and write here from now on. (DONE is read again: the
        // thread may have finished the write just before it ended.)
        const lost = this.inFlightRecords;
        this.fileThread = null;
        this.inFlightRecords = -1;
        this.counters[COUNTERS.WRITE_FAILED] = (this.counters[COUNTERS.WRITE_FAILED] as number) + lost;
        this.report("stream.fileThread", `stream: the stream's file thread stopped; its last ${lost} records are counted as not written, and the writer writes the file itself from now on`);
        return;
      }
      Atomics.wait(state, FILE_STATE.DONE, done, CLOCK_TICK_MS);
      this.counters[COUNTERS.CLOCK] = Date.now();
    }
    const records = this.inFlightRecords;
    this.inFlightRecords = -1;
    if (state[FILE_STATE.FAILED] === 1) {
      this.counters[COUNTERS.WRITE_FAILED] = (this.counters[COUNTERS.WRITE_FAILED] as number) + records;
      const posted = this.errorPort === null ? undefined : receiveMessageOnPort(this.errorPort);
      const { code, message } = (posted?.message ?? { code: "", message: "write failed" }) as { code: string; message: string };
      this.writeFailed(Object.assign(new Error(message), { code }));
    }
  }

  private writeFailed(error: unknown): void {
    this.report(this.errorCode, `stream: could not write ${this.data.file}: ${describe(error)}; stream records are dropped and counted (rankscope/stream_dropped), the job goes on`);
    // A descriptor closed under us may already be reused by someone else: never close it again.
    if ((error as { code?: unknown } | null)?.code === "EBADF") this.fd = -1;
    else this.closeFile();
  }

  /** Open the file (creating its directory only at start); retried at most once per flush interval. */
  private open(first: boolean): boolean {
    const now = Date.now();
    if (!first && now - this.lastOpenAttempt < this.data.flushMs) return false;
    this.lastOpenAttempt = now;
    try {
      if (first) mkdirSync(dirname(this.data.file), { recursive: true });
      this.fd = openSync(this.data.file, "a");
      this.blockingSink = !fstatSync(this.fd).isFile();
      return true;
    } catch (error) {
      this.report(this.errorCode, `stream: could not open ${this.data.file}: ${describe(error)}; stream records are dropped and counted (rankscope/stream_dropped) until it can be opened, the job goes on`);
      return false;
    }
  }

  /** A file deleted under us (its directory removed) takes writes silently: notice it. */
  private checkFile(): void {
    this.completeWrite();
    if (this.fd < 0) return;
    try {
      if (fstatSync(this.fd).nlink === 0) {
        this.report(this.errorCode, `stream: ${this.data.file} was deleted (or its directory removed) while being written; stream records are dropped and counted (rankscope/stream_dropped) until it can be reopened, the job goes on`);
        this.closeFile();
        this.lastOpenAttempt = -Infinity;
      }
    } catch (error) {
      this.writeFailed(error);
    }
  }

  private stopFileThread(): void {
    if (this.fileThread === null) return;
    Atomics.store(this.fileState, FILE_STATE.STOP, 1);
    Atomics.notify(this.fileState, FILE_STATE.REQUEST);
    this.fileThread = null;
    this.noteFileThread();
    this.bufferPort?.close();
    this.errorPort?.close();
  }

  private closeFile(): void {
    this.completeWrite();
    if (this.fd >= 0) {
      try {
        closeSync(this.fd);
      } catch {
        // Already closed (EBADF): it is reopened on a later cycle either way.
      }
    }
    this.fd = -1;
  }

  private counts(): StreamCounts {
    let ringFull = 0;
    for (const ring of this.rings) ringFull += ring.view.ringFull;
    const writeFailed = this.counters[COUNTERS.WRITE_FAILED] as number;
    return {
      written: this.counters[COUNTERS.WRITTEN] as number,
      dropped: ringFull + writeFailed,
      ringFull,
      writeFailed,
      backendDropped: this.counters[COUNTERS.BACKEND_DROPPED] as number,
    };
  }

  private finish(reason: string): void {
    this.completeWrite();
    this.stopFileThread();
    if (this.fd >= 0) this.checkFile();
    const counts = this.counts();
    // A stream that took no record at all ends without a line: an idle stream (a controller's own,
    // beside a real rank 0 that appends to the same file) leaves nothing to misread.
    const idle = counts.written === 0 && counts.dropped === 0 && counts.backendDropped === 0;
    if (!idle && (this.fd >= 0 || this.open(false))) {
      try {
        writeSync(this.fd, `${endLine(isoTime(Date.now()), this.data.rank, reason, counts)}\n`);
      } catch (error) {
        this.writeFailed(error);
      }
    }
    this.closeFile();
    this.post({ type: "done", counts });
    Atomics.store(this.control, CONTROL.CLOCK_LIVE, 0);
    Atomics.store(this.control, CONTROL.DONE, 1);
    Atomics.notify(this.control, CONTROL.DONE);
    this.data.events.close();
    for (const ring of this.rings) ring.keys.close();
  }

  /** Ask the main thread to report an error: once per code from here (the main thread counts). */
  private report(code: string, message: string): void {
    if (this.reported.has(code)) return;
    this.reported.add(code);
    this.post({ type: "error", code, message });
  }

  private post(event: WriterEvent): void {
    this.data.events.postMessage(event);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

if (parentPort !== null && workerData !== null && typeof workerData === "object" && "control" in workerData) {
  new Writer(workerData as WriterData).run();
}
