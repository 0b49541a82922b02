/**
 * `prometheus`: serves `/metrics` for Prometheus to scrape (long-running inference and rollout
 * servers); `prometheus_remote_write`: pushes the same samples to a Prometheus server's remote
 * write receiver (batch jobs). Both lazily registered; subpath export `rankscope/prometheus`.
 *
 * Names, types and labels: `exposition.ts` and `names.ts`; docs/prometheus.md.
 */
import { roleOf } from "../../core/rank-identity.js";
import { hostname } from "node:os";
import { withoutInternalKeys } from "../../core/internal-keys.js";
import type { HistogramMetric, Metric } from "../../core/metric.js";
import { currentRun } from "../../run/current.js";
import type { Backend, BackendContext, BackendOptions } from "../backend.js";
import { registerBackend } from "../backend.js";
import { numberOption, stringOption, stringRecordOption } from "../option-values.js";
import { Exposition, type Labels } from "./exposition.js";
import { PROMETHEUS_OPTIONS, PROMETHEUS_REMOTE_WRITE_OPTIONS } from "./options.js";
import { RemoteWriter, type RemoteWriterStats, type SeriesMetadata } from "./remote-write.js";
import { liveExpositions } from "./render.js";
import { leaseMetricsServer, type MetricsServerLease } from "./server.js";

export { prometheusName } from "./names.js";
export { metricsHandler } from "./render.js";
export type { RemoteWriterStats } from "./remote-write.js";
export type { Labels } from "./exposition.js";

/** Default `/metrics` port (the one OpenTelemetry's Prometheus exporter uses). */
export const DEFAULT_PROMETHEUS_PORT = 9464;

/**
 * The labels of a backend instance: the user's, plus rank, rank_name and host in per-rank modes.
 * The controller's own per-rank values are `rank="controller"`, never `rank="0"` (docs/DESIGN.md, "Identity").
 */
function instanceLabels(options: BackendOptions, context: BackendContext): Labels {
  const labels = stringRecordOption(options, "labels");
  if (context.loggingMode !== "global_reduce") {
    labels["rank"] = roleOf(context.identity) === "controller" ? "controller" : String(context.identity.rank);
    labels["rank_name"] = context.identity.rankName;
    labels["host"] = hostname();
  }
  return labels;
}

/** Collects each flush into an `Exposition`; the two backends differ in where it goes. */
abstract class PrometheusBackendBase implements Backend {
  protected exposition = new Exposition({});
  constructor(protected readonly options: BackendOptions) {}

  init(context: BackendContext): Promise<void> | void {
    this.exposition = new Exposition(instanceLabels(this.options, context));
  }

  logBatch(metrics: readonly Metric[]): void {
    this.exposition.addMetrics(withoutInternalKeys(metrics, this.options["internal"] === true));
  }

  logHistograms(histograms: readonly HistogramMetric[]): void {
    this.exposition.addHistograms(withoutInternalKeys(histograms, this.options["internal"] === true));
  }
}

class PrometheusBackend extends PrometheusBackendBase {
  private lease: MetricsServerLease | undefined;

  /** Where Prometheus scrapes this instance (`undefined` with `serve: false`). */
  get url(): string | undefined {
    return this.lease?.url;
  }

  override async init(context: BackendContext): Promise<void> {
    await super.init(context);
    liveExpositions().add(this.exposition);
    if (this.options["serve"] === false) return;
    const host = stringOption(this.options, "host", "127.0.0.1");
    const base = numberOption(this.options, "port", DEFAULT_PROMETHEUS_PORT);
    // The controller's process listens on `port` (its global instances and the per-rank instance
    // of its own collector, which is rank 0 of its job too); rank r on `port + 1 + r`, so ranks
    // of one host never collide with each other or the controller. Port 0: any free port.
    const run = currentRun();
    const controllerProcess =
      context.role === "controller" ||
      roleOf(context.identity) === "controller" ||
      (run?.role === "controller" && run.identity.rankName === context.identity.rankName);
    const port = base === 0 || controllerProcess ? base : base + 1 + context.identity.rank;
    const path = stringOption(this.options, "path", "/metrics");
    this.lease = await leaseMetricsServer(
      host,
      port,
      path,
      numberOption(this.options, "listenDeadlineMs", 5000),
      this.exposition,
    );
  }

  async finish(): Promise<void> {
    liveExpositions().delete(this.exposition);
    await this.lease?.release();
  }
}

class PrometheusRemoteWriteBackend extends PrometheusBackendBase {
  private writer: RemoteWriter | undefined;
  private lastTimestamp = 0;
  private readonly sentMetadata = new Set<string>();

  /** What was sent and lost so far. */
  get stats(): RemoteWriterStats | undefined {
    return this.writer?.stats;
  }

  override async init(context: BackendContext): Promise<void> {
    await super.init(context);
    this.writer = new RemoteWriter({
      url: stringOption(this.options, "url", ""),
      headers: stringRecordOption(this.options, "headers"),
      timeoutMs: numberOption(this.options, "timeoutMs", 5000),
      retryBudgetMs: numberOption(this.options, "retryBudgetMs", 30_000),
      maxQueuedSamples: numberOption(this.options, "maxQueuedSamples", 100_000),
      maxSamplesPerSend: numberOption(this.options, "maxSamplesPerSend", 2000),
      name: context.backendName,
    });
  }

  /** After each flush: the changed series, at the flush's time (strictly increasing), to the queue. */
  flushed(): void {
    const samples = this.exposition.takeChanged(this.lastTimestamp + 1);
    if (samples.length === 0 || this.writer === undefined) return;
    for (const s of samples) if (s.timestamp > this.lastTimestamp) this.lastTimestamp = s.timestamp;
    const metadata: SeriesMetadata[] = [];
    for (const family of this.exposition.families.values()) {
      if (this.sentMetadata.has(family.name)) continue;
      this.sentMetadata.add(family.name);
      metadata.push({ type: family.type, name: family.name, help: family.help, unit: family.unit });
    }
    this.writer.push(samples, metadata);
  }

  async finish(): Promise<void> {
    this.flushed();
    await this.writer?.drain(numberOption(this.options, "finishDeadlineMs", 8000));
  }
}

/** These backends export reduced values: a raw stream (`per_rank_no_reduce`) would be lost silently. */
function rejectStreamMode(backend: string, options: BackendOptions): void {
  if (options.loggingMode === "per_rank_no_reduce") {
    throw new TypeError(
      `backend "${backend}" exports reduced values: use loggingMode "global_reduce" or "per_rank_reduce" (raw streams go to jsonl, store, tensorboard or wandb)`,
    );
  }
}

registerBackend("prometheus", (options) => new PrometheusBackend(options), {
  options: PROMETHEUS_OPTIONS,
  validate: (options) => rejectStreamMode("prometheus", options),
});

registerBackend("prometheus_remote_write", (options) => new PrometheusRemoteWriteBackend(options), {
  options: PROMETHEUS_REMOTE_WRITE_OPTIONS,
  destinationOptions: ["url"],
  validate: (options) => rejectStreamMode("prometheus_remote_write", options),
});
