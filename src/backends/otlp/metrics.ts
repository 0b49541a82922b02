/**
 * rankscope's reduced values as OpenTelemetry SDK `MetricData`: gauges for reduced values (a
 * `quantiles` key's outputs too, `ttft/p50`…), sums for `sum` keys, explicit-bucket histograms for
 * `histogram` keys. Cumulative temporality (default) keeps running totals from the backend's start,
 * as a Prometheus counter does; delta sends each flush's own sum and buckets, from the previous
 * flush's time.
 */
import { ValueType, type HrTime } from "@opentelemetry/api";
import { AggregationTemporality, DataPointType, type MetricData } from "@opentelemetry/sdk-metrics";
import { warn } from "../../core/diagnostics.js";
import type { HistogramMetric, Metric } from "../../core/metric.js";

/** Milliseconds since the epoch as OpenTelemetry's `[seconds, nanoseconds]`. */
export function hrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

/** `cumulative` (default) or `delta`. */
export type Temporality = "cumulative" | "delta";

interface SumStream {
  total: number;
  monotonic: boolean;
}

interface HistogramStream {
  readonly counts: Map<number, number>;
  count: number;
  sum: number;
  min: number;
  max: number;
}

/** Builds each flush's `MetricData`, keeping the running totals cumulative temporality needs. */
export class OtlpMetricBuilder {
  private readonly sums = new Map<string, SumStream>();
  private readonly histograms = new Map<string, HistogramStream>();
  private pending: MetricData[] = [];
  private previousFlush: number;

  constructor(
    private readonly temporality: Temporality,
    /** When the backend started (ms): the start time of cumulative streams. */
    private readonly startMs: number,
  ) {
    this.previousFlush = startMs;
  }

  private startTime(): HrTime {
    return hrTime(this.temporality === "cumulative" ? this.startMs : this.previousFlush);
  }

  private temporalityCode(): AggregationTemporality {
    return this.temporality === "cumulative" ? AggregationTemporality.CUMULATIVE : AggregationTemporality.DELTA;
  }

  addMetrics(metrics: readonly Metric[]): void {
    for (const m of metrics) {
      const descriptor = { name: m.key, description: `rankscope key "${m.key}" (${m.reduce})`, unit: "", valueType: ValueType.DOUBLE };
      const point = { startTime: this.startTime(), endTime: hrTime(m.timestamp), attributes: {}, value: m.value };
      if (m.reduce === "sum") {
        let stream = this.sums.get(m.key);
        if (stream === undefined) {
          stream = { total: 0, monotonic: true };
          this.sums.set(m.key, stream);
        }
        if (m.value < 0 && stream.monotonic) {
          stream.monotonic = false;
          warn(`otlp.negativeSum:${m.key}`, `otlp: sum key "${m.key}" had a negative sum (${m.value}) at step ${m.step}; it is exported as a non-monotonic sum from now on.`);
        }
        stream.total += m.value;
        const value = this.temporality === "cumulative" ? stream.total : m.value;
        this.pending.push({ descriptor, aggregationTemporality: this.temporalityCode(), dataPointType: DataPointType.SUM, isMonotonic: stream.monotonic, dataPoints: [{ ...point, value }] });
      } else {
        this.pending.push({ descriptor, aggregationTemporality: AggregationTemporality.CUMULATIVE, dataPointType: DataPointType.GAUGE, dataPoints: [point] });
      }
    }
  }

  addHistograms(histograms: readonly HistogramMetric[]): void {
    for (const h of histograms) {
      const data = h.histogram;
      let stream = this.histograms.get(h.key);
      if (stream === undefined || this.temporality === "delta") {
        stream = { counts: new Map(), count: 0, sum: 0, min: Infinity, max: -Infinity };
        this.histograms.set(h.key, stream);
      }
      data.bucketLimits.forEach((edge, i) => stream.counts.set(edge, (stream.counts.get(edge) ?? 0) + data.bucketCounts[i]!));
      stream.count += data.count;
      stream.sum += data.sum;
      if (data.min < stream.min) stream.min = data.min;
      if (data.max > stream.max) stream.max = data.max;
      const boundaries = [...stream.counts.keys()].sort((a, b) => a - b);
      const counts = boundaries.map((edge) => stream.counts.get(edge)!);
      // NaN values are in the count but in no bucket: they go to the overflow bucket, so the
      // buckets add up to the count as OTLP requires (the Prometheus backend does the same).
      counts.push(stream.count - counts.reduce((a, b) => a + b, 0));
      const hasValues = stream.min <= stream.max;
      this.pending.push({
        descriptor: { name: h.key, description: `rankscope key "${h.key}" (histogram)`, unit: "", valueType: ValueType.DOUBLE },
        aggregationTemporality: this.temporalityCode(),
        dataPointType: DataPointType.HISTOGRAM,
        dataPoints: [
          {
            startTime: this.startTime(),
            endTime: hrTime(h.timestamp),
            attributes: {},
            value: { buckets: { boundaries, counts }, count: stream.count, sum: stream.sum, ...(hasValues ? { min: stream.min, max: stream.max } : {}) },
          },
        ],
      });
    }
  }

  /** The metric data of this flush, and the flush's time for the next delta start. */
  take(flushMs: number): MetricData[] {
    const out = this.pending;
    this.pending = [];
    this.previousFlush = flushMs;
    return out;
  }
}
