/**
 * `otlp`: OpenTelemetry metrics over OTLP/HTTP (protobuf) with the official exporter
 * (`@opentelemetry/exporter-metrics-otlp-proto`). Lazily registered; subpath export `rankscope/otlp`.
 *
 * Each flush's reduced values become the SDK's `ResourceMetrics` (`metrics.ts`) and go straight to
 * `OTLPMetricExporter.export`: the SDK's instruments and readers would re-aggregate values that
 * rankscope has already reduced across ranks. Exports run one at a time in the background from a
 * bounded queue; each has a deadline; a failed or late export is reported (`otlp.export`) with its
 * data point count and counted in `stats`. docs/otlp.md.
 */
import { roleOf } from "../../core/rank-identity.js";
import { hostname } from "node:os";
import type { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import type { Resource } from "@opentelemetry/resources";
import type { ResourceMetrics } from "@opentelemetry/sdk-metrics";
import { otelExporter, otelResources, otelSemanticConventions } from "./sdk.js";
import { DEADLINE, withDeadline } from "../../core/deadline.js";
import { reportError } from "../../core/diagnostics.js";
import { rankscopeVersion } from "../../run/run-files.js";
import { withoutInternalKeys } from "../../core/internal-keys.js";
import type { HistogramMetric, Metric } from "../../core/metric.js";
import type { Backend, BackendContext, BackendOptions } from "../backend.js";
import { registerBackend } from "../backend.js";
import { enumOption, numberOption, stringOption, stringRecordOption } from "../option-values.js";
import { OtlpMetricBuilder, type Temporality } from "./metrics.js";
import { DEFAULT_OTLP_METRICS_URL, OTLP_OPTIONS } from "./options.js";

export { otlpInstrumentName, type Temporality } from "./metrics.js";

export { DEFAULT_OTLP_METRICS_URL };

/** `ExportResultCode.SUCCESS` of `@opentelemetry/core`. */
const EXPORT_SUCCESS = 0;

/** What the exporter reports (`ExportResult` of `@opentelemetry/core`, a dependency of the exporter, not ours). */
interface ExportResult {
  readonly code: number;
  readonly error?: Error;
}

/** Semantic-convention attribute names not yet stable in `@opentelemetry/semantic-conventions` (its docs say to copy them). */
/** The temporalities the backend exports, the first the default. */
const TEMPORALITIES: readonly Temporality[] = ["cumulative", "delta"];

const ATTR_HOST_NAME = "host.name";
const ATTR_SERVICE_INSTANCE_ID = "service.instance.id";

/** What an `otlp` backend sent and lost. */
export interface OtlpStats {
  exports: number;
  /** Data points in exports the receiver accepted. */
  exportedPoints: number;
  failedExports: number;
  /** Data points of failed or late exports, of exports dropped from a full queue, and left at finish. */
  lostPoints: number;
}

/** The resource of a backend instance: service, run, rank and host. */
function otlpResource(options: BackendOptions, context: BackendContext): Resource {
  const attributes: Record<string, string | number> = {
    [otelSemanticConventions.ATTR_SERVICE_NAME]: stringOption(options, "serviceName", "rankscope"),
    [otelSemanticConventions.ATTR_SERVICE_VERSION]: rankscopeVersion(),
    [ATTR_HOST_NAME]: hostname(),
    "rankscope.run": `${context.experiment}/${context.trial}`,
    "rankscope.experiment": context.experiment,
    "rankscope.trial": context.trial,
    "rankscope.logging_mode": context.loggingMode,
  };
  if (context.loggingMode === "global_reduce") {
    attributes[ATTR_SERVICE_INSTANCE_ID] = `${context.experiment}/${context.trial}/global`;
  } else {
    // Who recorded it (docs/DESIGN.md, "Identity"): the controller's own values carry no rank number.
    const role = roleOf(context.identity);
    attributes["rankscope.role"] = role;
    if (role === "rank") attributes["rankscope.rank"] = context.identity.rank;
    attributes["rankscope.rank_name"] = context.identity.rankName;
    attributes[ATTR_SERVICE_INSTANCE_ID] = `${context.experiment}/${context.trial}/${context.identity.rankName}`;
  }
  return otelResources.resourceFromAttributes({ ...attributes, ...stringRecordOption(options, "resourceAttributes") });
}

class OtlpBackend implements Backend {
  private exporter: OTLPMetricExporter | undefined;
  private resource: Resource | undefined;
  private builder = new OtlpMetricBuilder("cumulative", Date.now());
  private readonly queue: ResourceMetrics[] = [];
  private sending: Promise<void> | null = null;
  private lastFlushMs = 0;
  readonly stats: OtlpStats = { exports: 0, exportedPoints: 0, failedExports: 0, lostPoints: 0 };
  private readonly timeoutMs: number;

  constructor(private readonly options: BackendOptions) {
    this.timeoutMs = numberOption(options, "timeoutMs", 10_000);
  }

  init(context: BackendContext): void {
    this.resource = otlpResource(this.options, context);
    this.builder = new OtlpMetricBuilder(
      enumOption(this.options, "temporality", TEMPORALITIES, "cumulative"),
      Date.now(),
    );
    this.exporter = new otelExporter.OTLPMetricExporter({
      url: stringOption(this.options, "url", DEFAULT_OTLP_METRICS_URL),
      headers: stringRecordOption(this.options, "headers"),
      timeoutMillis: this.timeoutMs,
    });
  }

  logBatch(all: readonly Metric[]): void {
    const metrics = withoutInternalKeys(all, this.options["internal"] === true);
    this.builder.addMetrics(metrics);
    for (const m of metrics) if (m.timestamp > this.lastFlushMs) this.lastFlushMs = m.timestamp;
  }

  logHistograms(all: readonly HistogramMetric[]): void {
    const histograms = withoutInternalKeys(all, this.options["internal"] === true);
    this.builder.addHistograms(histograms);
    for (const h of histograms) if (h.timestamp > this.lastFlushMs) this.lastFlushMs = h.timestamp;
  }

  /** After each flush: its metrics as one export, queued; never waits for the network. */
  flushed(): void {
    const metrics = this.builder.take(this.lastFlushMs || Date.now());
    if (metrics.length === 0 || this.resource === undefined) return;
    this.queue.push({
      resource: this.resource,
      scopeMetrics: [{ scope: { name: "rankscope", version: rankscopeVersion() }, metrics }],
    });
    const limit = numberOption(this.options, "maxQueuedExports", 100);
    while (this.queue.length > limit) {
      const dropped = this.queue.shift()!;
      const points = pointCount(dropped);
      this.stats.lostPoints += points;
      reportError(
        "otlp.queueFull",
        `otlp: ${limit} exports are waiting (the receiver is slow or down); dropped the oldest (${points} data points, counted in stats.lostPoints).`,
      );
    }
    this.sending ??= this.sendAll().finally(() => {
      this.sending = null;
    });
  }

  private async sendAll(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.shift()!;
      const points = pointCount(batch);
      this.stats.exports++;
      const error = await this.exportOnce(batch);
      if (error === undefined) {
        this.stats.exportedPoints += points;
      } else {
        this.stats.failedExports++;
        this.stats.lostPoints += points;
        reportError("otlp.export", `otlp: an export of ${points} data points failed: ${error}`);
      }
    }
  }

  /** One export with a deadline of our own (the exporter's `timeoutMillis`, plus a margin). */
  private async exportOnce(batch: ResourceMetrics): Promise<string | undefined> {
    const exporter = this.exporter;
    if (exporter === undefined) return "the backend was not initialised";
    const deadlineMs = this.timeoutMs + 1000;
    const result = await withDeadline(
      new Promise<ExportResult>((resolve) => exporter.export(batch, resolve)),
      deadlineMs,
    );
    if (result === DEADLINE) return `no answer within ${deadlineMs} ms`;
    return result.code === EXPORT_SUCCESS ? undefined : (result.error?.message ?? "the exporter reported a failure");
  }

  async finish(): Promise<void> {
    this.flushed();
    const deadlineMs = numberOption(this.options, "finishDeadlineMs", 8000);
    const end = Date.now() + deadlineMs;
    if (this.sending !== null && (await withDeadline(this.sending, deadlineMs)) === DEADLINE) {
      const left = this.queue.splice(0).reduce((n, b) => n + pointCount(b), 0);
      this.stats.lostPoints += left;
      reportError(
        "otlp.finishDeadline",
        `otlp: exports were still pending at the finish deadline (${deadlineMs} ms); ${left} queued data points were not sent.`,
      );
    }
    if (this.exporter !== undefined) await withDeadline(this.exporter.shutdown(), Math.max(0, end - Date.now()));
  }
}

function pointCount(batch: ResourceMetrics): number {
  let n = 0;
  for (const scope of batch.scopeMetrics) for (const m of scope.metrics) n += m.dataPoints.length;
  return n;
}

/** These backends export reduced values: a raw stream (`per_rank_no_reduce`) would be lost silently. */
function rejectStreamMode(backend: string, options: BackendOptions): void {
  if (options.loggingMode === "per_rank_no_reduce") {
    throw new TypeError(
      `backend "${backend}" exports reduced values: use loggingMode "global_reduce" or "per_rank_reduce" (raw streams go to jsonl, store, tensorboard or wandb)`,
    );
  }
}

registerBackend("otlp", (options) => new OtlpBackend(options), {
  options: OTLP_OPTIONS,
  destinationOptions: ["url"],
  validate: (options) => rejectStreamMode("otlp", options),
});
