/**
 * `tensorboard`: a native tfevents writer — TensorBoard reads the run directory as it is.
 *
 * Files: `tensorboard/events.out.tfevents.{seconds}.{host}.{pid}.{n}` in the run directory;
 * per-rank modes write `tensorboard/{rankName}/…`, so TensorBoard shows one run per rank (with
 * `perRankShareRun`, every rank writes into `tensorboard/` and tags are prefixed `{rankName}/`).
 * The controller's own per-rank values are the run named by its processName; a user worker
 * thread's raw values are the run `{rankName}/thread-{t}` (shared: tags `{rankName}/thread-{t}/…`),
 * see docs/DESIGN.md, "Identity".
 *
 * What is written: every reduced scalar (wall time = the flush's time), stream values (wall time =
 * the value's own timestamp), histograms, samples as text tables, the config as hparams, and a
 * `SessionLog START` before each attempt's first data, at its first step (or the resumed step).
 * Staged events are written at each flush and at finish.
 *
 * Options: `dir`, the directory relative to the run directory (default `tensorboard`);
 * `internal` (default false): also write rankscope's own keys (`…__count`, `rankscope/…`, see
 * `isInternalKey`), which are otherwise left out so they do not crowd the user's charts.
 *
 * TensorBoard keeps one point per step and tag (its Rust reader takes a repeated step as a
 * restart), so stream values recorded within one step show as the last of them there; every value
 * is in the file, and in the store and JSONL backends.
 */
import { isAbsolute, join } from "node:path";
import { withoutInternalKeys } from "../../core/internal-keys.js";
import { TENSORBOARD_OPTIONS } from "./options.js";
import type { HistogramMetric, Metric, SampleBatch, StreamRecord } from "../../core/metric.js";
import type { Backend, BackendContext, BackendOptions } from "../backend.js";
import { registerBackend } from "../backend.js";
import { mergeHyperparams } from "../../core/hyperparams.js";
import { hparamsEvent, histogramEvent, scalarEvents, textEvent } from "./events.js";
import { TfEventsWriter } from "./writer.js";

export { TfEventsWriter, eventFileName, type TfEventsWriterOptions } from "./writer.js";
export { frameRecords, maskedCrc32c } from "./record.js";
export {
  fileVersionEvent,
  histogramEvent,
  hparamsEvent,
  scalarEvents,
  sessionStartEvent,
  textEvent,
  type ScalarPoint,
} from "./events.js";

/** The default directory of event files, relative to the run directory. */
export const DEFAULT_TENSORBOARD_DIR = "tensorboard";

class TensorBoardBackend implements Backend {
  private writer: TfEventsWriter | null = null;
  private dir = "";
  /** Event files of user worker threads' raw values (a run each), by thread id. */
  private readonly threadWriters = new Map<number, TfEventsWriter>();
  /** Whether ranks share one run (tags prefixed) rather than a run each. */
  private shared = false;

  /**
   * The event file, created on first write: a controller-side instance that only hands a shared
   * run to its ranks (perRankShareRun) writes nothing and leaves no empty file behind.
   */
  private open(): TfEventsWriter {
    this.writer ??= new TfEventsWriter(this.dir);
    return this.writer;
  }
  private tagPrefix = "";
  private readonly tags = new Map<string, string>();
  /** Step and time (ms) of the flush being logged, so its samples share the scalars' wall time. */
  private flushStep = -1;
  private flushTime = 0;
  private resumeStep = 0;
  private sessionStarted = false;
  /** Every hyperparameter logged so far (merged); written as one session_start_info. */
  private hparams: Record<string, unknown> = {};
  private hparamsPending = false;
  private readonly tagOf = (key: string): string => {
    if (this.tagPrefix === "") return key;
    let tag = this.tags.get(key);
    if (tag === undefined) {
      tag = this.tagPrefix + key;
      this.tags.set(key, tag);
    }
    return tag;
  };

  constructor(private readonly options: BackendOptions) {}

  init(context: BackendContext): void {
    const configured = this.options["dir"];
    const base = typeof configured === "string" ? configured : DEFAULT_TENSORBOARD_DIR;
    let dir = isAbsolute(base) ? base : join(context.runDir, base);
    if (context.role === "rank") {
      this.shared = this.options.perRankShareRun === true;
      if (this.shared) this.tagPrefix = `${context.identity.rankName}/`;
      else dir = join(dir, context.identity.rankName);
    }
    this.resumeStep = context.resumeStep;
    this.dir = dir;
  }

  /**
   * Before an attempt's first data: SessionLog START at the resumed step, else at the first step
   * logged — the step from which TensorBoard's Python reader drops an earlier attempt's points, as
   * its Rust data server does by itself when steps go back. A rank that joins a running job late
   * thus drops nothing before its first step.
   */
  private startSession(step: number): void {
    if (this.sessionStarted) return;
    this.sessionStarted = true;
    this.writeHparams();
    this.open().startSession(this.resumeStep > 0 ? this.resumeStep : step);
  }

  /** The merged hyperparameters as one session_start_info, if any are waiting. */
  private writeHparams(): void {
    if (!this.hparamsPending) return;
    this.hparamsPending = false;
    this.open().write([hparamsEvent(this.hparams, Date.now())]);
  }

  logBatch(all: readonly Metric[], step: number): void {
    const metrics = withoutInternalKeys(all, this.options["internal"] === true);
    const first = metrics[0];
    if (first === undefined) return;
    this.startSession(step);
    this.noteFlush(step, first.timestamp);
    this.open().stage(scalarEvents(metrics, this.tagOf));
  }

  logStream(all: readonly StreamRecord[]): void {
    const batch = withoutInternalKeys(all, this.options["internal"] === true);
    const first = batch[0];
    if (first === undefined) return;
    this.startSession(first.step);
    // Stream backends get no flush calls: their events go to the file's queue at once.
    const own = batch.every((r) => r.thread === 0) ? batch : batch.filter((r) => r.thread === 0);
    if (own.length > 0) this.open().write(scalarEvents(own, this.tagOf));
    if (own.length < batch.length) this.logThreadStreams(batch);
  }

  /** A user worker thread's raw values: a run of its own (`{rankName}/thread-{t}`), or a tag prefix in a shared run. */
  private logThreadStreams(batch: readonly StreamRecord[]): void {
    const byThread = new Map<number, StreamRecord[]>();
    for (const r of batch) {
      if (r.thread === 0) continue;
      const records = byThread.get(r.thread) ?? [];
      records.push(r);
      byThread.set(r.thread, records);
    }
    for (const [thread, records] of byThread) {
      const prefix = `${this.tagPrefix}thread-${thread}/`;
      if (this.shared) this.open().write(scalarEvents(records, (key) => prefix + key));
      else this.threadWriter(thread).write(scalarEvents(records));
    }
  }

  private threadWriter(thread: number): TfEventsWriter {
    let writer = this.threadWriters.get(thread);
    if (writer === undefined) {
      writer = new TfEventsWriter(join(this.dir, `thread-${thread}`));
      this.threadWriters.set(thread, writer);
    }
    return writer;
  }

  logHistograms(histograms: readonly HistogramMetric[], step: number): void {
    const first = histograms[0];
    if (first === undefined) return;
    this.startSession(step);
    this.noteFlush(step, first.timestamp);
    const entries = histograms.map((h) => ({ tag: this.tagOf(h.key), data: h.histogram }));
    this.open().stage([histogramEvent(entries, step, first.timestamp)]);
  }

  logSamples(samples: SampleBatch, step: number): void {
    const tables = Object.keys(samples)
      .sort()
      .map((key) => ({ tag: this.tagOf(key), records: samples[key] ?? [] }));
    const event = textEvent(tables, step, step === this.flushStep ? this.flushTime : Date.now());
    if (event === null) return;
    this.startSession(step);
    this.open().stage([event]);
  }

  /**
   * Hyperparameters (the run config at init, and the user's): merged, and written as one
   * `session_start_info` before the attempt's first data, so every call made before the first
   * flush shows. TensorBoard keeps a run's first `session_start_info`: later calls write the merged
   * set again, which readers that take the last one show and TensorBoard's HParams tab does not.
   */
  logHyperparams(params: Readonly<Record<string, unknown>>): void {
    this.hparams = mergeHyperparams(this.hparams, params);
    this.hparamsPending = true;
    if (this.sessionStarted) this.writeHparams();
  }

  private noteFlush(step: number, timestamp: number): void {
    this.flushStep = step;
    this.flushTime = timestamp;
  }

  async flushed(): Promise<void> {
    await Promise.all([this.writer?.flush(), ...[...this.threadWriters.values()].map((w) => w.flush())]);
  }

  async finish(): Promise<void> {
    this.writeHparams();
    await Promise.all([this.writer?.flush(), ...[...this.threadWriters.values()].map((w) => w.flush())]);
  }
}

registerBackend("tensorboard", (options) => new TensorBoardBackend(options), {
  options: TENSORBOARD_OPTIONS,
  pathOptions: ["dir"],
});
