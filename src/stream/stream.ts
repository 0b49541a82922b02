/**
 * The stream path (seed 004): raw values recorded in tight loops, written off the caller's thread.
 *
 * `streamValues(checkpoint, values, index)` (probes) and `per_rank_no_reduce` metrics put one
 * fixed-size slot each into this thread's ring (see ring.ts): no I/O, no await, no allocation once
 * the key is interned. The writer worker (writer.ts) drains the ring to `{runDir}/streams/rank-{r}.jsonl`
 * (or RANKSCOPE_STREAM_FILE) and, when some backend takes `logStream`, posts decoded batches back
 * here, where they are handed to those backends off the recording call.
 *
 * Exit: normal exit, `beforeExit`, SIGINT/SIGTERM and an uncaught exception all drain the ring
 * with a bounded wait (`exitWaitMs`, default 2 s, within the lifecycle's drain deadline): the
 * stream is a drain of the process lifecycle (src/core/lifecycle.ts), which ends the process by the
 * signal afterwards. Everything lost on the way — ring full, write errors, a main thread too far behind for
 * the backends — is counted (`streamStats()`, the writer's final line, and `rankscope/stream_dropped`
 * at every metric flush).
 */
import { join } from "node:path";
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from "node:worker_threads";
import type { RankIdentity } from "../core/rank-identity.js";
import type { Collector, MetricEntry, StreamProducer } from "../core/collector.js";
import { describeError, reportError, warn } from "../core/diagnostics.js";
import { envFlag } from "../core/env.js";
import type { StreamRecord } from "../core/metric.js";
import { currentRun } from "../run/current.js";
import { resolveStreamConfig, streamFileFromEnv, type StreamConfig, type StreamOptions } from "./config.js";
import type { StreamCounts } from "./format.js";
import { CONTROL, COUNTERS, createControl, createRing, RingProducer, RingView, STOP_REASONS, type RingShape, type StopReason } from "./ring.js";
import type { WriterData, WriterEvent } from "./writer.js";
import { startStreamWorker } from "./workers.js";
import { processWide } from "../core/process-wide.js";
import { registerDrain } from "../core/lifecycle.js";
import { STREAM_DROPPED_KEY } from "../core/internal-keys.js";

export type { StreamOptions, StreamConfig } from "./config.js";
export type { StreamCounts } from "./format.js";

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
  /** True while the file's writes are made on the writer's file thread (see the `fileThread` option). */
  readonly fileThread: boolean;
}

/** Receives decoded metric records for `logStream` backends, on the main thread. */
export type StreamBatchSink = (batch: readonly StreamRecord[]) => Promise<void> | void;

/** Batches the main thread may leave untaken before the writer drops further ones for the backends. */
const MAX_BATCHES_IN_FLIGHT = 64;
/** Default wait of `flushStream()` / `stopStream()`. */
const DEFAULT_ASYNC_WAIT_MS = 10_000;

/** Interns metric keys to ring ids (once per key) and pushes raw values: the collector's stream hook. */
class MetricStreamProducer implements StreamProducer {
  /** Ids interned for an earlier stream (or collector) are stale: entries carry the generation. */
  private generation = 1;

  constructor(private readonly service: StreamService) {}

  record(entry: MetricEntry, value: number, step: number): void {
    const producer = this.service.producer;
    if (producer === null) return;
    if (entry.streamGeneration !== this.generation) this.intern(entry);
    producer.pushValue(entry.streamId, value, step);
  }

  /** Forget every id (a new stream, whose writer knows no names yet). */
  reset(): void {
    this.generation++;
  }

  private intern(entry: MetricEntry): void {
    entry.streamId = this.service.internKey(entry.key);
    entry.streamGeneration = this.generation;
  }
}

interface Waiter {
  readonly request: number;
  readonly resolve: () => void;
}

/** The process's (this thread's) stream: config, ring, writer, hooks. One per thread. */
class StreamService {
  config: StreamConfig | null = null;
  producer: RingProducer | null = null;
  /** Ring ids of probe checkpoints. */
  readonly probeIds = new Map<string, number>();
  readonly metricProducer = new MetricStreamProducer(this);
  readonly disabled = envFlag("RANKSCOPE_DISABLE_STREAM");
  noDestination = 0;
  private file: string | undefined;
  private control: Int32Array | null = null;
  private ring: RingView | null = null;
  private keys: MessagePort | null = null;
  private events: MessagePort | null = null;
  private worker: Worker | null = null;
  private nextKeyId = 0;
  private sink: StreamBatchSink | null = null;
  private startedBy: "user" | "runtime" = "user";
  private readonly deliveries = new Set<Promise<void>>();
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
  start(options: StreamOptions, startedBy: "user" | "runtime", identity?: RankIdentity, runDir?: string): void {
    if (this.disabled) return;
    if (this.running) {
      if (Object.keys(options).length > 0 && startedBy === "user") {
        warn("stream.alreadyRunning", `startStream: the stream is already running (writing ${this.file}); the new options are ignored, call stopStream() first to change them`);
      }
      return;
    }
    const config = resolveStreamConfig(options);
    const run = currentRun();
    const who = identity ?? run?.identity;
    const rank = who?.rank ?? 0;
    const dir = runDir ?? run?.runDir;
    const file = config.file ?? (dir !== undefined ? join(dir, "streams", `rank-${rank}.jsonl`) : undefined);
    if (file === undefined) {
      throw new TypeError(
        "startStream: no stream file: pass { file }, set RANKSCOPE_STREAM_FILE, or create a logger first (getOrCreateMetricLogger) so the stream goes to {runDir}/streams/rank-{rank}.jsonl",
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
      rank,
      rankName: who?.rankName ?? `rank${rank}`,
      maxBatchesInFlight: MAX_BATCHES_IN_FLIGHT,
    };
    const worker = startStreamWorker("writer", data, [keys.port2, events.port1]);
    worker.unref();
    worker.on("error", (error) => reportError("stream.writer", `stream: the writer thread failed: ${describeError(error)}; stream records are dropped and counted, the job goes on`));
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
    events.port2.on("message", (event: WriterEvent) => this.onEvent(event));
    events.port2.unref();

    this.config = config;
    this.file = file;
    this.control = control;
    this.ring = new RingView(shape);
    this.keys = keys.port1;
    this.events = events.port2;
    this.worker = worker;
    this.startedBy = startedBy;
    this.nextKeyId = 0;
    this.probeIds.clear();
    this.metricProducer.reset();
    this.finalCounts = null;
    this.producer = new RingProducer(shape, control);
    this.registerDrain(config.handleSignals);
  }

  /** Start lazily from `streamValues` when a destination is known; false (warned, counted) if none. */
  startLazily(): boolean {
    if (this.disabled) return false;
    if (streamFileFromEnv() === undefined && currentRun() === undefined) {
      this.noDestination++;
      warn(
        "stream.noDestination",
        "streamValues: no stream destination yet, so values are dropped and counted: set RANKSCOPE_STREAM_FILE, call startStream({ file }), or create a logger first (getOrCreateMetricLogger)",
      );
      return false;
    }
    try {
      this.start({}, "user");
    } catch (error) {
      // Never throw a start failure into the loop that happened to stream first.
      this.noDestination++;
      reportError("stream.start", `streamValues: the stream could not start: ${describeError(error)}; values are dropped and counted`);
      return false;
    }
    return this.running;
  }

  /**
   * Main side of a worker thread's link: a port to hand to the worker. The worker's ring arrives
   * on it and is forwarded to this stream's writer, which drains it with this thread's ring.
   */
  linkForWorker(): MessagePort {
    const control = this.control;
    const config = this.config;
    if (control === null || config === null || !this.running) {
      throw new Error("streamLinkForWorker: start the stream first (startStream, or a logger with a per_rank_no_reduce backend)");
    }
    const link = new MessageChannel();
    link.port1.postMessage({ type: "control", control, capacity: config.capacity, values: config.values });
    link.port1.on("message", (message: { type: string; shape?: RingShape; keys?: MessagePort }) => {
      if (message.type !== "ring" || message.shape === undefined || message.keys === undefined || this.worker === null || this.control === null) return;
      this.worker.postMessage({ type: "ring", ring: { shape: message.shape, keys: message.keys } }, [message.keys]);
      this.wake();
      link.port1.close();
    });
    link.port1.unref();
    return link.port2;
  }

  /** Worker side: stream into a ring of this thread's own, drained by the writer behind `port`. */
  attachLink(port: MessagePort): void {
    if (this.disabled) return;
    if (this.running) throw new Error("attachStreamLink: this thread already streams; call it before the first streamValues");
    const first = receiveMessageOnPort(port)?.message as { type: string; control: Int32Array; capacity: number; values: number } | undefined;
    if (first?.type !== "control") throw new TypeError("attachStreamLink(port) takes the port returned by streamLinkForWorker() in the main thread");
    const shape = createRing(first.capacity, first.values);
    const keys = new MessageChannel();
    port.postMessage({ type: "ring", shape, keys: keys.port2 }, [keys.port2]);
    port.close();
    keys.port1.unref();
    this.control = first.control;
    this.ring = new RingView(shape);
    this.keys = keys.port1;
    this.nextKeyId = 0;
    this.probeIds.clear();
    this.metricProducer.reset();
    this.finalCounts = null;
    this.linked = true;
    this.producer = new RingProducer(shape, first.control);
  }

  /** A ring id for a key name; the writer learns the name before it sees the id. */
  internKey(name: string): number {
    const id = this.nextKeyId++;
    this.keys?.postMessage({ id, name });
    return id;
  }

  /** Hand decoded metric records to `sink` (the rank's `logStream` backends) from now on. */
  attachSink(sink: StreamBatchSink): void {
    this.sink = sink;
    if (this.control !== null) Atomics.store(this.control, CONTROL.WANT_BATCHES, 1);
  }

  /** Stop handing records to the sink (after a flush, so it got everything recorded so far). */
  async detachSink(): Promise<void> {
    if (this.running) await this.flush(DEFAULT_ASYNC_WAIT_MS);
    this.sink = null;
    if (this.control !== null) Atomics.store(this.control, CONTROL.WANT_BATCHES, 0);
    if (this.startedBy === "runtime") await this.stop(DEFAULT_ASYNC_WAIT_MS);
  }

  /** Wait until everything recorded so far is written and handed to the sink. */
  async flush(waitMs: number): Promise<void> {
    const control = this.control;
    if (control === null || !this.running) return;
    if (this.linked) {
      // The writer belongs to another thread: ask it to drain, and wait on the shared word.
      const request = Atomics.add(control, CONTROL.FLUSH_REQ, 1) + 1;
      this.wake();
      const deadline = Date.now() + waitMs;
      while (((Atomics.load(control, CONTROL.FLUSH_DONE) - request) | 0) < 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
      return;
    }
    const request = Atomics.add(control, CONTROL.FLUSH_REQ, 1) + 1;
    this.wake();
    await waitAtMost(waitMs, (settle) => {
      this.flushWaiters.push({ request, resolve: settle });
      if (!this.writerAlive) this.releaseWaiters();
    });
    this.takeEvents();
    await this.settleDeliveries();
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
    Atomics.store(control, CONTROL.STOP, STOP_REASONS.indexOf("stop"));
    this.wake();
    await waitAtMost(waitMs, (settle) => {
      this.doneWaiters.push(settle);
      if (!this.writerAlive) this.releaseWaiters();
    });
    this.takeEvents();
    await this.settleDeliveries();
    this.teardown("stop", waitMs);
    // Let the thread end before the caller goes on (tests start a new stream right after).
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
    return this.finalCounts;
  }

  /** The synchronous stop of exit paths: bounded by `waitMs`, never throws. */
  stopSync(reason: StopReason, waitMs: number): void {
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
      dropped: counts.dropped + this.noDestination,
      running: this.running,
      file: this.file,
      pending: this.running && this.ring !== null ? this.ring.pending() : 0,
      noDestination: this.noDestination,
      fileThread: this.running && this.control !== null && Atomics.load(this.control, CONTROL.FILE_THREAD) === 1,
    };
  }

  private liveCounts(): StreamCounts {
    if (this.control === null || this.producer === null) return { written: 0, dropped: 0, ringFull: 0, writeFailed: 0, backendDropped: 0 };
    const counters = new Float64Array(this.control.buffer);
    const ringFull = this.producer.ringFull;
    const writeFailed = counters[COUNTERS.WRITE_FAILED] as number;
    return { written: counters[COUNTERS.WRITTEN] as number, dropped: ringFull + writeFailed, ringFull, writeFailed, backendDropped: counters[COUNTERS.BACKEND_DROPPED] as number };
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
    for (let m = receiveMessageOnPort(events); m !== undefined; m = receiveMessageOnPort(events)) this.onEvent(m.message as WriterEvent);
  }

  private onEvent(event: WriterEvent): void {
    switch (event.type) {
      case "batch": {
        if (this.control !== null) Atomics.add(this.control, CONTROL.CONSUMED, 1);
        const sink = this.sink;
        if (sink === null) return;
        try {
          const result = sink(event.records);
          if (result instanceof Promise) {
            const tracked: Promise<void> = result.catch((error: unknown) => reportError("stream.sink", `stream: a logStream backend failed: ${describeError(error)}`)).finally(() => this.deliveries.delete(tracked));
            this.deliveries.add(tracked);
          }
        } catch (error) {
          reportError("stream.sink", `stream: a logStream backend failed: ${describeError(error)}`);
        }
        return;
      }
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
    this.linked = false;
  }

  /** Let every flush/stop waiter go (the writer is gone). */
  private releaseWaiters(): void {
    const waiters = [...this.flushWaiters.map((w) => w.resolve), ...this.doneWaiters];
    this.flushWaiters = [];
    this.doneWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private async settleDeliveries(): Promise<void> {
    while (this.deliveries.size > 0) await Promise.all([...this.deliveries]);
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
    this.sink = null;
    this.events?.close();
    this.keys?.close();
    this.events = null;
    this.keys = null;
    this.control = null;
    this.worker = null;
    this.writerAlive = false;
    this.removeHooks();
    this.releaseWaiters();
  }

  // The stream's drain in the process lifecycle (src/core/lifecycle.ts): a producer, so the ring
  // reaches the file and its backends before the logger and the sinks finish.
  private registerDrain(signals: boolean): void {
    if (this.unregisterDrain !== null) return;
    const waitMs = (deadline: number): number => Math.max(0, Math.min(this.config?.exitWaitMs ?? 2000, deadline - Date.now()));
    this.unregisterDrain = registerDrain({
      name: "stream",
      stage: "producer",
      drain: ({ reason, deadline }) => {
        if (reason === "beforeExit") this.flushSync(waitMs(deadline));
        else if (signals && (reason === "SIGINT" || reason === "SIGTERM")) this.stopSync(reason, waitMs(deadline));
      },
      exit: ({ reason, deadline }) => {
        // handleSignals: false — the ring is left as it is when the process ends by a signal.
        if (!signals && (reason === "SIGINT" || reason === "SIGTERM")) return;
        this.stopSync(reason === "beforeExit" ? "exit" : reason, waitMs(deadline));
      },
    });
  }

  private removeHooks(): void {
    this.unregisterDrain?.();
    this.unregisterDrain = null;
  }
}

/** Block this thread on `control[index]` until `ready(value)` or `waitMs` passes. */
/**
 * Resolve when `register`'s `settle` is called or after `waitMs`, whichever comes first. The timer
 * is referenced: it keeps the process alive while it waits, and bounds the wait.
 */
function waitAtMost(waitMs: number, register: (settle: () => void) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => settle(), waitMs);
    const settle = (): void => {
      clearTimeout(timer);
      resolve();
    };
    register(settle);
  });
}

function waitUntil(control: Int32Array, index: number, ready: (value: number) => boolean, waitMs: number): boolean {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const value = Atomics.load(control, index);
    if (ready(value)) return true;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    Atomics.wait(control, index, value, left);
  }
}

function getService(): StreamService {
  return processWide("stream", () => new StreamService());
}

const service = getService();

const DTYPE_HINT = "a Float32Array, a Float64Array or an array of numbers";

/**
 * Stream a probe from a tight loop: the first N values (RANKSCOPE_STREAM_VALUES, default 10) of
 * `values`, with its length, its element type and `index`, as one line of this rank's stream file:
 * `{"ts","rank","checkpoint","index","dtype","length","values"}`.
 *
 * Synchronous, no I/O, no allocation once `checkpoint` has been seen; if the ring is full the probe
 * is dropped and counted, never waited for. Starts the stream on first use when a destination is
 * known (RANKSCOPE_STREAM_FILE, or the run of a logger); otherwise warns once and counts.
 *
 * @param checkpoint where in the computation the values come from, e.g. `"logits"`
 * @param values the array to probe (only the first N values are copied)
 * @param index the position in the loop, e.g. the token index
 * @throws TypeError for a checkpoint that is not a non-empty string, values that are not array-like, or an index that is not a number
 */
export function streamValues(checkpoint: string, values: Float32Array | Float64Array | ArrayLike<number>, index: number): void {
  let producer = service.producer;
  if (producer === null) {
    if (!service.startLazily()) return;
    producer = service.producer as RingProducer | null;
    if (producer === null) return;
  }
  if (typeof index !== "number" || values === null || typeof values !== "object" || typeof values.length !== "number") {
    throw new TypeError(`streamValues("${String(checkpoint)}", values, index) takes ${DTYPE_HINT} and a numeric index, got ${typeof values} values and a ${typeof index} index`);
  }
  let id = service.probeIds.get(checkpoint);
  if (id === undefined) {
    if (typeof checkpoint !== "string" || checkpoint.length === 0) throw new TypeError(`streamValues checkpoint must be a non-empty string, got ${String(checkpoint)}`);
    id = service.internKey(checkpoint);
    service.probeIds.set(checkpoint, id);
  }
  producer.pushProbe(id, values, index);
}

/**
 * Start the stream now, with explicit options (which beat the environment; a conflict is a
 * warning). Optional: `streamValues` and `per_rank_no_reduce` backends start it on first use.
 * @throws TypeError for an invalid option, or when no file is given and none can be derived
 */
export function startStream(options: StreamOptions = {}): void {
  service.start(options, "user");
}

/** Wait (at most `waitMs`) until everything streamed so far is written and handed to backends. */
export function flushStream(waitMs = DEFAULT_ASYNC_WAIT_MS): Promise<void> {
  return service.flush(waitMs);
}

/**
 * Drain the ring, write the final line (`stream_end` with the counts) and stop the writer. A later
 * `streamValues` starts a new stream. Resolves with the final counts (null if it never started).
 */
export function stopStream(waitMs = DEFAULT_ASYNC_WAIT_MS): Promise<StreamCounts | null> {
  return service.stop(waitMs);
}

/** Counts of the stream: written, dropped (and why), pending. */
export function streamStats(): StreamStats {
  return service.stats();
}

/**
 * For the rank runtime: start the stream if needed (to `{runDir}/streams/rank-{rank}.jsonl` unless
 * configured otherwise), hand decoded records to `sink`, and return the collector's producer.
 */
export function attachStreamBackends(sink: StreamBatchSink, identity: RankIdentity, runDir: string): StreamProducer {
  if (service.disabled) {
    warn("stream.disabled", "RANKSCOPE_DISABLE_STREAM is set, so per_rank_no_reduce backends receive no values; unset it to stream them");
  } else if (!service.running) {
    service.start({}, "runtime", identity, runDir);
  }
  service.attachSink(sink);
  return service.metricProducer;
}

/** For the rank runtime: deliver what is in the ring to the backends, then stop handing records on. */
export function detachStreamBackends(): Promise<void> {
  return service.detachSink();
}

/**
 * For a worker thread of yours that streams: call in the main thread (the stream running) and
 * pass the port to the worker (`workerData` + `transferList`); the worker calls
 * `attachStreamLink(port)` before it streams. Its values then go through a ring of its own into
 * this process's stream file, drained by the same writer.
 * @throws Error when the stream is not running in this thread
 */
export function streamLinkForWorker(): MessagePort {
  return service.linkForWorker();
}

/**
 * In a worker thread: stream into the main thread's stream through `port` (from
 * `streamLinkForWorker()`), instead of starting a writer of this thread's own.
 * @throws TypeError for a port that did not come from `streamLinkForWorker()`
 */
export function attachStreamLink(port: MessagePort): void {
  service.attachLink(port);
}

/** The stream's drop count, recorded into the collector at each flush as `rankscope/stream_dropped`. */
export { STREAM_DROPPED_KEY };

/**
 * Record the stream's cumulative drop count (reduced by sum across ranks) while a stream runs here,
 * and at every flush after anything was dropped, so a loss is never silent.
 */
export function recordStreamDropped(collector: Collector): void {
  const dropped = service.stats().dropped;
  if (!service.running && dropped === 0) return;
  const entry = collector.entryFor(STREAM_DROPPED_KEY, "sum");
  // Appended directly: the count itself must not go through the stream it counts.
  entry?.accumulator.append(dropped as never);
}

/**
 * The collector's stream hook without any backend: every numeric value recorded goes to the stream
 * file only (benchmarks; a job that wants its raw values on disk without a `logStream` backend).
 * Starts the stream if needed. Install it with `getCollector().stream = metricStreamProducer()`.
 */
export function metricStreamProducer(options: StreamOptions = {}): StreamProducer {
  if (!service.running) service.start(options, "user");
  return service.metricProducer;
}
