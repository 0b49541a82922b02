/**
 * What the Prometheus backends expose: metric families built from each flush, shared by `/metrics`
 * (rendered by prom-client's `Registry`) and remote write (samples at the flush's time).
 *
 * - A reduced value (mean, max, min, std, a histogram's count/min/max/mean, custom reductions) is
 *   a **gauge** holding the latest flush's value.
 * - A `sum` key is a **counter** `{name}_total` holding the running total of the per-flush sums
 *   (a flush's sum is the increase since the previous flush, so `rate()` and `increase()` mean
 *   what they say); so is a `rate` key's `…/total` (its `…/per_s` is a gauge `{name}_per_second`).
 *   A negative per-flush sum makes the counter go down, which Prometheus reads as a counter
 *   reset: it is reported (`prometheus.counterDecrease:{key}`) and counted.
 * - A `histogram` key is a **histogram**: buckets at rankscope's bucket edges (`le`, cumulative,
 *   only edges that have held a value, plus `+Inf`), `_sum` and `_count`, all running totals over
 *   flushes like a counter. NaN values count in `_count` and `+Inf` only, as client_golang does.
 * - A `quantiles` key is a **summary** whose `quantile` series are the latest flush's quantiles
 *   (over the values of that flush, across ranks as the logging mode says); it has no `_sum` or
 *   `_count` (a reduced quantile state does not reach backends with them).
 *
 * Names (`names.ts`): OpenTelemetry's Prometheus mapping, `_` for every separator, the unit's
 * word where it is known (`_seconds`), `_total` on counters, the key in HELP.
 *
 * Names are claimed, not just families: a histogram `lat` writes `lat_bucket`, `lat_sum` and
 * `lat_count`, a summary `lat_sum` and `lat_count` (reserved by Prometheus though not written), a
 * counter `x_total` (and `x` in OpenMetrics). A key whose family would write a name another key
 * already writes (a gauge `lat_count` beside the histogram `lat`) is not exported, reported the
 * first time (`prometheus.nameClash:{name}`) and counted at each flush that leaves its values out,
 * scalar or histogram alike: the key that wrote it first keeps it. A histogram's
 * per-flush `count` and `mean` outputs are not gauges (they would sit beside the cumulative
 * `_count` under the same name, `lat_count`): its `_count` and `_sum` carry them;
 * `lat_min` and `lat_max` are.
 *
 * A key with attributes (`name{a=x}`, docs/inference.md) is the family of `name`, each attribute
 * set a series with the attributes as labels (`gen_ai.request.model` → `gen_ai_request_model`,
 * each run of characters outside `[A-Za-z0-9]` as one `_`, as OpenTelemetry's Prometheus mapping
 * does, values of attributes that get one label joined with `;`); the
 * instance's own labels (rank, host) win over an attribute of the same label name. A
 * `buckets(…)` key is a histogram as a `histogram` key is, at its own boundaries.
 */
import type { HistogramMetric, Metric } from "../../core/metric.js";
import { warn } from "../../core/diagnostics.js";
import { prometheusFamily, type FamilyName, type FamilyType } from "./names.js";
import { splitAttributedKey } from "../../core/attributes.js";
import { genAiConventionOf } from "../../inference/conventions.js";

/** Label names and values, e.g. `{ rank: "3", host: "node-1" }`. */
export type Labels = Readonly<Record<string, string>>;

/** One series of a family (one label set). */
interface Series {
  readonly labels: Labels;
  /** Gauge value, or counter total. */
  value: number;
  /** Histogram: count per bucket edge (not cumulative); summary: value per quantile label. */
  readonly buckets: Map<number, number>;
  readonly quantiles: Map<string, number>;
  count: number;
  sum: number;
  /** The time (ms) it last changed, and whether it changed since `takeChanged()`. */
  timestamp: number;
  changed: boolean;
}

/** One metric family: a name, a type, the key it came from, its unit's word, its series by label set. */
export interface Family {
  readonly name: string;
  readonly type: FamilyType;
  readonly key: string;
  readonly help: string;
  /** `seconds`…, or `` (no UNIT metadata). */
  readonly unit: string;
  readonly series: Map<string, Series>;
}

/** A sample as remote write sends it: full label set (with `__name__`), value, time in ms. */
export interface Sample {
  readonly labels: Labels;
  readonly value: number;
  readonly timestamp: number;
}

function labelKey(labels: Labels): string {
  return JSON.stringify(labels);
}

/** Label value text of a bucket edge, as Prometheus' own clients format `le`. */
function leText(edge: number): string {
  return edge === Infinity ? "+Inf" : String(edge);
}

/** Every sample name a family of `type` named `name` writes or reserves (see the module comment). */
function claimedNames(name: string, type: FamilyType): string[] {
  switch (type) {
    case "gauge":
      return [name];
    case "counter":
      return [name, name.replace(/_total$/, "")];
    case "histogram":
      return [name, `${name}_bucket`, `${name}_sum`, `${name}_count`];
    case "summary":
      return [name, `${name}_sum`, `${name}_count`];
  }
}

/** A histogram's per-flush outputs that its own `_count` and `_sum` carry: not exported as gauges. */
const HISTOGRAM_SERIES_OUTPUTS = ["/count", "/mean"];

/** Why a key's values are not exported: the diagnostic reported at each flush that leaves them out. */
interface NameClash {
  readonly code: string;
  readonly message: string;
}

function isClash(found: Family | NameClash): found is NameClash {
  return "code" in found;
}

/** Where a key's values go: its series, or the name clash that keeps them out. */
type Target =
  | { readonly reduce: string; readonly series: Series; readonly counter: boolean; readonly quantile?: string }
  | { readonly reduce: string; readonly series?: undefined; readonly clash: NameClash };

/** True for a reduction whose key is also a histogram family (`histogram`, `buckets(…)`). */
const hasHistogram = (reduce: string): boolean => reduce === "histogram" || reduce.startsWith("buckets(");

/**
 * A Prometheus label name for an attribute name, as OpenTelemetry's mapping makes one: each run of
 * characters outside `[A-Za-z0-9]` one `_` (`gen_ai.request.model` → `gen_ai_request_model`),
 * so never `__…` (reserved); `_` before a leading digit.
 */
export function labelName(attribute: string): string {
  const name = attribute.replace(/[^A-Za-z0-9]+/g, "_");
  return /^[0-9]/.test(name) ? `_${name}` : name;
}

/** The families of one backend instance, updated at each flush. */
export class Exposition {
  readonly families = new Map<string, Family>();
  /** Which family writes each sample name (`claimedNames`). */
  private readonly claims = new Map<string, Family>();
  /** Where each key's values go, found once per key (or the name clash that keeps them out). */
  private readonly targets = new Map<string, Target>();

  constructor(
    /** Labels every series of this instance carries (rank, host, user labels). */
    private readonly labels: Labels,
  ) {}

  /**
   * The family `name` of `type` for `key`, made at its first flush; or the name clash that keeps
   * the key out (not reported here: the caller reports it at each flush the key is left out of).
   */
  private family(wanted: FamilyName, reduce: string): Family | NameClash {
    const { name, type, key, unit } = wanted;
    const found = this.families.get(name);
    if (found !== undefined) {
      if (found.type === type && found.key === key) return found;
      return {
        code: `prometheus.nameClash:${name}`,
        message: `prometheus: key "${key}" (${reduce}) maps to the metric name ${name}, already used by key "${found.key}" as a ${found.type}; its values are not exported. Rename one of the keys.`,
      };
    }
    const names = claimedNames(name, type);
    for (const claimed of names) {
      const owner = this.claims.get(claimed);
      if (owner === undefined) continue;
      return {
        code: `prometheus.nameClash:${claimed}`,
        message: `prometheus: key "${key}" (${reduce}) would write the metric name ${claimed} as a ${type}, already written by key "${owner.key}" (a ${owner.type} ${owner.name}); its values are not exported. Rename one of the keys.`,
      };
    }
    const description = genAiConventionOf(key)?.description;
    const help = `rankscope key "${key}" (${reduce})${description === undefined ? "" : `: ${description}`}`;
    const created: Family = { name, type, key, help, unit, series: new Map() };
    this.families.set(name, created);
    for (const claimed of names) this.claims.set(claimed, created);
    return created;
  }

  private series(family: Family, labels: Labels): Series {
    const id = labelKey(labels);
    let s = family.series.get(id);
    if (s === undefined) {
      s = {
        labels,
        value: 0,
        buckets: new Map(),
        quantiles: new Map(),
        count: 0,
        sum: 0,
        timestamp: 0,
        changed: false,
      };
      family.series.set(id, s);
    }
    return s;
  }

  /**
   * This instance's labels with a key's attributes as labels (the instance's win). Attributes
   * that get one label name have their values joined with `;`, in their names' order (the mapping's rule).
   */
  private labelsWith(attributes: Readonly<Record<string, string>>): Labels {
    const names = Object.keys(attributes).sort();
    if (names.length === 0) return this.labels;
    const labels: Record<string, string> = {};
    for (const attribute of names) {
      const label = labelName(attribute);
      const value = attributes[attribute] ?? "";
      labels[label] = label in labels ? `${labels[label]};${value}` : value;
    }
    return { ...labels, ...this.labels };
  }

  /** The series a key's values go to, found once per key and reduction. */
  private target(m: Metric): Target {
    const found = this.targets.get(m.key);
    if (found !== undefined && found.reduce === m.reduce) return found;
    const { name, attributes } = splitAttributedKey(m.key);
    const labels = this.labelsWith(attributes);
    const wanted = prometheusFamily(name, m.reduce);
    const quantile = wanted.quantile;
    const family = this.family(wanted, m.reduce);
    const made: Target = isClash(family)
      ? { reduce: m.reduce, clash: family }
      : {
          reduce: m.reduce,
          series: this.series(family, labels),
          counter: family.type === "counter",
          ...(quantile === undefined ? {} : { quantile }),
        };
    this.targets.set(m.key, made);
    return made;
  }

  /** Add one flush's reduced scalars. */
  addMetrics(metrics: readonly Metric[]): void {
    for (const m of metrics) {
      if (
        hasHistogram(m.reduce) &&
        HISTOGRAM_SERIES_OUTPUTS.some((suffix) => splitAttributedKey(m.key).name.endsWith(suffix))
      )
        continue;
      const target = this.target(m);
      if (target.series === undefined) {
        warn(target.clash.code, target.clash.message);
        continue;
      }
      const { series: s, quantile } = target;
      if (target.counter) {
        if (m.value < 0)
          warn(
            `prometheus.counterDecrease:${m.key}`,
            `prometheus: ${m.reduce} key "${m.key}" had a negative sum (${m.value}) at step ${m.step}; its counter goes down, which Prometheus reads as a counter reset.`,
          );
        s.value += m.value;
      } else if (quantile !== undefined) {
        s.quantiles.set(quantile, m.value);
      } else {
        s.value = m.value;
      }
      s.timestamp = m.timestamp;
      s.changed = true;
    }
  }

  /** Add one flush's histograms: their counts and sums add to the running totals. */
  addHistograms(histograms: readonly HistogramMetric[]): void {
    for (const h of histograms) {
      const { name, attributes } = splitAttributedKey(h.key);
      const family = this.family(prometheusFamily(name, "histogram", true), "histogram");
      if (isClash(family)) {
        warn(family.code, family.message);
        continue;
      }
      const s = this.series(family, this.labelsWith(attributes));
      const { bucketLimits, bucketCounts } = h.histogram;
      for (let i = 0; i < bucketLimits.length; i++) {
        const edge = bucketLimits[i]!;
        // The largest double is the last bucket's edge (it holds +Infinity too): `+Inf` says it.
        if (edge === Number.MAX_VALUE) continue;
        s.buckets.set(edge, (s.buckets.get(edge) ?? 0) + bucketCounts[i]!);
      }
      s.count += h.histogram.count;
      s.sum += h.histogram.sum;
      this.touch(s, h.timestamp);
    }
  }

  private touch(s: Series, timestamp: number): void {
    s.timestamp = timestamp;
    s.changed = true;
  }

  /**
   * The samples of every series changed since the last call, at their flush's time (remote
   * write). `minTimestamp` lifts times so each series' times strictly increase.
   */
  takeChanged(minTimestamp: number): Sample[] {
    const out: Sample[] = [];
    for (const family of this.families.values()) {
      for (const s of family.series.values()) {
        if (!s.changed) continue;
        s.changed = false;
        const timestamp = Math.max(s.timestamp, minTimestamp);
        for (const v of seriesValues(family, s))
          out.push({ labels: { __name__: v.metricName, ...v.labels }, value: v.value, timestamp });
      }
    }
    return out;
  }
}

/** One line of a family's exposition: name (with `_bucket`, `_sum`… where it applies), labels, value. */
interface SeriesValue {
  readonly metricName: string;
  readonly labels: Labels;
  readonly value: number;
}

/** The exposition lines of one series, in the order the text format lists them. */
export function seriesValues(family: Family, s: Series): SeriesValue[] {
  switch (family.type) {
    case "gauge":
    case "counter":
      return [{ metricName: family.name, labels: s.labels, value: s.value }];
    case "summary":
      return [...s.quantiles]
        .sort((a, b) => Number(a[0]) - Number(b[0]))
        .map(([quantile, value]) => ({ metricName: family.name, labels: { ...s.labels, quantile }, value }));
    case "histogram": {
      const out: SeriesValue[] = [];
      let cumulative = 0;
      for (const edge of [...s.buckets.keys()].sort((a, b) => a - b)) {
        cumulative += s.buckets.get(edge)!;
        out.push({ metricName: `${family.name}_bucket`, labels: { ...s.labels, le: leText(edge) }, value: cumulative });
      }
      out.push({ metricName: `${family.name}_bucket`, labels: { ...s.labels, le: "+Inf" }, value: s.count });
      out.push({ metricName: `${family.name}_sum`, labels: s.labels, value: s.sum });
      out.push({ metricName: `${family.name}_count`, labels: s.labels, value: s.count });
      return out;
    }
  }
}
