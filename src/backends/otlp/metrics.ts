/**
 * rankscope's reduced values as OpenTelemetry SDK `MetricData`: gauges for reduced values (a
 * `quantiles` key's outputs too, `ttft/p50`…), sums for `sum` keys, explicit-bucket histograms for
 * `histogram` keys. Cumulative temporality (default) keeps running totals from the backend's start,
 * as a Prometheus counter does; delta sends each flush's own sum and buckets, from the previous
 * flush's time.
 *
 * Instrument names follow OpenTelemetry's rules (`otlpInstrumentName`); two keys that would get
 * one name (names are case-insensitive) are not both sent: the second is reported
 * (`otlp.nameClash:{name}`), counted and left out. A histogram's per-flush `count` and `mean`
 * outputs are not gauges: its own data point carries count and sum (a gauge `lat/count` becomes
 * `lat_count` in a Prometheus translation, the histogram's own count series).
 *
 * A key with attributes (`name{a=x}`, docs/inference.md) is the instrument `name` with those
 * attributes on its data point; the keys of one name at a flush are one metric with a data point
 * each. A name that is one of the GenAI conventions' instruments (`gen_ai.server.time_to_first_token`…)
 * carries the conventions' unit and description, its quantile gauges (`…/p99`) the unit too, and
 * its `Reduce.buckets` histogram the conventions' explicit boundaries.
 */
import type { HrTime } from "@opentelemetry/api";
import type { AggregationTemporality, MetricData } from "@opentelemetry/sdk-metrics";
import { otelApi, otelSdkMetrics } from "./sdk.js";
import { warn } from "../../core/diagnostics.js";
import type { HistogramMetric, Metric } from "../../core/metric.js";
import { splitAttributedKey } from "../../core/attributes.js";
import { genAiConventionOf, genAiInstrument } from "../../inference/conventions.js";

/** Milliseconds since the epoch as OpenTelemetry's `[seconds, nanoseconds]`. */
function hrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

/** `cumulative` (default) or `delta`. */
export type Temporality = "cumulative" | "delta";

/** OpenTelemetry's instrument name syntax: an ASCII letter, then letters, digits, `_ . - /`; at most 255. */
const INSTRUMENT_NAME = /^[A-Za-z][A-Za-z0-9_./-]{0,254}$/;
const MAX_NAME = 255;

/** FNV-1a of a string, as 8 hex digits (a short, stable tag for names that had to be cut). */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return (hash >>> 0).toString(16).padStart(8, "0");
}

/**
 * The OpenTelemetry instrument name of a rankscope key. A key that is a valid name (`train/loss`)
 * stays as it is. Otherwise each character outside `[A-Za-z0-9_./-]` (any non-ASCII one too)
 * becomes `_{hex code point}_` (`acc@1` → `acc_40_1`, `é` → `_e9_`), a name that would not start
 * with a letter gets the prefix `k_` (`1st` → `k_1st`), and a name over 255 characters is cut to
 * 246 and ends with `_` and 8 hex digits of the key's FNV-1a hash. The key is in the
 * instrument's description.
 */
export function otlpInstrumentName(key: string): string {
  if (INSTRUMENT_NAME.test(key)) return key;
  let name = "";
  for (const char of key)
    name += /^[A-Za-z0-9_./-]$/.test(char) ? char : `_${(char.codePointAt(0) ?? 0).toString(16)}_`;
  if (!/^[A-Za-z]/.test(name)) name = `k_${name}`;
  return name.length <= MAX_NAME ? name : `${name.slice(0, MAX_NAME - 9)}_${fnv1a(key)}`;
}

/** A histogram's per-flush outputs that its own data point carries: not sent as gauges. */
const HISTOGRAM_POINT_OUTPUTS = ["/count", "/mean"];

/** True for a reduction whose key also sends a histogram (`histogram`, `buckets(…)`). */
const hasHistogram = (reduce: string): boolean => reduce === "histogram" || reduce.startsWith("buckets(");

/** Attributes whose values are integers in the conventions (sent as ints, not text). */
const INTEGER_ATTRIBUTES = new Set(["server.port"]);

/** A data point's attributes from a key's: text, and the conventions' integer ones as numbers. */
function pointAttributes(attributes: Readonly<Record<string, string>>): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [name, value] of Object.entries(attributes))
    out[name] = INTEGER_ATTRIBUTES.has(name) && /^\d+$/.test(value) ? Number(value) : value;
  return out;
}

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
  /** Each instrument name (lower case: names are case-insensitive) and the key that has it. */
  private readonly names = new Map<string, string>();
  /** Each key's instrument name, or null when it clashed with another key's. */
  private readonly keyNames = new Map<string, string | null>();

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

  /** The instrument name of `key`, or null (reported and counted) when another key has it. */
  private nameOf(key: string): string | null {
    const known = this.keyNames.get(key);
    if (known !== undefined) {
      if (known === null)
        warn(
          `otlp.nameClash:${otlpInstrumentName(key)}`,
          `otlp: key "${key}" is not exported: its instrument name is taken by another key`,
        );
      return known;
    }
    const name = otlpInstrumentName(key);
    const owner = this.names.get(name.toLowerCase());
    if (owner !== undefined && owner !== key) {
      warn(
        `otlp.nameClash:${name}`,
        `otlp: key "${key}" would be the instrument ${name}, which key "${owner}" already is (OpenTelemetry names are case-insensitive); its values are not exported. Rename one of the keys.`,
      );
      this.keyNames.set(key, null);
      return null;
    }
    this.names.set(name.toLowerCase(), key);
    this.keyNames.set(key, name);
    return name;
  }

  private temporalityCode(): AggregationTemporality {
    return this.temporality === "cumulative"
      ? otelSdkMetrics.AggregationTemporality.CUMULATIVE
      : otelSdkMetrics.AggregationTemporality.DELTA;
  }

  /** This flush's metrics by kind and name, for the data point of a key that shares one. */
  private byName = new Map<string, MetricData>();

  /** Add a metric, or its data points to this flush's metric of the same name and kind. */
  private add(data: MetricData): void {
    const id = `${data.dataPointType} ${data.descriptor.name}`;
    const existing = this.byName.get(id);
    const { HISTOGRAM, GAUGE, SUM } = otelSdkMetrics.DataPointType;
    if (existing === undefined) {
      this.pending.push(data);
      this.byName.set(id, data);
    } else if (existing.dataPointType === HISTOGRAM && data.dataPointType === HISTOGRAM)
      existing.dataPoints.push(...data.dataPoints);
    else if (existing.dataPointType === GAUGE && data.dataPointType === GAUGE)
      existing.dataPoints.push(...data.dataPoints);
    else if (existing.dataPointType === SUM && data.dataPointType === SUM) existing.dataPoints.push(...data.dataPoints);
  }

  addMetrics(metrics: readonly Metric[]): void {
    for (const m of metrics) {
      if (
        hasHistogram(m.reduce) &&
        HISTOGRAM_POINT_OUTPUTS.some((suffix) => splitAttributedKey(m.key).name.endsWith(suffix))
      )
        continue;
      const parts = splitAttributedKey(m.key);
      const name = this.nameOf(parts.name);
      if (name === null) continue;
      const convention = genAiConventionOf(parts.name);
      const descriptor = {
        name,
        description: convention?.description ?? `rankscope key "${parts.name}" (${m.reduce})`,
        unit: convention?.unit ?? "",
        valueType: otelApi.ValueType.DOUBLE,
      };
      const point = {
        startTime: this.startTime(),
        endTime: hrTime(m.timestamp),
        attributes: pointAttributes(parts.attributes),
        value: m.value,
      };
      if (m.reduce === "sum") {
        let stream = this.sums.get(m.key);
        if (stream === undefined) {
          stream = { total: 0, monotonic: true };
          this.sums.set(m.key, stream);
        }
        if (m.value < 0 && stream.monotonic) {
          stream.monotonic = false;
          warn(
            `otlp.negativeSum:${m.key}`,
            `otlp: sum key "${m.key}" had a negative sum (${m.value}) at step ${m.step}; it is exported as a non-monotonic sum from now on.`,
          );
        }
        stream.total += m.value;
        const value = this.temporality === "cumulative" ? stream.total : m.value;
        this.add({
          descriptor,
          aggregationTemporality: this.temporalityCode(),
          dataPointType: otelSdkMetrics.DataPointType.SUM,
          isMonotonic: stream.monotonic,
          dataPoints: [{ ...point, value }],
        });
      } else {
        this.add({
          descriptor,
          aggregationTemporality: otelSdkMetrics.AggregationTemporality.CUMULATIVE,
          dataPointType: otelSdkMetrics.DataPointType.GAUGE,
          dataPoints: [point],
        });
      }
    }
  }

  addHistograms(histograms: readonly HistogramMetric[]): void {
    for (const h of histograms) {
      const parts = splitAttributedKey(h.key);
      const name = this.nameOf(parts.name);
      if (name === null) continue;
      const convention = genAiInstrument(parts.name);
      const data = h.histogram;
      let stream = this.histograms.get(h.key);
      if (stream === undefined || this.temporality === "delta") {
        stream = { counts: new Map(), count: 0, sum: 0, min: Infinity, max: -Infinity };
        this.histograms.set(h.key, stream);
      }
      data.bucketLimits.forEach((edge, i) =>
        stream.counts.set(edge, (stream.counts.get(edge) ?? 0) + data.bucketCounts[i]!),
      );
      stream.count += data.count;
      stream.sum += data.sum;
      if (data.min < stream.min) stream.min = data.min;
      if (data.max > stream.max) stream.max = data.max;
      const boundaries = [...stream.counts.keys()].sort((a, b) => a - b);
      // The largest double is the last bucket's edge (it holds +Infinity too): the overflow bucket.
      if (boundaries.at(-1) === Number.MAX_VALUE) boundaries.pop();
      const counts = boundaries.map((edge) => stream.counts.get(edge)!);
      // NaN values are in the count but in no bucket: they go to the overflow bucket, so the
      // buckets add up to the count as OTLP requires (the Prometheus backend does the same).
      counts.push(stream.count - counts.reduce((a, b) => a + b, 0));
      const hasValues = stream.min <= stream.max;
      this.add({
        descriptor: {
          name,
          description: convention?.description ?? `rankscope key "${parts.name}" (histogram)`,
          unit: convention?.unit ?? "",
          valueType: otelApi.ValueType.DOUBLE,
        },
        aggregationTemporality: this.temporalityCode(),
        dataPointType: otelSdkMetrics.DataPointType.HISTOGRAM,
        dataPoints: [
          {
            startTime: this.startTime(),
            endTime: hrTime(h.timestamp),
            attributes: pointAttributes(parts.attributes),
            value: {
              buckets: { boundaries, counts },
              count: stream.count,
              sum: stream.sum,
              ...(hasValues ? { min: stream.min, max: stream.max } : {}),
            },
          },
        ],
      });
    }
  }

  /** The metric data of this flush, and the flush's time for the next delta start. */
  take(flushMs: number): MetricData[] {
    const out = this.pending;
    this.pending = [];
    this.byName = new Map();
    this.previousFlush = flushMs;
    return out;
  }
}
