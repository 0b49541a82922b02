/**
 * The stream writer: a worker thread that drains the rings in batches and hands each batch to the
 * stream sinks — the per-rank JSONL file (lines formatted here as bytes, written by file-output.ts)
 * and, when some backend takes `logStream`, the main thread (decoded records, posted with a bound
 * on batches in flight).
 *
 * It sleeps on `Atomics.wait` until a producer says a batch is ready, the flush interval passes, or
 * the main thread asks for a flush or a stop. While records flow it advances the producers' shared
 * clock every millisecond (see `RingProducer.now`). A fault is reported once per kind (the main
 * thread prints it) and its records are counted.
 */
import { parentPort, receiveMessageOnPort, workerData, type MessagePort } from "node:worker_threads";
import type { StreamRecord } from "../core/metric.js";
import type { Recorder } from "../core/rank-identity.js";
import { BYTES_PER_WRITE, FileOutput } from "./file-output.js";
import { endLine, isoTime, recorderFields, StreamLineFormat, type StreamCounts } from "./format.js";
import {
  isKeyRegistration,
  isWriterCommand,
  isWriterData,
  type RingAttachment,
  type WriterData,
  type WriterEvent,
} from "./messages.js";
import {
  CLOCK_IDLE_MS,
  CLOCK_TICK_MS,
  CONTROL,
  COUNTERS,
  emptySlot,
  KIND_METRIC,
  readSlot,
  RingView,
  SharedCounters,
  STOP_REASONS,
  TAIL,
} from "./ring.js";

export type { RingAttachment, WriterData, WriterEvent } from "./messages.js";

/** Most lines joined into one write. */
const LINES_PER_WRITE = 4096;
/** Most records in one batch posted to the main thread. */
const RECORDS_PER_BATCH = 4096;

/** How long the final drain waits for key names still on their way (a worker's, forwarded by the main thread). */
const NAMES_WAIT_MS = 500;

interface LiveRing {
  readonly view: RingView;
  readonly keys: MessagePort;
  /** Who records into it: its lines' identity fields and its records' `rank`/`role`/`thread`. */
  readonly recorder: Recorder;
  readonly fields: string;
  readonly names: string[];
  /** Per key id, the encoded constant middle of its lines (made at the key's first record). */
  readonly middles: (Uint8Array | undefined)[];
}

class Writer {
  private readonly control: Int32Array;
  private readonly counters: SharedCounters;
  private readonly rings: LiveRing[] = [];
  private readonly slot = emptySlot();
  private readonly format: StreamLineFormat;
  private readonly output: FileOutput;
  private readonly reported = new Set<string>();
  private flushDone = 0;
  /** True while the producers read their time from the clock this writer ticks. */
  private clockLive = false;
  /** The last drain stopped at a key whose name had not arrived. */
  private waitingForNames = false;

  constructor(private readonly data: WriterData) {
    this.control = data.control;
    this.counters = new SharedCounters(data.control);
    this.format = new StreamLineFormat(data.recorder);
    this.output = new FileOutput({
      file: data.file,
      reopenMs: data.flushMs,
      control: data.control,
      counters: this.counters,
      report: (code, message) => this.report(code, message),
    });
    for (const ring of data.rings) this.attach(ring);
  }

  run(): void {
    if (this.data.fileThread) this.output.startFileThread();
    this.output.open(true);
    let lastDrain = Date.now();
    let lastActivity = -Infinity;
    let lastHeads = 0;
    let lastWake = 0;
    for (;;) {
      const wake = Atomics.load(this.control, CONTROL.WAKE);
      this.takeCommands();
      this.output.pollWrite();
      this.output.noteFileThread();
      const stop = Atomics.load(this.control, CONTROL.STOP);
      const flushRequest = Atomics.load(this.control, CONTROL.FLUSH_REQ);
      const batch = Atomics.load(this.control, CONTROL.BATCH);
      const pending = this.pending();
      const now = Date.now();
      // The producers' clock: ticked every millisecond while records flow, Date.now() otherwise.
      this.counters.set(COUNTERS.CLOCK, now);
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
      if (due) this.output.checkFile();
      if (this.waitingForNames && stop === 0 && flushRequest === this.flushDone) {
        // A linked worker's key name is on its way through the main thread: look again shortly.
        this.waitingForNames = false;
        Atomics.wait(this.control, CONTROL.WAKE, wake, 2);
        continue;
      }
      if (stop !== 0 || flushRequest !== this.flushDone || pending >= batch || (pending > 0 && due)) {
        this.waitingForNames = this.drain(stop !== 0);
        lastDrain = now;
        if (flushRequest !== this.flushDone) {
          this.output.completeWrite(); // a flush is done when its records are in the file
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
    const recorder = ring.recorder ?? this.data.recorder;
    this.rings.push({
      view: new RingView(ring.shape),
      keys: ring.keys,
      recorder,
      fields: recorderFields(recorder),
      names: [],
      middles: [],
    });
  }

  /** Rings attached after start (other producing threads). */
  private takeCommands(): void {
    if (parentPort === null) return;
    for (let m = receiveMessageOnPort(parentPort); m !== undefined; m = receiveMessageOnPort(parentPort)) {
      const command: unknown = m.message;
      if (isWriterCommand(command)) this.attach(command.ring);
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

  /** Write and hand on everything published so far (at the end, waiting briefly for names still on their way). */
  private drain(final = false): boolean {
    let waiting = false;
    for (const ring of this.rings) waiting = this.drainRing(ring) || waiting;
    if (!final || !waiting) return waiting;
    const until = Date.now() + NAMES_WAIT_MS;
    while (waiting && Date.now() < until) {
      Atomics.wait(this.control, CONTROL.WAKE, Atomics.load(this.control, CONTROL.WAKE), 5);
      waiting = false;
      for (const ring of this.rings) waiting = this.drainRing(ring) || waiting;
    }
    return waiting;
  }

  /** Drain one ring; true when it stopped at a key whose name has not arrived yet. */
  private drainRing(ring: LiveRing): boolean {
    const view = ring.view;
    const head = Atomics.load(view.i32, 0);
    // A thread's own keys are posted before the slots that use them are published, so they are
    // queued by now; a linked worker's arrive through the main thread and may still be on the way.
    for (let m = receiveMessageOnPort(ring.keys); m !== undefined; m = receiveMessageOnPort(ring.keys)) {
      const key: unknown = m.message;
      if (isKeyRegistration(key)) ring.names[key.id] = key.name;
    }
    const wantBatches = Atomics.load(this.control, CONTROL.WANT_BATCHES) === 1;
    const output = this.output;
    let out = output.out;
    const format = this.format;
    let tail = Atomics.load(view.i32, TAIL);
    let lines = 0;
    let records: StreamRecord[] = [];
    const { rank, rankName, role, thread } = ring.recorder;
    const { f64, i32 } = view;
    let unnamed = false;
    while (tail !== head) {
      const base = view.slotBase(tail);
      const keyId = i32[(base + 4) * 2] ?? 0;
      const kindWord = i32[(base + 4) * 2 + 1] ?? 0;
      let middle = ring.middles[keyId];
      if (middle === undefined) {
        if (ring.names[keyId] === undefined) {
          // Its name is still on the way: stop here, the next drain goes on from this slot.
          unnamed = true;
          break;
        }
        middle = this.middleFor(ring, keyId, kindWord);
      }
      if ((kindWord & 15) === KIND_METRIC) {
        // The common case, kept lean: read the three words and write the line's bytes.
        const timestamp = f64[base] ?? 0;
        // `+ 0`: −0 is written and handed on as 0, as every reduced value is.
        const value = (f64[base + 1] ?? 0) + 0;
        const step = f64[base + 2] ?? 0;
        format.putMetric(out, timestamp, middle, value, step);
        if (wantBatches)
          records.push({ key: ring.names[keyId] ?? `#${keyId}`, value, step, timestamp, rank, rankName, role, thread });
      } else {
        format.putProbe(out, middle, readSlot(view, tail, this.slot), f64);
      }
      lines++;
      tail = (tail + 1) | 0;
      // Keep the producers' clock moving while a long drain formats.
      if ((lines & 511) === 0) this.counters.set(COUNTERS.CLOCK, Date.now());
      if (lines === LINES_PER_WRITE || out.length >= BYTES_PER_WRITE || tail === head) {
        // The slots are read: free them before the (possibly slow) write.
        Atomics.store(view.i32, TAIL, tail);
        output.write(lines, this.clockLive);
        out = output.out;
        lines = 0;
      }
      if (records.length === RECORDS_PER_BATCH || (tail === head && records.length > 0)) {
        this.postBatch(records);
        records = [];
      }
    }
    if (lines > 0) {
      Atomics.store(view.i32, TAIL, tail);
      output.write(lines, this.clockLive);
    }
    if (records.length > 0) this.postBatch(records);
    return unnamed;
  }

  /** The encoded middle of a key's lines (metric or probe, as its first record says). */
  private middleFor(ring: LiveRing, keyId: number, kindWord: number): Uint8Array {
    const name = ring.names[keyId] ?? `#${keyId}`;
    const middle =
      (kindWord & 15) === KIND_METRIC
        ? this.format.metricMiddle(name, ring.fields)
        : this.format.probeMiddle(name, ring.fields);
    ring.middles[keyId] = middle;
    return middle;
  }

  private postBatch(records: StreamRecord[]): void {
    const inFlight = (Atomics.load(this.control, CONTROL.POSTED) - Atomics.load(this.control, CONTROL.CONSUMED)) | 0;
    if (inFlight >= this.data.maxBatchesInFlight) {
      this.counters.add(COUNTERS.BACKEND_DROPPED, records.length);
      this.report(
        "stream.backendBehind",
        `stream: the main thread is not taking stream batches fast enough for logStream backends; records beyond ${this.data.maxBatchesInFlight} batches in flight are dropped for those backends and counted (the stream file still gets them)`,
      );
      return;
    }
    Atomics.add(this.control, CONTROL.POSTED, 1);
    this.post({ type: "batch", records });
  }

  private counts(): StreamCounts {
    let ringFull = 0;
    for (const ring of this.rings) ringFull += ring.view.ringFull;
    const writeFailed = this.counters.get(COUNTERS.WRITE_FAILED);
    return {
      written: this.counters.get(COUNTERS.WRITTEN),
      dropped: ringFull + writeFailed,
      ringFull,
      writeFailed,
      backendDropped: this.counters.get(COUNTERS.BACKEND_DROPPED),
    };
  }

  private finish(reason: string): void {
    let counts = this.counts();
    this.output.finish(() => {
      counts = this.counts();
      // A stream that took no record at all ends without a line, and its empty file is removed: an
      // idle stream (a controller's own, started in case its values come) leaves nothing behind.
      const idle = counts.written === 0 && counts.dropped === 0 && counts.backendDropped === 0;
      return idle ? undefined : `${endLine(isoTime(Date.now()), this.data.recorder, reason, counts)}\n`;
    });
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

const data: unknown = workerData;
if (parentPort !== null && isWriterData(data)) new Writer(data).run();
