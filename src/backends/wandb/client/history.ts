/**
 * W&B history lines and the run summary, as text.
 *
 * A history line is one JSON object per row: `{"_step","_runtime","_timestamp","global_step",...}`
 * with `_timestamp` and `_runtime` in seconds. Non-finite numbers are written as the bare tokens
 * `NaN`, `Infinity`, `-Infinity`, as W&B's own Python client writes them (its JSON encoder allows
 * them) and its server reads them; writing `null` would make a diverged loss vanish from the chart.
 *
 * Encoding is plain string building with the quoted form of each key cached, because it runs on the
 * flush path of every step and, for streams, once per raw value.
 */
import { isRecord, numberText } from "../../../core/json.js";
import { contiguousBuckets, edgeAbove, HISTOGRAM_EDGES, lowerEdgeOf } from "../../../core/accumulators/histogram.js";
import { nextUp } from "../../../core/doubles.js";
import type { HistogramData } from "../../../core/reduce.js";

const quotedKeys = new Map<string, string>();
const MAX_CACHED_KEYS = 100_000;

/** `"key":` for a key, cached (keys repeat every step). */
export function quotedKey(key: string): string {
  let q = quotedKeys.get(key);
  if (q === undefined) {
    q = `${JSON.stringify(key)}:`;
    if (quotedKeys.size < MAX_CACHED_KEYS) quotedKeys.set(key, q);
  }
  return q;
}

/**
 * A number as W&B history JSON: finite numbers as `numberText` writes them (from 2^53 up in
 * exponent form, so wandb-core never sees an integer literal beyond int64), others as `NaN` /
 * `Infinity` / `-Infinity`.
 */
export function historyNumber(value: number): string {
  if (Number.isFinite(value)) return numberText(value);
  if (Number.isNaN(value)) return "NaN";
  return value > 0 ? "Infinity" : "-Infinity";
}

/** A string, a non-finite token, or a whole integer literal of 16 digits or more (outside strings, not part of a decimal). */
const SPECIAL_TOKEN = /"(?:[^"\\]|\\.)*"|-?Infinity|NaN|(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/g;
const LONG_INTEGER = /\d{16}/;

/**
 * Parse W&B history JSON (a history line, a summary, a `historyTail` entry, a config): JSON plus
 * the bare `NaN`, `Infinity` and `-Infinity` tokens W&B's clients write, which come back as those
 * numbers, and integer literals beyond 2^53, which come back as bigints (rankscope writes them only
 * for bigints: `jsonText`; a double would lose them). Strings are left alone (a key or value that
 * merely contains "NaN" is not touched). The one parser for such text: the resume status, the spool
 * reader and the tests use it. Throws like `JSON.parse`.
 */
export function parseHistoryJson(text: string): unknown {
  if (!text.includes("NaN") && !text.includes("Infinity") && !LONG_INTEGER.test(text)) {
    const plain: unknown = JSON.parse(text);
    return plain;
  }
  const marked = text.replace(SPECIAL_TOKEN, (token) => {
    if (token.charCodeAt(0) === 34) return token;
    if (token.endsWith("N") || token.endsWith("y")) return `{"$nonFinite":"${token}"}`;
    return Number.isSafeInteger(Number(token)) ? token : `{"$bigint":"${token}"}`;
  });
  const revived: unknown = JSON.parse(marked, (_key, value: unknown) => {
    if (value !== null && typeof value === "object") {
      if ("$nonFinite" in value) {
        const t = value.$nonFinite;
        return t === "NaN" ? NaN : t === "Infinity" ? Infinity : -Infinity;
      }
      if ("$bigint" in value && typeof value.$bigint === "string") return BigInt(value.$bigint);
    }
    return value;
  });
  return revived;
}

/** `parseHistoryJson` of text that must hold one JSON object (a history row, a summary, a config); throws otherwise. */
export function parseHistoryObject(text: string): Record<string, unknown> {
  const value = parseHistoryJson(text);
  if (!isRecord(value))
    throw new SyntaxError(`expected a JSON object, got ${text.length > 60 ? `${text.slice(0, 60)}…` : text}`);
  return value;
}

/** Seconds, with millisecond precision, from milliseconds since the epoch. */
function seconds(ms: number): string {
  return String(ms / 1000);
}

/**
 * One history line. `fields` is the already-encoded `"key":value` list (comma-separated, no
 * braces), or empty. `globalStep` is null for rows on an axis of their own (see `Metric.axis`).
 */
export function historyLine(
  step: number,
  timestampMs: number,
  runtimeMs: number,
  globalStep: number | null,
  fields: string,
): string {
  const base = `{"_step":${step},"_runtime":${seconds(Math.max(0, runtimeMs))},"_timestamp":${seconds(timestampMs)}`;
  const head = globalStep === null ? base : `${base},"global_step":${globalStep}`;
  return fields.length === 0 ? `${head}}` : `${head},${fields}}`;
}

/**
 * The bins of a `Reduce.HISTOGRAM` value as W&B reads them: n counts and n + 1 edges, edge to
 * edge, empty stretches included as empty bins (`contiguousBuckets`). W&B, like numpy, reads bin
 * i as [bins[i], bins[i+1]) and the last as [bins[n-1], bins[n]]; a bucket holds (lower, upper]
 * (TensorBoard's reading). Over doubles, (lower, upper] is exactly [nextUp(lower), nextUp(upper)),
 * so the edges between bins are the bucket limits moved up by one double: `numpy.histogram` of
 * the recorded values with these bins gives these counts, a 0 or a value on a limit included (a 0
 * is in a bin that ends above 0, never in one that ends at it). The first bin starts at the
 * recorded min and the last ends at the recorded max; a last bin that would have no width (all
 * values equal) ends at its bucket's limit, or the default edge above when the value is the limit
 * (all zeros: [0, 1e-12]). −Infinity is counted in the lowest finite bucket and +Infinity in the
 * highest (their edges ±`Number.MAX_VALUE`), where numpy, which cannot bin them, does not count
 * them. Null when no value has a bucket (every value NaN): W&B gets no histogram then.
 */
function wandbHistogramBins(h: HistogramData): { values: number[]; bins: number[] } | null {
  const { limits, counts } = contiguousBuckets(withoutInfiniteBucket(h));
  const n = counts.length;
  const first = limits[0];
  const last = limits[n - 1];
  if (first === undefined || last === undefined) return null;
  const between = limits.slice(0, n - 1).map(nextUp);
  const right = between[0] ?? last;
  const left = Number.isFinite(h.min)
    ? h.min
    : (lowerEdgeOf(first) ?? right - Math.max(Math.abs(right) * 1e-9, Number.MIN_VALUE));
  const lastLeft = between.at(-1) ?? left;
  let end = Number.isFinite(h.max) ? h.max : last;
  if (!(end > lastLeft)) end = last > lastLeft ? last : (edgeAbove(last) ?? nextUp(lastLeft));
  return { values: counts, bins: [left, ...between, end] };
}

/** The lowest default bucket (−∞, −MAX_VALUE] has no finite lower edge: its count joins the bucket above. */
function withoutInfiniteBucket(h: HistogramData): HistogramData {
  if (h.bucketLimits[0] !== HISTOGRAM_EDGES[0]) return h;
  const above = HISTOGRAM_EDGES[1] ?? 0;
  const limits = h.bucketLimits.slice(1);
  const counts = h.bucketCounts.slice(1);
  if (limits[0] === above) counts[0] = (counts[0] ?? 0) + (h.bucketCounts[0] ?? 0);
  else {
    limits.unshift(above);
    counts.unshift(h.bucketCounts[0] ?? 0);
  }
  return { ...h, bucketLimits: limits, bucketCounts: counts };
}

/** A `Reduce.HISTOGRAM` value as W&B's histogram object (`wandbHistogramBins`), or null when it has no bins. */
export function histogramJson(h: HistogramData): string | null {
  const histogram = wandbHistogramBins(h);
  if (histogram === null) return null;
  return `{"_type":"histogram","values":[${histogram.values.join(",")}],"bins":[${histogram.bins.map(historyNumber).join(",")}]}`;
}

/**
 * The run summary: the latest value of every key (W&B's default summary), encoded as one JSON line
 * for `wandb-summary.json`.
 */
export class RunSummary {
  private readonly values = new Map<string, string>();
  private step = 0;
  private runtimeMs = 0;
  private timestampMs = 0;
  /** Set a key's latest value: `keyText` is the quoted key with its colon (`quotedKey`), `json` the value. */
  set(keyText: string, json: string): void {
    this.values.set(keyText, json);
  }

  /** How many keys the summary has. */
  get size(): number {
    return this.values.size;
  }

  /** The row the latest values came from. */
  at(step: number, timestampMs: number, runtimeMs: number): void {
    this.step = step;
    this.timestampMs = timestampMs;
    this.runtimeMs = runtimeMs;
  }

  /** The summary line. */
  take(): string {
    let text = `{"_step":${this.step},"_runtime":${seconds(Math.max(0, this.runtimeMs))},"_timestamp":${seconds(this.timestampMs)}`;
    for (const [keyText, json] of this.values) text += `,${keyText}${json}`;
    return `${text}}`;
  }
}
