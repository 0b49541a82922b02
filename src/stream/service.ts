/**
 * The thread's stream service: its configuration, its ring, the writer thread that drains it, and
 * the waits on that writer (flush, stop, the exit paths). One per thread (`processWide`), behind
 * the public calls of stream.ts.
 *
 * A thread either runs a writer of its own (`start`) or streams into another thread's writer
 * through a link (`attachLink`, see link.ts). Everything lost on the way is counted (`stats()`).
 */
import { join } from "node:path";
import { isMainThread, MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from "node:worker_threads";
import { getCollector } from "../core/collector.js";
import { recorderOf, type RankIdentity, type Recorder } from "../core/rank-identity.js";
import { describeError, reportError, warn } from "../core/diagnostics.js";
import { envFlag } from "../core/env.js";
import { currentRun } from "../run/current.js";
import {
  resolveStreamConfig,
  streamFileFromEnv,
  streamFileName,
  type StreamConfig,
  type StreamOptions,
} from "./config.js";
import { registerStreamDrain } from "./drain.js";
import type { StreamCounts } from "./format.js";
import { acceptLink, offerLink } from "./link.js";
import {
  isWriterEvent,
  type KeyPoster,
  type KeyRegistration,
  type RingAttachment,
  type WriterCommand,
  type WriterData,
  type WriterEvent,
} from "./messages.js";
import { workerStreamHost } from "./worker-streams.js";
import { MetricStreamProducer } from "./metric-producer.js";
import { BatchDelivery, type StreamBatchSink } from "./sink.js";
import {
  CONTROL,
  COUNTERS,
  createControl,
  createRing,
  RingProducer,
  RingView,
  SharedCounters,
  STOP_REASONS,
  type RingShape,
  type StopReason,
} from "./ring.js";
import { pollUntil, waitAtMost, waitUntil } from "./wait.js";
import { startStreamWorker } from "./workers.js";

/** What `streamStats()` returns. */
export interface StreamStats extends StreamCounts {
  /** True while the writer runs. */
  readonly running: boolean;
  /** The stream file, once started. */
  readonly file: string | undefined;
  /** Records in the ring not yet taken by the writer. */
  readonly pending: number;
  /** `streamValues` calls dropped because no stream destination was known (warned once). */
  readonly noDestination: number;
  /**
   * Values streamed (`streamValues`, `per_rank_no_reduce` metrics) after the process's end had
   * stopped the stream (a signal, an uncaught exception, exit): the stream's final line is written
   * and it does not start again in this process (warned once).
   */
  readonly afterEnd: number;
  /** True while the file's writes are made on the writer's file thread (see the `fileThread` option). */
  readonly fileThread: boolean;
}

/** Batches the main thread may leave untaken before the writer drops further ones for the backends. */
const MAX_BATCHES_IN_FLIGHT = 64;
/** Default wait of `flushStream()` / `stopStream()`. */
export const DEFAULT_ASYNC_WAIT_MS = 10_000;

interface Waiter {
  readonly request: number;
  readonly resolve: () => void;
}

/** Who started the stream: one the runtime started for its backends it also stops. */
type StartedBy = "user" | "runtime";

/** The process's (this thread's) stream: config, ring, writer, drain. One per thread. */
export class StreamService {
  config: StreamConfig | null = null;
  producer: RingProducer | null = null;
  /** Ring ids of probe checkpoints. */
  readonly probeIds = new Map<string, number>();
  readonly metricProducer = new MetricStreamProducer(this);
  readonly disabled = envFlag("RANKSCOPE_DISABLE_STREAM");
  noDestination = 0;
  /** Values streamed after the process's end stopped the stream (see `StreamStats.afterEnd`). */
  afterEnd = 0;
  /** Why the process's end stopped the stream; once set, the stream never starts again here. */
  private endedBy: StopReason | null = null;
  private file: string | undefined;
  private control: Int32Array | null = null;
  private counters: SharedCounters | null = null;
  private ring: RingView | null = null;
  /** Where this thread's key names go: its writer's key port, or (a worker linked by its collector) the main thread. */
  private keys: KeyPoster | null = null;
  /** The port behind `keys` when this thread owns it (closed at teardown). */
  private keysPort: MessagePort | null = null;
  /** Whose values this thread's stream carries (set at start). */
  private recorder: Recorder | null = null;
  /** True while this (main) thread's workers stream their metric values through its writer. */
  private hostingWorkers = false;
  /** This worker thread linked with `attachStreamLink` (not by its collector). */
  private explicitLink = false;
  private events: MessagePort | null = null;
  private worker: Worker | null = null;
  private nextKeyId = 0;
  /** Decoded batches to the `logStream` backends, when some are attached. */
  private readonly delivery = new BatchDelivery();
  private startedBy: StartedBy = "user";
  private flushWaiters: Waiter[] = [];
  private doneWaiters: (() => void)[] = [];
  private finalCounts: StreamCounts | null = null;
  private unregisterDrain: (() => void) | null = null;
  private writerAlive = false;
  /** This thread streams into a ring drained by another thread's writer (attachStreamLink). */
  private linked = false;
  private writerExited: Promise<void> = Promise.resolve();

  get running(): boolean {
    return this.producer !== null;
  }

  /** Start the writer (a no-op with a warning if it already runs with other options). */
  start(options: StreamOptions, startedBy: StartedBy, identity?: RankIdentity, runDir?: string): void {
    if (this.disabled || this.endedBy !== null) return;
    if (this.running) {
      if (Object.keys(options).length > 0 && startedBy === "user") {
        warn(
          "stream.alreadyRunning",
          `startStream: the stream is already running (writing ${this.file}); the new options are ignored, call stopStream() first to change them`,
        );
      }
      return;
    }
    const config = resolveStreamConfig(options);
    const run = currentRun();
    const who = identity ?? run?.identity;
    const recorder: Recorder =
      who === undefined ? { role: "rank", rank: 0, rankName: "rank0", thread: 0 } : recorderOf(who);
    const dir = runDir ?? run?.runDir;
    const file = config.file ?? (dir !== undefined ? join(dir, "streams", streamFileName(recorder)) : undefined);
    if (file === undefined) {
      throw new TypeError(
        "startStream: no stream file: pass { file }, set RANKSCOPE_STREAM_FILE, or create a logger first (getOrCreateMetricLogger) so the stream goes to {runDir}/streams/rank-{rank}.jsonl (controller.jsonl for the controller)",
      );
    }
    const control = createControl(config.batchSize);
    const shape: RingShape = createRing(config.capacity, config.values);
    const keys = new MessageChannel();
    const events = new MessageChannel();
    const data: WriterData = {
      control,
      rings: [{ shape, keys: keys.port2 }],
      events: events.port1,
      file,
      flushMs: config.flushMs,
      fileThread: config.fileThread,
      recorder,
      maxBatchesInFlight: MAX_BATCHES_IN_FLIGHT,
    };
    const worker = startStreamWorker("writer", data, [keys.port2, events.port1]);
    worker.unref();
    worker.on("error", (error) =>
      reportError(
        "stream.writer",
        `stream: the writer thread failed: ${describeError(error)}; stream records are dropped and counted, the job goes on`,
      ),
    );
    // A writer that died cannot answer: nobody may wait for it (the ring just fills and counts).
    this.writerExited = new Promise<void>((resolve) =>
      worker.once("exit", () => {
        if (this.worker === worker) {
          this.writerAlive = false;
          this.releaseWaiters();
        }
        resolve();
      }),
    );
    this.writerAlive = true;
    events.port2.on("message", (event: unknown) => this.onMessage(event));
    events.port2.unref();

    this.config = config;
    this.file = file;
    this.recorder = recorder;
    this.events = events.port2;
    this.worker = worker;
    this.startedBy = startedBy;
    this.keysPort = keys.port1;
    this.beginProducing(control, shape, keys.port1, false);
    this.unregisterDrain ??= registerStreamDrain(this, config.handleSignals, () => this.config?.exitWaitMs ?? 2000);
  }

  /** Start lazily from `streamValues` when a destination is known: the producer, or null (warned, counted) if none. */
  startLazily(): RingProducer | null {
    if (this.disabled) return null;
    if (this.endedBy !== null) {
      this.droppedAfterEnd();
      return null;
    }
    if (streamFileFromEnv() === undefined && currentRun() === undefined) {
      this.noDestination++;
      warn(
        "stream.noDestination",
        "streamValues: no stream destination yet, so values are dropped and counted: set RANKSCOPE_STREAM_FILE, call startStream({ file }), or create a logger first (getOrCreateMetricLogger)",
      );
      return null;
    }
    try {
      this.start({}, "user");
    } catch (error) {
      // Never throw a start failure into the loop that happened to stream first.
      this.noDestination++;
      reportError(
        "stream.start",
        `streamValues: the stream could not start: ${describeError(error)}; values are dropped and counted`,
      );
      return null;
    }
    return this.producer;
  }

  /**
   * A value streamed after the process's end stopped the stream: counted, never a new stream (its
   * file would get a second final line, and grow while the process is ending).
   */
  droppedAfterEnd(): void {
    if (this.endedBy === null) return;
    this.afterEnd++;
    warn(
      "stream.afterEnd",
      `stream: values streamed after the stream ended at ${this.endedBy} are not written; they are counted (streamStats().afterEnd)`,
    );
  }

  /**
   * Main side of a worker thread's link: a port to hand to the worker. The worker's ring arrives
   * on it and is forwarded to this stream's writer, which drains it with this thread's ring.
   */
  linkForWorker(): MessagePort {
    const control = this.control;
    const config = this.config;
    if (control === null || config === null || !this.running) {
      throw new Error(
        "streamLinkForWorker: start the stream first (startStream, or a logger with a per_rank_no_reduce backend)",
      );
    }
    return offerLink({ control, capacity: config.capacity, values: config.values }, ({ shape, keys, thread }) => {
      const recorder = this.recorder;
      this.attachRing({ shape, keys, ...(recorder === null ? {} : { recorder: { ...recorder, thread } }) });
    });
  }

  /** Hand another thread's ring to this thread's writer. */
  private attachRing(ring: RingAttachment): void {
    if (this.worker === null || this.control === null) return;
    const command: WriterCommand = { type: "ring", ring };
    this.worker.postMessage(command, [ring.keys]);
    this.wake();
  }

  /**
   * In the main thread, while metric values stream: every worker whose collector links streams its
   * raw values too, under its own recorder (worker-streams.ts). Started with the metric producer.
   */
  private hostWorkerStreams(): void {
    if (!isMainThread || this.hostingWorkers || !this.running) return;
    this.hostingWorkers = true;
    workerStreamHost().start(
      () => {
        const { control, config, recorder } = this;
        if (control === null || config === null || recorder === null || !this.running) return null;
        return {
          control,
          capacity: config.capacity,
          values: config.values,
          owner: recorder,
          step: getCollector().step,
        };
      },
      (ring) => this.attachRing(ring),
    );
  }

  private endWorkerStreams(): void {
    if (!this.hostingWorkers) return;
    this.hostingWorkers = false;
    workerStreamHost().end();
  }

  /** The metric producer, with this thread's workers streaming too (the collector's stream hook). */
  metricsProducer(): MetricStreamProducer {
    this.hostWorkerStreams();
    return this.metricProducer;
  }

  /** Worker side (worker-streams.ts): produce into a ring drained by the main thread's writer. */
  beginLinked(
    control: Int32Array,
    shape: RingShape,
    postKey: (registration: KeyRegistration) => void,
  ): MetricStreamProducer {
    this.beginProducing(control, shape, { postMessage: postKey }, true);
    return this.metricProducer;
  }

  /** Worker side: the producer of a link made with `attachStreamLink`, if any. */
  linkedProducer(): MetricStreamProducer | null {
    return this.linked && this.explicitLink ? this.metricProducer : null;
  }

  /** Worker side: the main thread's stream ended. */
  endLinked(): void {
    if (this.linked) this.detachLink();
  }

  /** Worker side: stream into a ring of this thread's own, drained by the writer behind `port`. */
  attachLink(port: MessagePort): void {
    if (this.disabled) return;
    if (this.running)
      throw new Error("attachStreamLink: this thread already streams; call it before the first streamValues");
    const { control, shape, keys } = acceptLink(port);
    this.beginProducing(control, shape, keys, true);
    this.explicitLink = true;
  }

  /** From now on, values go into the ring `shape` under `control`; key names go to `keys`. */
  private beginProducing(control: Int32Array, shape: RingShape, keys: KeyPoster, linked: boolean): void {
    this.control = control;
    this.counters = new SharedCounters(control);
    this.ring = new RingView(shape);
    this.keys = keys;
    this.nextKeyId = 0;
    this.probeIds.clear();
    this.metricProducer.reset();
    this.finalCounts = null;
    this.linked = linked;
    this.producer = new RingProducer(shape, control);
  }

  /** A ring id for a key name; the writer learns the name before it sees the id. */
  internKey(name: string): number {
    const id = this.nextKeyId++;
    const registration: KeyRegistration = { id, name };
    this.keys?.postMessage(registration);
    return id;
  }

  /** Hand decoded metric records to `sink` (the rank's `logStream` backends) from now on. */
  attachSink(sink: StreamBatchSink): void {
    this.delivery.setSink(sink);
    if (this.control !== null) Atomics.store(this.control, CONTROL.WANT_BATCHES, 1);
  }

  /** Stop handing records to the sink (after a flush, so it got everything recorded so far). */
  async detachSink(): Promise<void> {
    if (this.running) await this.flush(DEFAULT_ASYNC_WAIT_MS);
    // Workers stream metric values only while this thread does.
    this.endWorkerStreams();
    this.delivery.setSink(null);
    if (this.control !== null) Atomics.store(this.control, CONTROL.WANT_BATCHES, 0);
    if (this.startedBy === "runtime") await this.stop(DEFAULT_ASYNC_WAIT_MS);
  }

  /**
   * Wait until everything recorded so far is written and taken by the sink, and with `settle`
   * until the sink handed it to its backends too; all within `waitMs`.
   */
  async flush(waitMs: number, settle = true): Promise<void> {
    const control = this.control;
    if (control === null || !this.running) return;
    const started = Date.now();
    const request = Atomics.add(control, CONTROL.FLUSH_REQ, 1) + 1;
    this.wake();
    if (this.linked) {
      // The writer belongs to another thread: wait on the shared word.
      await pollUntil(control, CONTROL.FLUSH_DONE, (done) => ((done - request) | 0) >= 0, waitMs);
      return;
    }
    await waitAtMost(waitMs, (done) => {
      this.flushWaiters.push({ request, resolve: done });
      if (!this.writerAlive) this.releaseWaiters();
    });
    this.takeEvents();
    if (settle) await this.delivery.settle(waitMs - (Date.now() - started));
  }

  /** The synchronous flush used where nothing can be awaited (beforeExit). */
  flushSync(waitMs: number): void {
    const control = this.control;
    if (control === null || !this.running) return;
    const request = Atomics.add(control, CONTROL.FLUSH_REQ, 1) + 1;
    this.wake();
    if (this.writerAlive) waitUntil(control, CONTROL.FLUSH_DONE, (v) => ((v - request) | 0) >= 0, waitMs);
    this.takeEvents();
  }

  /** Drain, write the final line, stop the writer; resolves with the final counts. */
  async stop(waitMs: number): Promise<StreamCounts | null> {
    if (this.linked) {
      this.detachLink();
      return null;
    }
    const control = this.control;
    if (control === null || !this.running) return this.finalCounts;
    const exited = this.writerExited;
    const started = Date.now();
    Atomics.store(control, CONTROL.STOP, STOP_REASONS.indexOf("stop"));
    this.wake();
    await waitAtMost(waitMs, (settle) => {
      this.doneWaiters.push(settle);
      if (!this.writerAlive) this.releaseWaiters();
    });
    this.takeEvents();
    await this.delivery.settle(waitMs - (Date.now() - started));
    this.teardown("stop", waitMs);
    // Let the thread end before the caller goes on (tests start a new stream right after).
    await waitAtMost(waitMs, (settle) => void exited.then(settle));
    return this.finalCounts;
  }

  /**
   * The synchronous stop of the process's end (the lifecycle's drain): bounded by `waitMs`, never
   * throws. The stream does not start again in this process afterwards.
   */
  stopSync(reason: StopReason, waitMs: number): void {
    this.endedBy ??= reason;
    if (this.linked) {
      this.detachLink();
      return;
    }
    const control = this.control;
    if (control === null || !this.running) return;
    Atomics.store(control, CONTROL.STOP, STOP_REASONS.indexOf(reason));
    this.wake();
    if (this.writerAlive) waitUntil(control, CONTROL.DONE, (v) => v === 1, waitMs);
    this.takeEvents();
    this.teardown(reason, waitMs);
  }

  stats(): StreamStats {
    const counts = this.finalCounts ?? this.liveCounts();
    return {
      ...counts,
      dropped: counts.dropped + this.noDestination + this.afterEnd,
      running: this.running,
      file: this.file,
      pending: this.running && this.ring !== null ? this.ring.pending() : 0,
      noDestination: this.noDestination,
      afterEnd: this.afterEnd,
      fileThread: this.running && this.control !== null && Atomics.load(this.control, CONTROL.FILE_THREAD) === 1,
    };
  }

  private liveCounts(): StreamCounts {
    const counters = this.counters;
    if (counters === null || this.producer === null)
      return { written: 0, dropped: 0, ringFull: 0, writeFailed: 0, backendDropped: 0 };
    const ringFull = this.producer.ringFull;
    const writeFailed = counters.get(COUNTERS.WRITE_FAILED);
    return {
      written: counters.get(COUNTERS.WRITTEN),
      dropped: ringFull + writeFailed,
      ringFull,
      writeFailed,
      backendDropped: counters.get(COUNTERS.BACKEND_DROPPED),
    };
  }

  private wake(): void {
    const control = this.control;
    if (control === null) return;
    Atomics.add(control, CONTROL.WAKE, 1);
    Atomics.notify(control, CONTROL.WAKE);
  }

  /** Take every event the writer has posted, now (exit paths cannot wait for the event loop). */
  private takeEvents(): void {
    const events = this.events;
    if (events === null) return;
    for (let m = receiveMessageOnPort(events); m !== undefined; m = receiveMessageOnPort(events))
      this.onMessage(m.message);
  }

  private onMessage(message: unknown): void {
    if (isWriterEvent(message)) this.onEvent(message);
    else reportError("stream.protocol", "stream: the writer sent a message that is not a writer event; it is ignored");
  }

  private onEvent(event: WriterEvent): void {
    switch (event.type) {
      case "batch":
        if (this.control !== null) Atomics.add(this.control, CONTROL.CONSUMED, 1);
        this.delivery.deliver(event.records);
        return;
      case "error":
        reportError(event.code, event.message);
        return;
      case "flushed": {
        const ready = this.flushWaiters.filter((w) => ((event.request - w.request) | 0) >= 0);
        this.flushWaiters = this.flushWaiters.filter((w) => ((event.request - w.request) | 0) < 0);
        for (const w of ready) w.resolve();
        return;
      }
      case "done": {
        this.finalCounts = event.counts;
        const waiters = this.doneWaiters;
        this.doneWaiters = [];
        for (const resolve of waiters) resolve();
        return;
      }
    }
  }

  /** A linked thread stops streaming; what its ring holds is still drained by the writer. */
  private detachLink(): void {
    this.producer = null;
    this.keys = null;
    this.control = null;
    this.counters = null;
    this.linked = false;
    this.explicitLink = false;
  }

  /** Let every flush/stop waiter go (the writer is gone). */
  private releaseWaiters(): void {
    const waiters = [...this.flushWaiters.map((w) => w.resolve), ...this.doneWaiters];
    this.flushWaiters = [];
    this.doneWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private teardown(reason: string, waitMs: number): void {
    if (this.finalCounts === null) {
      const counts = this.liveCounts();
      const pending = this.ring?.pending() ?? 0;
      // The writer did not answer in time: what it had not written is lost, and said so.
      this.finalCounts = { ...counts, dropped: counts.dropped + pending, writeFailed: counts.writeFailed + pending };
      reportError(
        "stream.exitTimeout",
        `stream: the writer ${this.writerAlive ? `did not finish within ${waitMs} ms` : "was not running"} at ${reason}; ${pending} record(s) still in the ring were not written (raise exitWaitMs / RANKSCOPE_STREAM_EXIT_WAIT_MS if the disk is slow)`,
      );
    }
    this.producer = null;
    this.delivery.setSink(null);
    this.events?.close();
    this.keysPort?.close();
    this.events = null;
    this.keys = null;
    this.keysPort = null;
    this.endWorkerStreams();
    this.control = null;
    this.counters = null;
    this.worker = null;
    this.writerAlive = false;
    this.unregisterDrain?.();
    this.unregisterDrain = null;
    this.releaseWaiters();
  }
}
