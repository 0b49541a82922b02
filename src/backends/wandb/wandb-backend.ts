/**
 * The `wandb` backend: rankscope's logging modes mapped onto W&B runs.
 *
 * - `global_reduce` (on the controller): one run, `{experiment}_{trial}` unless `runId` is given.
 * - `per_rank_reduce` / `per_rank_no_reduce` (on every rank): one run per rank, id
 *   `{runId}_{rankName}`, display name `{name}_{rankName}`, all in one group.
 * - with `perRankShareRun`: one run for all ranks. The controller-side instance (the primary)
 *   creates it and hands its id to the ranks (`metadataForRanks` → `primaryMetadata`); each rank
 *   writes through W&B's shared mode as its own client (its own offsets, so ranks never collide),
 *   with keys prefixed `{rankName}/` so every rank's values stay apart. The primary marks the run
 *   complete after the ranks have finished.
 *
 * Which run an instance writes, and as whom, is `run-role.ts`; samples become W&B tables in
 * `tables.ts`; the writer that sends (or spools) the rows is `writer/run-writer.ts`.
 *
 * Steps: each row has `_step` (W&B's, which must increase), `global_step` (the caller's step) and
 * `_timestamp` (seconds). A flush at a step not above the last one is logged at `last + 1` — the
 * rule AReaL uses — with `global_step` keeping the caller's step and a warning, never dropped.
 * Stream records (`per_rank_no_reduce`) are one row each with their own `_timestamp` and
 * `global_step`, so the W&B UI can plot them against either; a user worker thread's are keyed
 * `thread-{t}/{key}` in its rank's run (docs/DESIGN.md, "Identity"). The controller's own per-rank
 * values are the run `{runId}_{processName}`, never rank 0's.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describeError, reportError, warn } from "../../core/diagnostics.js";
import { mergeHyperparams } from "../../core/hyperparams.js";
import { withoutInternalKeys } from "../../core/internal-keys.js";
import { endingReason } from "../../core/lifecycle.js";
import type { HistogramMetric, Metric, SampleBatch, StreamRecord } from "../../core/metric.js";
import { monotonicCommitStep } from "../../core/step.js";
import { CONFIG_FILE, VERSION_FILE } from "../../run/run-files.js";
import type { Backend, BackendContext, BackendOptions } from "../backend.js";
import { configJson, SUMMARY_FILE } from "./client/api.js";
import { historyLine, historyNumber, histogramJson, quotedKey, RunSummary } from "./client/history.js";
import { resolveWandbOptions, type ResolvedWandbOptions } from "./options.js";
import { runOf, type Role, type SharedRunMetadata } from "./run-role.js";
import { tableFile } from "./tables.js";
import { exitCodeOf, RunWriter } from "./writer/run-writer.js";

/** `Metric.axis` / `HistogramMetric.axis` when set (a metric on an x-axis of its own). */
function axisOf(value: Metric | HistogramMetric): string | undefined {
  return value.axis !== undefined && value.axis.length > 0 ? value.axis : undefined;
}

/** Fields every history row has; a metric may not take their names. */
const RESERVED_KEYS = new Set(["_step", "_runtime", "_timestamp", "global_step"]);

export class WandbBackend implements Backend {
  private readonly options: ResolvedWandbOptions;
  private writer: RunWriter | null = null;
  private role: Role = "run";
  private prefix = "";
  private config: Record<string, unknown>;
  private readonly summary = new RunSummary();
  private startMs = Date.now();
  /** The last `_step` written (a row counter that only increases). */
  private lastStep = -1;
  /** The highest training step flushed (for the "step went back" warning). */
  private lastTrainStep = -1;
  // The row being built for the current flush (scalars, then histograms), written at `flushed()`.
  private rowFields = "";
  private rowStep = -1;
  private rowTimestamp = 0;
  private label = "";
  private readonly keyTexts = new Map<string, string>();
  private readonly summaryLine = (): string => this.summary.take();
  private disabled = false;
  private runDir = "";

  private readonly perRankShareRun: boolean;

  constructor(options: BackendOptions) {
    this.options = resolveWandbOptions(options);
    this.perRankShareRun = options.perRankShareRun === true;
    this.config = { ...this.options.config };
  }

  /** The writer (tests and the benchmark read its counters). */
  get runWriter(): RunWriter | null {
    return this.writer;
  }

  async init(context: BackendContext): Promise<void> {
    if (this.options.mode === "disabled") {
      this.disabled = true;
      return;
    }
    this.startMs = Date.now();
    this.runDir = context.runDir;
    const o = this.options;
    const run = runOf(o, this.config, context, this.perRankShareRun);
    this.role = run.role;
    this.prefix = run.prefix;
    this.label = run.label;
    const target = run.target;
    this.writer = new RunWriter(
      target,
      { baseUrl: o.baseUrl, apiKey: o.apiKey },
      o.limits,
      o.mode === "offline",
      this.label,
    );
    // An offline run resumed after earlier offline attempts continues their `_step` (the writer read the spool).
    this.lastStep = Math.max(context.resumeStep - 1, this.writer.resumedLastStep);
    this.lastTrainStep = context.resumeStep - 1;
    // Rows queued before the server said where a resumed run ends are moved above it by the writer.
    this.writer.onRestepped = (last) => {
      if (last > this.lastStep) this.lastStep = last;
    };
    if (context.role === "controller") {
      // Learn where the run is (and its last step, when resumed) before the first flush, without
      // ever hanging on a dead server. Ranks connect at their first row instead, so a rank that
      // logs nothing (the controller's own, in per-rank modes) creates no empty run.
      await this.writer.connect(Math.min(o.limits.requestTimeoutMs, 5_000));
      this.lastStep = Math.max(this.writer.resumedLastStep, this.lastStep);
    }
  }

  metadataForRanks(): Readonly<Record<string, unknown>> | undefined {
    if (this.role !== "primary" || this.writer === null) return undefined;
    const meta: SharedRunMetadata = { upsert: this.writer.target.upsert, resume: this.options.resume };
    return { ...meta };
  }

  logBatch(all: readonly Metric[], step: number): void {
    let metrics = withoutInternalKeys(all, this.options.internal);
    if (this.writer === null || metrics.length === 0) return;
    if (metrics.some((m) => axisOf(m) !== undefined)) {
      this.logAxisRows(metrics.filter((m) => axisOf(m) !== undefined));
      metrics = metrics.filter((m) => axisOf(m) === undefined);
      if (metrics.length === 0) return;
    }
    this.openRow(step, metrics[0]?.timestamp ?? Date.now());
    let fields = this.rowFields;
    for (const m of metrics) {
      const key = this.keyText(m.key);
      const value = historyNumber(m.value);
      fields += fields.length === 0 ? key + value : `,${key}${value}`;
      this.summary.set(key, value);
    }
    this.rowFields = fields;
  }

  logHistograms(histograms: readonly HistogramMetric[], step: number): void {
    if (this.writer === null || histograms.length === 0) return;
    if (histograms.some((h) => axisOf(h) !== undefined)) {
      this.logAxisRows(histograms.filter((h) => axisOf(h) !== undefined));
      histograms = histograms.filter((h) => axisOf(h) === undefined);
      if (histograms.length === 0) return;
    }
    this.openRow(step, histograms[0]?.timestamp ?? Date.now());
    for (const h of histograms) {
      const json = histogramJson(h.histogram);
      if (json === null) continue;
      const key = this.keyText(h.key);
      this.rowFields += `${this.rowFields.length === 0 ? "" : ","}${key}${json}`;
      // The summary holds the latest histogram, as W&B's SDK keeps it.
      this.summary.set(key, json);
    }
  }

  /**
   * `Reduce.SAMPLE` records as W&B tables, the way W&B's SDK logs a `wandb.Table`: the table (its
   * `columns` and `data`) is a run file `media/table/{key}_{step}_{sha256[:20]}.table.json`,
   * uploaded with the run, and the step's row holds `{"_type":"table-file","path",…}` under the key.
   */
  logSamples(samples: SampleBatch, step: number): void {
    if (this.writer === null) return;
    const keys = Object.keys(samples).sort();
    if (keys.length === 0) return;
    this.openRow(step, this.rowStep === step ? this.rowTimestamp : Date.now());
    for (const key of keys) {
      const table = tableFile(this.prefix + key, step, samples[key] ?? []);
      this.writer.queueFile(table.path, table.content);
      const keyText = this.keyText(key);
      this.rowFields += `${this.rowFields.length === 0 ? "" : ","}${keyText}${table.ref}`;
      this.summary.set(keyText, table.ref);
    }
  }

  logHyperparams(params: Readonly<Record<string, unknown>>): void {
    // A run shared by ranks has its config from the primary (the controller side), not from every rank.
    if (this.writer === null || this.role === "sharedRank") return;
    this.config = mergeHyperparams(this.config, params);
    this.writer.updateConfig(configJson(this.config));
  }

  logStream(all: readonly StreamRecord[]): void {
    const batch = withoutInternalKeys(all, this.options.internal);
    if (this.writer === null || batch.length === 0) return;
    const lines = new Array<string>(batch.length);
    let lastTimestamp = 0;
    for (let i = 0; i < batch.length; i++) {
      const r = batch[i];
      if (r === undefined) continue;
      // A user worker thread's raw values under their own recorder: `thread-{t}/` within the rank's run.
      const key = r.thread === 0 ? this.keyText(r.key) : this.keyText(`thread-${r.thread}/${r.key}`);
      const value = historyNumber(r.value);
      this.lastStep++;
      lines[i] = historyLine(this.lastStep, r.timestamp, r.timestamp - this.startMs, r.step, key + value);
      this.summary.set(key, value);
      lastTimestamp = r.timestamp;
    }
    this.summary.at(this.lastStep, lastTimestamp, lastTimestamp - this.startMs);
    this.writer.enqueue(lines);
    this.writer.summaryChanged(this.summaryLine);
  }

  /**
   * The flush's row is queued; while the run is spooled (offline), wait until it is on disk — in
   * the spool and in the offline run — so a `kill -9` after `flush()` returned loses none of it.
   */
  flushed(): Promise<void> | undefined {
    this.closeRow();
    // Live: nothing to wait for (no promise, no deadline timer).
    return this.writer?.persisted();
  }

  /** Finish the run: W&B is told the exit code the process ends with (143 after SIGTERM, 130 after SIGINT), 0 after a normal end. */
  async finish(): Promise<void> {
    if (this.disabled || this.writer === null) return;
    this.closeRow();
    if (this.role !== "sharedRank" && this.writer.started) this.queueRunFiles(this.writer);
    await this.writer.finish(exitCodeOf(endingReason()));
  }

  /**
   * The files W&B's SDK uploads with a run: `config.yaml` and `wandb-summary.json`; and our
   * `version.json`. The run files are read from the run directory when they exist.
   */
  private queueRunFiles(writer: RunWriter): void {
    for (const name of [CONFIG_FILE, VERSION_FILE]) {
      const path = join(this.runDir, name);
      if (!existsSync(path)) continue;
      try {
        writer.queueFile(name, readFileSync(path, "utf8"));
      } catch (error) {
        reportError(`wandb.runFile:${path}`, `wandb: could not read ${path} to upload it: ${describeError(error)}`);
      }
    }
    if (this.summary.size > 0) writer.queueFile(SUMMARY_FILE, this.summary.take());
  }

  /** `"{prefix}{key}":`, cached per key (keys repeat every step; ranks of a shared run add their prefix). */
  private keyText(key: string): string {
    let text = this.keyTexts.get(key);
    if (text === undefined) {
      let name = this.prefix + key;
      if (RESERVED_KEYS.has(name)) {
        // A metric named like a field of the row itself would make the line ambiguous.
        warn(
          `wandb.reservedKey:${name}`,
          `wandb: metric "${name}" has the name of a W&B row field; it is logged as "metric/${name}"`,
        );
        name = `metric/${name}`;
      }
      text = quotedKey(name);
      if (this.keyTexts.size < 100_000) this.keyTexts.set(key, text);
    }
    return text;
  }

  private openRow(step: number, timestamp: number): void {
    if (this.rowStep !== step) this.closeRow();
    this.rowStep = step;
    this.rowTimestamp = timestamp;
  }

  /**
   * Values on an x-axis of their own (`Metric.axis`, e.g. the system monitor's `system/step`): one
   * row per axis and step, carrying `{axis}: step` instead of `global_step`, at the next `_step`.
   * They never count as the training step going back.
   */
  private logAxisRows(values: readonly (Metric | HistogramMetric)[]): void {
    const rows = new Map<string, { axis: string; step: number; timestamp: number; fields: string }>();
    for (const v of values) {
      const axis = axisOf(v);
      const value = "histogram" in v ? histogramJson(v.histogram) : historyNumber(v.value);
      if (axis === undefined || value === null) continue;
      const id = `${axis}\u0000${v.step}`;
      let row = rows.get(id);
      if (row === undefined) {
        row = { axis, step: v.step, timestamp: v.timestamp, fields: `${quotedKey(axis)}${v.step}` };
        rows.set(id, row);
      }
      const key = this.keyText(v.key);
      row.fields += `,${key}${value}`;
      this.summary.set(key, value);
    }
    this.closeRow();
    const lines: string[] = [];
    for (const row of rows.values()) {
      this.lastStep++;
      lines.push(historyLine(this.lastStep, row.timestamp, row.timestamp - this.startMs, null, row.fields));
    }
    this.writer?.enqueue(lines);
    this.writer?.summaryChanged(this.summaryLine);
  }

  /** Write the row of the current flush, at a `_step` above every earlier one. */
  private closeRow(): void {
    if (this.rowStep < 0 || this.writer === null) return;
    const step = this.rowStep;
    const wandbStep = monotonicCommitStep(step, this.lastStep);
    // Rows on other axes push `_step` up without the training step going back: no warning then.
    if (step <= this.lastTrainStep || step <= this.writer.resumedLastStep) {
      warn(
        `wandb.stepBackwards:${this.label}`,
        `W&B run ${this.label}: flush at step ${step} after step ${Math.max(this.lastTrainStep, this.writer.resumedLastStep)}; W&B ignores a step that does not increase, ` +
          `so the row is logged at _step ${wandbStep} with global_step ${step} (AReaL's rule). (After a restart from a checkpoint the run already holds these steps; plot against global_step.)`,
      );
    }
    this.lastStep = wandbStep;
    if (step > this.lastTrainStep) this.lastTrainStep = step;
    const runtime = this.rowTimestamp - this.startMs;
    this.writer.enqueue([historyLine(wandbStep, this.rowTimestamp, runtime, step, this.rowFields)]);
    this.summary.at(wandbStep, this.rowTimestamp, runtime);
    this.writer.summaryChanged(this.summaryLine);
    this.rowFields = "";
    this.rowStep = -1;
  }
}
