/**
 * The stream path (seed 004): raw values recorded in tight loops, written off the caller's thread.
 *
 * This file is the public surface; the thread's service (ring, writer, waits) is service.ts, the
 * collector's hook metric-producer.ts, the worker-thread hand-off link.ts.
 *
 * `streamValues(checkpoint, values, index)` (probes) and `per_rank_no_reduce` metrics put one
 * fixed-size slot each into this thread's ring (see ring.ts): no I/O, no await, no allocation once
 * the key is interned. The writer worker (writer.ts) drains the ring to `{runDir}/streams/rank-{r}.jsonl`
 * (or RANKSCOPE_STREAM_FILE) and, when some backend takes `logStream`, posts decoded batches back
 * here, where they are handed to those backends off the recording call.
 *
 * Exit: normal exit, `beforeExit`, SIGINT/SIGTERM and an uncaught exception all drain the ring
 * with a bounded wait (`exitWaitMs`, default 2 s, within the lifecycle's drain deadline): the
 * stream is a drain of the process lifecycle (drain.ts, src/core/lifecycle.ts), which ends the
 * process by the signal afterwards. Everything lost on the way — ring full, write errors, a main thread too far behind for
 * the backends — is counted (`streamStats()`, the writer's final line, and `rankscope/stream_dropped`
 * at every metric flush).
 */
import type { MessagePort } from "node:worker_threads";
import type { RankIdentity } from "../core/rank-identity.js";
import { isMainThread } from "node:worker_threads";
import { getCollector, type Collector, type StreamProducer } from "../core/collector.js";
import { onWorkerCollectorLinked } from "../core/worker-link.js";
import { linkWorkerStream, workerStreamHost } from "./worker-streams.js";
import { warn } from "../core/diagnostics.js";
import { STREAM_DROPPED_KEY } from "../core/internal-keys.js";
import { processWide } from "../core/process-wide.js";
import type { StreamOptions } from "./config.js";
import type { StreamCounts } from "./format.js";
import { DEFAULT_ASYNC_WAIT_MS, StreamService, type StreamStats } from "./service.js";
import type { StreamBatchSink } from "./sink.js";

export type { StreamOptions, StreamConfig } from "./config.js";
export type { StreamCounts } from "./format.js";
export type { StreamStats } from "./service.js";
export type { StreamBatchSink } from "./sink.js";

/** This thread's stream service (one per thread, kept across module copies). */
const service = processWide("stream", () => new StreamService());

// A user's worker thread streams its raw values when its collector links to a main thread that
// streams metric values (worker-streams.ts); registered once per thread.
// The main thread answers them (with `none` while it does not stream), so they stop buffering.
if (!isMainThread)
  processWide(
    "workerStreamLink",
    () => (onWorkerCollectorLinked(() => linkWorkerStream(getCollector(), service)), true),
  );
else workerStreamHost();

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
export function streamValues(
  checkpoint: string,
  values: Float32Array | Float64Array | ArrayLike<number>,
  index: number,
): void {
  const producer = service.producer ?? service.startLazily();
  if (producer === null) return;
  if (typeof index !== "number" || values === null || typeof values !== "object" || typeof values.length !== "number") {
    throw new TypeError(
      `streamValues("${String(checkpoint)}", values, index) takes ${DTYPE_HINT} and a numeric index, got ${typeof values} values and a ${typeof index} index`,
    );
  }
  let id = service.probeIds.get(checkpoint);
  if (id === undefined) {
    if (typeof checkpoint !== "string" || checkpoint.length === 0)
      throw new TypeError(`streamValues checkpoint must be a non-empty string, got ${String(checkpoint)}`);
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
 * For a rank's flush: wait (at most `waitMs`) until everything streamed so far is written and
 * queued, in order, for the `logStream` backends, without waiting for their calls: a slow backend
 * costs its own backlog (counted at the flush), never the flush.
 */
export function handStreamToBackends(waitMs: number): Promise<void> {
  return service.flush(waitMs, false);
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
    warn(
      "stream.disabled",
      "RANKSCOPE_DISABLE_STREAM is set, so per_rank_no_reduce backends receive no values; unset it to stream them",
    );
  } else if (!service.running) {
    service.start({}, "runtime", identity, runDir);
  }
  service.attachSink(sink);
  return service.metricsProducer();
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
  const entry = collector.numericEntryFor(STREAM_DROPPED_KEY, "sum", "recordStreamDropped");
  // Appended directly: the count itself must not go through the stream it counts.
  entry?.accumulator.append(dropped);
}

/**
 * The collector's stream hook without any backend: every numeric value recorded goes to the stream
 * file only (benchmarks; a job that wants its raw values on disk without a `logStream` backend).
 * Starts the stream if needed. Install it with `getCollector().stream = metricStreamProducer()`.
 */
export function metricStreamProducer(options: StreamOptions = {}): StreamProducer {
  if (!service.running) service.start(options, "user");
  return service.metricsProducer();
}
