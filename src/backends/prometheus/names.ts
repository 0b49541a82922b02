/**
 * rankscope keys → Prometheus metric names, by Prometheus's naming rules and OpenTelemetry's
 * Prometheus mapping (opentelemetry-specification, `specification/compatibility/
 * prometheus_and_openmetrics.md`, "OTLP Metric points to Prometheus"; docs/prometheus.md):
 *
 * - Every character outside `[A-Za-z0-9_]` becomes `_` (`/` and `.` too: `:` is Prometheus's,
 *   for recording rules), a run of `_` one `_`, and a leading or trailing `_` is dropped; a name
 *   that would start with a digit gets a leading `_`. `train/loss` → `train_loss`, `eval/acc@1` →
 *   `eval_acc_1`, `gen_ai.server.time_to_first_token` → `gen_ai_server_time_to_first_token`. A key
 *   with no ASCII letter or digit at all is `key_` and its code points in hex (`é/ü` → `key_e9_2f_fc`).
 * - A key whose unit is known (the GenAI conventions' instruments and their outputs, e.g. `s`)
 *   gets the unit's word as a suffix unless its name already ends with it (`_seconds`); a unit
 *   in braces (`{token}`) is dropped, as the mapping says.
 * - A counter ends in `_total` (added unless the name ends with it).
 *
 * The mapping is not reversible (`train/loss` and `train_loss` get one name: the name clash rule
 * in `exposition.ts` keeps the first): each family's HELP holds the key.
 */
import { splitAttributedKey } from "../../core/attributes.js";
import { genAiConventionOf } from "../../inference/conventions.js";

/** The Prometheus type of a family. */
export type FamilyType = "gauge" | "counter" | "histogram" | "summary";

/** The UCUM units the mapping spells as words (its table), and `1` as Prometheus's `ratio`. */
const UNIT_WORDS: Readonly<Record<string, string>> = {
  d: "days",
  h: "hours",
  min: "minutes",
  s: "seconds",
  ms: "milliseconds",
  us: "microseconds",
  ns: "nanoseconds",
  By: "bytes",
  KiBy: "kibibytes",
  MiBy: "mebibytes",
  GiBy: "gibibytes",
  TiBy: "tebibytes",
  kBy: "kilobytes",
  MBy: "megabytes",
  GBy: "gigabytes",
  TBy: "terabytes",
  m: "meters",
  V: "volts",
  A: "amperes",
  J: "joules",
  W: "watts",
  g: "grams",
  Cel: "celsius",
  Hz: "hertz",
  "%": "percent",
  "1": "ratio",
};

/** The unit of a rate's denominator, singular: `m/s` → `meters_per_second`. */
const PER_UNIT_WORDS: Readonly<Record<string, string>> = {
  s: "second",
  min: "minute",
  h: "hour",
  d: "day",
  w: "week",
  mo: "month",
  y: "year",
};

/** `text` with every run of characters outside `[A-Za-z0-9_]` (and of `_`) as one `_`, none at either end. */
function underscored(text: string): string {
  return text.replace(/[^A-Za-z0-9]+/g, "_").replace(/^_|_$/g, "");
}

/** The Prometheus word of a UCUM unit: `s` → `seconds`, `{token}` → `` (dropped), `By/s` → `bytes_per_second`. */
export function prometheusUnit(unit: string): string {
  const bare = unit.replace(/\{[^}]*\}/g, "").trim();
  if (bare === "") return "";
  const slash = bare.indexOf("/");
  if (slash < 0) return UNIT_WORDS[bare] ?? underscored(bare);
  const over = bare.slice(0, slash);
  const under = bare.slice(slash + 1);
  const per = PER_UNIT_WORDS[under] ?? UNIT_WORDS[under] ?? underscored(under);
  const head = over === "" || over === "1" ? "" : (UNIT_WORDS[over] ?? underscored(over));
  return underscored(`${head}_per_${per}`);
}

/** A metric name from any text (the first rule of the module comment). */
export function sanitizedName(text: string): string {
  const name = underscored(text);
  if (name === "") return `key_${[...text].map((c) => (c.codePointAt(0) ?? 0).toString(16)).join("_")}`;
  return /^[0-9]/.test(name) ? `_${name}` : name;
}

/** `name` with the unit word as its suffix, unless it already ends with it. */
function withUnit(name: string, unit: string): string {
  return unit === "" || name === unit || name.endsWith(`_${unit}`) ? name : `${name}_${unit}`;
}

/** `name` ending in `_total`. */
function withTotal(name: string): string {
  return name.endsWith("_total") ? name : `${name}_total`;
}

/** The `quantile` label of a `quantiles` output suffix: `p50` → `0.5`, `p99.9` → `0.999`. */
function quantileOfSuffix(suffix: string): string | undefined {
  if (!/^p\d+(\.\d+)?$/.test(suffix)) return undefined;
  return String(Number((Number(suffix.slice(1)) / 100).toPrecision(12)));
}

/** The family a key's values of one reduction go to. */
export interface FamilyName {
  /** The metric family name (a counter's with `_total`). */
  readonly name: string;
  readonly type: FamilyType;
  /** The rankscope key (its name, without attributes) the family is of: in HELP. */
  readonly key: string;
  /** The unit's word (`seconds`), or `` when none is known. */
  readonly unit: string;
  /** A summary's `quantile` label for this output (`0.5`). */
  readonly quantile?: string;
}

/** The unit word of a key's name, or of the name its output suffix (`/p99`, `/min`) is on. */
function unitOf(name: string): string {
  const convention = genAiConventionOf(name);
  return convention === undefined ? "" : prometheusUnit(convention.unit);
}

/**
 * Where a key's values of `reduce` go (`name` without attributes): a `sum` key is a counter; a
 * `rate` key's `…/total` a counter of the key and its `…/per_s` a gauge `…_per_second`; a
 * `quantiles` key's `…/p50` the summary of the key; a histogram key (a `histogram` or
 * `buckets(…)` key as `logHistograms` gives it) a histogram; any other value a gauge.
 */
export function prometheusFamily(name: string, reduce: string, histogram = false): FamilyName {
  const unit = unitOf(name);
  if (histogram) return { name: withUnit(sanitizedName(name), unit), type: "histogram", key: name, unit };
  if (reduce === "sum")
    return { name: withTotal(withUnit(sanitizedName(name), unit)), type: "counter", key: name, unit };
  const slash = name.lastIndexOf("/");
  const base = slash > 0 ? name.slice(0, slash) : name;
  const suffix = slash > 0 ? name.slice(slash + 1) : "";
  if (reduce === "rate" && suffix === "total")
    return { name: withTotal(withUnit(sanitizedName(base), unit)), type: "counter", key: base, unit };
  if (reduce === "rate" && suffix === "per_s")
    return { name: `${sanitizedName(base)}_per_second`, type: "gauge", key: name, unit: "" };
  const quantile = reduce.startsWith("quantiles") ? quantileOfSuffix(suffix) : undefined;
  if (quantile !== undefined)
    return { name: withUnit(sanitizedName(base), unit), type: "summary", key: base, unit, quantile };
  return { name: withUnit(sanitizedName(name), unit), type: "gauge", key: name, unit };
}

/**
 * The Prometheus metric family name of a key recorded with `reduce` (default: a gauge's, as a
 * `mean` key's): `prometheusName("train/loss")` → `train_loss`, `prometheusName("tokens", "sum")`
 * → `tokens_total`, `prometheusName("gen_ai.server.time_to_first_token", Reduce.HISTOGRAM)` →
 * `gen_ai_server_time_to_first_token_seconds` (its samples add `_bucket`, `_sum`, `_count`). A
 * `quantiles` key's is its summary's, a `rate` key's its counter's (`…_total`; its `…/per_s`
 * is the gauge `…_per_second`). Attributes in the key (`name{a=x}`) are labels, not in the name.
 */
export function prometheusName(key: string, reduce = "mean"): string {
  const { name } = splitAttributedKey(key);
  if (reduce === "histogram" || reduce.startsWith("buckets(")) return prometheusFamily(name, reduce, true).name;
  if (reduce.startsWith("quantiles")) return prometheusFamily(`${name}/p50`, reduce).name;
  if (reduce === "rate") return prometheusFamily(`${name}/total`, reduce).name;
  return prometheusFamily(name, reduce).name;
}
