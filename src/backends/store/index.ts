/**
 * `store`: the embedded default backend — a SQLite file (`metrics.db`, WAL) in the run directory,
 * read by `rankscope ui`, `runs`, `tail` and `export` through the read API re-exported here
 * (`import { listRuns, series } from "rankscope/store"`).
 *
 * Each flush becomes one batch (metrics, histograms, samples) written in one transaction on a
 * worker thread, so the user's loop only pays for building the batch. Writes that fail are
 * reported and counted, never thrown into the loop. Every series is stored under its line
 * (docs/DESIGN.md, "Identity"): `global_reduce` under −1, the controller's own per-rank values under
 * −2, rank r's under r, and a user worker thread's raw values under its thread line.
 *
 * Options:
 * - `worker` (default true): write on a worker thread; false writes on the calling thread at the
 *   end of each flush.
 * - `waitForWrites` (default false): make each flush wait until its batch is committed (readers
 *   then see a step as soon as `flush(step)` resolves).
 * - `maxPendingBatches` (default 256): when this many batches are queued, flushes wait for the
 *   writer to catch up instead of growing memory.
 * - `commitIntervalMs` (default 200; 0 with `waitForWrites`): at most one transaction per interval
 *   on the writer thread; batches arriving in between are written together.
 * - `server`, `serverToken` (`RANKSCOPE_SERVER_URL`, `RANKSCOPE_SERVER_TOKEN`), `serverProject`,
 *   `syncIntervalMs`, `syncFinishDeadlineMs`, `syncSendDeadlineMs`: the controller's store streams
 *   what it commits to a team server from a thread of its own (`src/sync/live.ts`,
 *   docs/server.md); the local store stays the source of truth.
 */
import type { Worker } from "node:worker_threads";
import { packageModule, startModuleWorker } from "../../core/module-worker.js";
import { describeError, reportError } from "../../core/diagnostics.js";
import type { AlertEvent } from "../../core/alert.js";
import type { HistogramMetric, Metric, RankLoss, SampleBatch, StreamRecord } from "../../core/metric.js";
import type { RankTimingRecord } from "../../core/straggler-report.js";
import type { Backend, BackendContext, BackendOptions } from "../backend.js";
import { registerBackend } from "../backend.js";
import { GLOBAL_RANK, storePath } from "../../store/schema.js";
import type { WorkerReply, WorkerRequest, WriterThreadData } from "./writer-worker.js";
import { endingAbnormally, registerDrain } from "../../core/lifecycle.js";
import { mergeHyperparams } from "../../core/hyperparams.js";
import { ColumnBuilder, columnBuffers } from "../../store/columns.js";
import { toRankTimingWrite, type TimingRanks } from "../../store/rank-timing.js";
import {
  StoreWriter,
  type HistogramWrite,
  type LineWrite,
  type LostRankWrite,
  type RankTimingWrite,
  type RawPoint,
  type SampleWrite,
  type StoreWriterOptions,
  type WriteBatch,
  type WriterStatus,
} from "../../store/writer.js";
import { hostname } from "node:os";
import { lineOf, recorderOf, recorderPath } from "../../core/rank-identity.js";
import { resolveSyncSettings, type LiveSyncSettings } from "../../sync/settings.js";
import { checkOptions } from "../option-schema.js";
import { STORE_OPTIONS } from "./options.js";
import { z } from "zod";
import type { LiveSync } from "../../sync/live.js";
import { trackStoreWriter } from "../../sync/writers.js";

/** The batch being built between two sends (a `WriteBatch` with mutable arrays). */
interface PendingBatch {
  scalars?: ColumnBuilder;
  streams?: ColumnBuilder;
  system?: RawPoint[];
  samples?: SampleWrite[];
  histograms?: HistogramWrite[];
  hyperparams?: Record<string, unknown>;
  alerts?: AlertEvent[];
  rankTiming?: RankTimingWrite[];
  lostRanks?: LostRankWrite[];
  lines?: LineWrite[];
}

export * from "../../store/reader.js";
export {
  StoreWriter,
  type LostRankWrite,
  type RankTimingWrite,
  type ScalarPoint,
  type RawPoint,
  type SampleWrite,
  type SamplesEntry,
  type HistogramWrite,
  type LineWrite,
  type WriteBatch,
  type StoreWriterOptions,
  type WriterStatus,
} from "../../store/writer.js";
export { storePath } from "../../store/schema.js";

/** Where a batch goes: a worker thread or the calling thread. */
interface WriterChannel {
  /** Send a request; `transfer` lists buffers the message gives away (not copied). */
  request(message: DistributiveOmit<WorkerRequest, "id">, transfer?: ArrayBuffer[]): Promise<void>;
  /**
   * At exit, where nothing can be awaited: send `message` and block until the writer handled it
   * and everything before it, at most `waitMs`. False when the wait ran out.
   */
  requestSync(message: DistributiveOmit<WorkerRequest, "id">, waitMs: number): boolean;
  close(): Promise<void>;
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

/** A request with its id. */
function withId(message: DistributiveOmit<WorkerRequest, "id">, id: number): WorkerRequest {
  return { ...message, id };
}

/** Runs the writer on a worker thread; replies resolve requests in order. */
class WorkerChannel implements WriterChannel {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();
  private nextId = 1;
  private dead: Error | null = null;
  private readonly progress = new Int32Array(new SharedArrayBuffer(4));

  constructor() {
    this.worker = startModuleWorker(packageModule("backends/store/writer-worker"), {
      workerData: { progress: this.progress } satisfies WriterThreadData,
    });
    this.worker.unref();
    this.worker.on("message", (reply: WorkerReply) => {
      const w = this.waiting.get(reply.id);
      if (w === undefined) return;
      this.waiting.delete(reply.id);
      if (this.waiting.size === 0) this.worker.unref();
      if (reply.error === undefined) w.resolve();
      else w.reject(new Error(reply.error));
    });
    const fail = (error: Error): void => {
      this.dead = error;
      for (const w of this.waiting.values()) w.reject(error);
      this.waiting.clear();
    };
    this.worker.on("error", fail);
    this.worker.on("exit", (code) => fail(new Error(`the store writer thread exited (code ${code})`)));
  }

  request(message: DistributiveOmit<WorkerRequest, "id">, transfer: ArrayBuffer[] = []): Promise<void> {
    if (this.dead !== null) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise<void>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      // Keep the process alive while writes are queued, so a finished loop does not lose them.
      this.worker.ref();
      this.worker.postMessage(withId(message, id), transfer);
    });
  }

  requestSync(message: DistributiveOmit<WorkerRequest, "id">, waitMs: number): boolean {
    if (this.dead !== null) return false;
    const id = this.nextId++;
    this.worker.postMessage(withId(message, id));
    const deadline = Date.now() + waitMs;
    for (;;) {
      const done = Atomics.load(this.progress, 0);
      if (done >= id) return true;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      Atomics.wait(this.progress, 0, done, left);
    }
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

/** Runs the writer on the calling thread. */
class InlineChannel implements WriterChannel {
  private writer: StoreWriter | null = null;

  request(message: DistributiveOmit<WorkerRequest, "id">): Promise<void> {
    try {
      if (message.op === "open") this.writer = StoreWriter.open(message.options);
      else if (message.op === "write") {
        if (this.writer === null) throw new Error("the store was not opened (its init failed)");
        this.writer.write(message.batch);
      } else {
        this.writer?.finish(message.status);
        this.writer = null;
      }
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  requestSync(message: DistributiveOmit<WorkerRequest, "id">): boolean {
    // Inline requests run synchronously; a failure is reported like any other exit-path failure.
    this.request(message).catch((error: unknown) =>
      reportError("store.exit", `the store could not be finished at exit: ${describeError(error)}`),
    );
    return true;
  }

  async close(): Promise<void> {
    this.writer?.close();
    this.writer = null;
  }
}

const STORE_SCHEMA = z.object(STORE_OPTIONS);

/** The store's own options with their defaults; a TypeError saying what is valid (config validation ran the same check at `initBackends`). */
function parseStoreOptions(options: BackendOptions): {
  useWorker: boolean;
  waitForWrites: boolean;
  maxPendingBatches: number;
  commitIntervalMs: number;
} {
  const o = checkOptions('backend "store"', STORE_SCHEMA, options);
  return {
    useWorker: o.worker ?? true,
    waitForWrites: o.waitForWrites ?? false,
    maxPendingBatches: o.maxPendingBatches ?? 256,
    commitIntervalMs: o.commitIntervalMs ?? 200,
  };
}

/** The `store` backend. Besides the Backend methods, `logSystem` stores system-monitor samples. */
export class StoreBackend implements Backend {
  private channel: WriterChannel | null = null;
  private context: BackendContext | null = null;
  /** This backend's line: −1 for a global backend, else its identity's (−2 for the controller's own). */
  private rank = GLOBAL_RANK;
  /** Lines of raw values named in `ranks` so far (this backend's own, and its workers'). */
  private readonly namedLines = new Set<number>();
  private batch: PendingBatch = {};
  private batchSize = 0;
  private scheduled: NodeJS.Immediate | null = null;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly useWorker: boolean;
  private readonly waitForWrites: boolean;
  private readonly maxPendingBatches: number;
  private readonly commitIntervalMs: number;
  /** Batches that could not be written (each reported, first per kind of error). */
  lostBatches = 0;
  /** The ranks of the last per-rank timings sent to the writer (it is sent their list only when it changes). */
  private timingRanks: TimingRanks | null = null;
  private unregisterDrain: (() => void) | null = null;
  private finishing: Promise<void> | null = null;
  private readonly syncSettings: LiveSyncSettings | null;
  private sync: LiveSync | null = null;
  /** Says this writer finished (the live sync's last pass waits for every writer of the run in this process). */
  private released: (() => void) | null = null;

  constructor(options: BackendOptions) {
    ({
      useWorker: this.useWorker,
      waitForWrites: this.waitForWrites,
      maxPendingBatches: this.maxPendingBatches,
      commitIntervalMs: this.commitIntervalMs,
    } = parseStoreOptions(options));
    this.syncSettings = resolveSyncSettings(options);
  }

  async init(context: BackendContext): Promise<void> {
    this.context = context;
    this.rank = context.role === "controller" ? GLOBAL_RANK : lineOf(recorderOf(context.identity));
    this.namedLines.add(this.rank);
    const options: StoreWriterOptions = {
      runDir: context.runDir,
      role: context.role,
      rank: this.rank,
      rankName: context.role === "controller" ? context.displayName : context.identity.rankName,
      host: hostname(),
      experiment: context.experiment,
      trial: context.trial,
      resumeStep: context.resumeStep,
    };
    this.channel = this.useWorker ? new WorkerChannel() : new InlineChannel();
    try {
      await this.channel.request({
        op: "open",
        options,
        commitIntervalMs: this.waitForWrites ? 0 : this.commitIntervalMs,
      });
    } catch (error) {
      await this.channel.close();
      this.channel = null;
      throw new Error(`could not open the store ${storePath(context.runDir)}: ${describeError(error)}`, {
        cause: error,
      });
    }
    this.released = trackStoreWriter(context.runDir);
    // The controller's store streams the run to a team server when one is configured.
    if (context.role === "controller" && this.syncSettings !== null) {
      const { LiveSync } = await import("../../sync/live.js");
      this.sync = new LiveSync(context.runDir, this.syncSettings);
    }
    // At a signal its queued batches are written (the logger's shutdown marks the run crashed); at
    // exit — process.exit(), an uncaught exception, after a signal — synchronously, run marked too.
    this.unregisterDrain = registerDrain({
      name: `store writer (${storePath(context.runDir)})`,
      stage: "sink",
      drain: () => (this.batchSize > 0 || this.inFlight.size > 0 ? this.drain() : undefined),
      exit: ({ deadline }) => this.finishSync(Math.max(100, deadline - Date.now())),
    });
  }

  logBatch(metrics: readonly Metric[], step: number): void {
    if (metrics.length === 0) return;
    const scalars = (this.batch.scalars ??= new ColumnBuilder());
    for (const m of metrics) {
      // Metrics on an axis of their own (the system monitor's `system/step`) are system metrics:
      // stored apart, so they never mix with the training step's series.
      if (m.axis !== undefined)
        (this.batch.system ??= []).push({
          key: m.key,
          step: m.step,
          wall: m.timestamp,
          value: m.value,
          rank: this.rank,
        });
      else scalars.add(m.key, this.rank, step, m.timestamp, m.value, m.reduce);
    }
    this.added(metrics.length);
  }

  logStream(batch: readonly StreamRecord[]): void {
    if (batch.length === 0) return;
    const streams = (this.batch.streams ??= new ColumnBuilder());
    for (const r of batch) {
      // Each record under its recorder's line: the controller's never rank 0's, a worker's its own.
      const line = lineOf(r);
      if (!this.namedLines.has(line)) this.nameLine(line, recorderPath(r));
      streams.add(r.key, line, r.step, r.timestamp, r.value);
    }
    this.added(batch.length);
  }

  logSamples(samples: SampleBatch, step: number): void {
    const entries = (this.batch.samples ??= []);
    const wall = Date.now();
    for (const key of Object.keys(samples).sort())
      entries.push({ key, step, wall, records: samples[key] ?? [], rank: this.rank });
    this.added(1);
  }

  logHistograms(histograms: readonly HistogramMetric[], step: number): void {
    const entries = (this.batch.histograms ??= []);
    for (const h of histograms)
      entries.push({ key: h.key, step, wall: h.timestamp, histogram: h.histogram, rank: this.rank });
    this.added(histograms.length);
  }

  logHyperparams(params: Readonly<Record<string, unknown>>): void {
    this.batch.hyperparams = mergeHyperparams(this.batch.hyperparams ?? {}, params);
    this.added(1);
  }

  /** An alert fired or resolved (the controller's store only): the dashboard's banner and Alerts tab read them. */
  logAlert(alert: AlertEvent): void {
    (this.batch.alerts ??= []).push(alert);
    this.added(1);
  }

  /**
   * Keep one flush's per-rank timings and straggler report (the Ranks view). The writer thread is
   * handed float32 columns (moved, not copied) and the ranks' names only when they changed.
   */
  logRankTiming(record: RankTimingRecord): void {
    (this.batch.rankTiming ??= []).push(toRankTimingWrite(record, this.timingRanks));
    this.timingRanks = record;
    this.added(1);
  }

  /** A rank the controller lost, or one back (the dashboard marks the rank's lines and the run from these). */
  logRankLoss(loss: RankLoss): void {
    (this.batch.lostRanks ??= []).push({
      rank: loss.rank,
      rankName: loss.rankName,
      step: loss.step,
      wall: loss.timestamp,
      reason: loss.reason,
      ...(loss.back === true ? { back: true } : {}),
    });
    this.added(1);
  }

  /** Store system-monitor samples (their own x axis: wall time; `step` is the sample's index or the training step). */
  logSystem(records: readonly RawPoint[]): void {
    if (records.length === 0) return;
    const system = (this.batch.system ??= []);
    for (const r of records) system.push({ ...r, rank: r.rank ?? this.rank });
    this.added(records.length);
  }

  /** End of a flush: send its batch now (one transaction), and wait only when asked or when the writer is far behind. */
  async flushed(): Promise<void> {
    this.send();
    if (this.waitForWrites) await this.drain();
    else while (this.inFlight.size >= this.maxPendingBatches) await Promise.race(this.inFlight);
  }

  /** Wait until every batch handed over so far is committed (or failed and reported). */
  async drain(): Promise<void> {
    this.send();
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /**
   * End the writer: write what is queued, mark it `status` (default: `crashed` when the process is
   * ending by a signal or an uncaught exception, else `finished`) and close the file.
   */
  finish(status: WriterStatus = endingAbnormally() ? "crashed" : "finished"): Promise<void> {
    // Once: a second finish while the first drains would send its own finish to a writer the
    // first is closing ("the store writer thread exited").
    this.finishing ??= this.finishOnce(status);
    return this.finishing;
  }

  private async finishOnce(status: WriterStatus): Promise<void> {
    const channel = this.channel;
    if (channel === null) return;
    await this.drain();
    this.channel = null;
    this.unregisterDrain?.();
    this.unregisterDrain = null;
    try {
      await channel.request({ op: "finish", status });
    } catch (error) {
      reportError(
        `store.finish:${this.context?.runDir ?? ""}`,
        `could not mark the store of ${this.context?.runDir ?? "?"} finished: ${describeError(error)}`,
      );
    }
    await channel.close();
    this.released?.();
    this.released = null;
    const sync = this.sync;
    this.sync = null;
    await sync?.finish();
  }

  /**
   * The exit path (nothing can be awaited): hand the pending batch and a finish request to the
   * writer and block until it has written them, at most `waitMs`. What it could not write in time
   * is reported and counted.
   */
  finishSync(waitMs: number, status: WriterStatus = endingAbnormally() ? "crashed" : "finished"): void {
    const channel = this.channel;
    if (channel === null) return;
    this.send();
    this.channel = null;
    this.unregisterDrain?.();
    this.unregisterDrain = null;
    this.sync?.abandon();
    this.sync = null;
    this.released?.();
    this.released = null;
    if (!channel.requestSync({ op: "finish", status }, waitMs)) {
      const queued = this.inFlight.size;
      this.lostBatches += queued;
      reportError(
        `store.exit:${this.context?.runDir ?? ""}`,
        `the store writer of ${storePath(this.context?.runDir ?? ".")} did not finish within ${waitMs} ms at exit; up to ${queued} batch(es) were not written and the run is not marked ended (raise RANKSCOPE_DRAIN_DEADLINE_MS)`,
      );
    }
  }

  private nameLine(line: number, name: string): void {
    this.namedLines.add(line);
    (this.batch.lines ??= []).push({ line, name, host: hostname() });
  }

  private added(n: number): void {
    this.batchSize += n;
    // Values logged outside a flush (streams, hyperparameters) go out on the next turn of the loop.
    if (this.scheduled === null) this.scheduled = setImmediate(() => this.send());
  }

  private send(): void {
    if (this.scheduled !== null) {
      clearImmediate(this.scheduled);
      this.scheduled = null;
    }
    if (this.batchSize === 0) return;
    const pending = this.batch;
    this.batch = {};
    this.batchSize = 0;
    const { scalars, streams, ...rest } = pending;
    const batch: WriteBatch = { ...rest };
    const transfer: ArrayBuffer[] = [];
    if (scalars !== undefined) {
      const columns = scalars.build();
      batch.scalarColumns = columns;
      transfer.push(...columnBuffers(columns));
    }
    if (streams !== undefined) {
      const columns = streams.build();
      batch.streamColumns = columns;
      transfer.push(...columnBuffers(columns));
    }
    for (const t of rest.rankTiming ?? [])
      for (const column of [t.stepMs, t.latenessMs, t.waitMs])
        if (column.buffer instanceof ArrayBuffer) transfer.push(column.buffer);
    const channel = this.channel;
    if (channel === null) {
      this.lostBatches++;
      reportError(
        "store.closed",
        "values were logged to the store backend after it finished (or failed to start); they are dropped and counted",
      );
      return;
    }
    const done = channel.request({ op: "write", batch }, transfer).catch((error: unknown) => {
      this.lostBatches++;
      reportError(
        `store.write:${this.context?.runDir ?? ""}`,
        `could not write to ${storePath(this.context?.runDir ?? ".")}: ${describeError(error)}; the batch is dropped and counted, the job goes on`,
      );
    });
    this.inFlight.add(done);
    void done.finally(() => this.inFlight.delete(done));
  }
}

registerBackend("store", (options) => new StoreBackend(options), {
  options: STORE_OPTIONS,
  // The sync's settings from the environment too, and a server without a token.
  validate: (options) => void resolveSyncSettings(options),
});
