/**
 * The table of reductions by name: the built-ins, their parameterised forms
 * (`quantiles(0.5,0.95)`, `sample(k=3,by=score)`) and whatever users register.
 *
 * Names, not objects, travel between ranks: a state arrives with its reduce name and the
 * controller looks the definition up here, so a parameterised reduction needs no registration on
 * the receiving side.
 */
import { DEFAULT_QUANTILES, quantilesReduce } from "./accumulators/quantiles.js";
import { histogramReduce } from "./accumulators/histogram.js";
import { bucketsReduce } from "./accumulators/buckets.js";
import { rateReduce } from "./accumulators/rate.js";
import { maxReduce, meanReduce, minReduce, stdReduce, sumReduce } from "./accumulators/moments.js";
import { sampleReduce, type SampleOptions } from "./accumulators/sample.js";
import type {
  AccumulatorState,
  BuiltinReduce,
  NumericReduceName,
  RecordReduceName,
  ReduceDefinition,
  ReduceDefinitionInput,
} from "./reduce.js";
import { processWide } from "./process-wide.js";

type AnyDefinition = ReduceDefinition<AccumulatorState>;

function registry(): Map<string, AnyDefinition> {
  return processWide("reduceRegistry", () => {
    const table = new Map<string, AnyDefinition>();
    const builtins: AnyDefinition[] = [
      meanReduce,
      sumReduce,
      maxReduce,
      minReduce,
      stdReduce,
      quantilesReduce("quantiles"),
      histogramReduce,
      rateReduce,
      sampleReduce("sample"),
    ];
    for (const d of builtins) table.set(d.name, d);
    return table;
  });
}

const PARAMETERISED = /^(quantiles|buckets|sample)\((.*)\)$/;

/**
 * Parameterised definitions kept for reuse, apart from the named ones. Names arrive from other
 * processes, so the table is bounded: beyond its size, a new name's definition is built for each
 * lookup (a known name is still found at once).
 */
const MAX_PARAMETERISED = 1024;

function parameterisedTable(): Map<string, AnyDefinition> {
  return processWide("reduceParameterised", () => new Map<string, AnyDefinition>());
}

function parseParameterised(name: string): AnyDefinition | undefined {
  const match = PARAMETERISED.exec(name);
  if (match === null) return undefined;
  const [, kind, args = ""] = match;
  if (kind === "quantiles") {
    const qs = args.split(",").map((s) => Number(s.trim()));
    return quantilesReduce(name, qs);
  }
  if (kind === "buckets")
    return bucketsReduce(
      name,
      args.split(",").map((s) => Number(s.trim())),
    );
  const options: SampleOptions = {};
  for (const part of args.split(",")) {
    const [k, v] = part.split("=").map((s) => s.trim());
    if (k === "k") options.k = Number(v);
    else if (k === "by" && v !== undefined) options.by = v;
    else throw new RangeError(`unknown sample parameter "${part}" in "${name}"; valid: k=<int>, by=<field>`);
  }
  return sampleReduce(name, options);
}

/** The definition of a reduction by name, or a `TypeError` listing the valid names. */
export function getReduceDefinition(name: string): AnyDefinition {
  const table = registry();
  let definition = table.get(name);
  if (definition === undefined && typeof name === "string") {
    const parameterised = parameterisedTable();
    definition = parameterised.get(name);
    if (definition === undefined) {
      definition = parseParameterised(name);
      if (definition !== undefined && parameterised.size < MAX_PARAMETERISED) parameterised.set(name, definition);
    }
  }
  if (definition === undefined) {
    throw new TypeError(
      `unknown reduce ${JSON.stringify(name)}; valid: ${[...table.keys()].filter((n) => !n.includes("(")).join(", ")}, ` +
        `Reduce.quantiles([...]), Reduce.buckets([...]), Reduce.sample({ k, by }), or a name added with registerReduce`,
    );
  }
  return definition;
}

/** True if `name` is a known reduction (built-in, parameterised or registered). */
export function hasReduce(name: string): boolean {
  try {
    getReduceDefinition(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * Register a user-defined reduction, used exactly like a built-in:
 * `registerReduce("last", { create, merge, value })` then `recordMetric(key, v, "last")`.
 * Every rank that records it and the controller that merges it must register it.
 */
export function registerReduce<S extends AccumulatorState>(name: string, definition: ReduceDefinitionInput<S>): void {
  if (typeof name !== "string" || name.length === 0 || PARAMETERISED.test(name)) {
    throw new TypeError(
      `registerReduce needs a non-empty name that is not a built-in parameterised form, got ${JSON.stringify(name)}`,
    );
  }
  const table = registry();
  const existing = table.get(name);
  if (existing !== undefined && BUILTIN_NAMES.has(name)) {
    throw new TypeError(`"${name}" is a built-in reduction and cannot be replaced; choose another name`);
  }
  for (const method of ["create", "merge", "value"] as const) {
    if (typeof definition[method] !== "function") {
      throw new TypeError(`registerReduce("${name}") needs a ${method}() function in its definition`);
    }
  }
  table.set(name, { ...definition, name });
}

const BUILTIN_NAMES: ReadonlySet<string> = new Set<BuiltinReduce>([
  "mean",
  "sum",
  "max",
  "min",
  "std",
  "quantiles",
  "histogram",
  "rate",
  "sample",
]);

function formatQuantile(q: number): string {
  return String(q);
}

/**
 * The reductions. `Reduce.MEAN` etc. are plain strings, so a reduce name is what travels between
 * ranks; `Reduce.quantiles(qs)` and `Reduce.sample(options)` build parameterised names.
 */
export const Reduce = {
  /** Arithmetic mean. */
  MEAN: "mean",
  /** Sum. */
  SUM: "sum",
  /** Maximum. */
  MAX: "max",
  /** Minimum. */
  MIN: "min",
  /** Population standard deviation (0 for fewer than two values), merged exactly across ranks. */
  STD: "std",
  /** p50, p90 and p99 from a mergeable 1%-relative-error sketch (`key/p50`, ...). */
  QUANTILES: "quantiles",
  /** Mergeable buckets: `key/count`, `key/min`, `key/max`, `key/mean`, and the buckets for histogram backends. */
  HISTOGRAM: "histogram",
  /** A count per flush and per second (`key/total`, `key/per_s`): requests/s, tokens/s, summed across ranks. */
  RATE: "rate",
  /** The best and worst record by `reward` (one each); the value recorded is a plain object. */
  SAMPLE: "sample",
  /** Quantiles of your choice, e.g. `Reduce.quantiles([0.5, 0.95, 0.999])` → `key/p50`, `key/p95`, `key/p99.9`. */
  quantiles(quantiles: readonly number[]): NumericReduceName {
    if (quantiles.length === 0) throw new RangeError("Reduce.quantiles needs at least one quantile in [0, 1]");
    const name: NumericReduceName =
      quantiles.length === DEFAULT_QUANTILES.length && quantiles.every((q, i) => q === DEFAULT_QUANTILES[i])
        ? "quantiles"
        : `quantiles(${quantiles.map(formatQuantile).join(",")})`;
    getReduceDefinition(name);
    return name;
  },
  /**
   * A histogram with explicit bucket boundaries (OpenTelemetry's: bucket i holds (b[i-1], b[i]]) and
   * the quantile sketch in one state: `key/count`, `key/mean`, `key/p50`, `key/p90`, `key/p99`, and
   * the buckets for OTLP, Prometheus and TensorBoard, e.g. `Reduce.buckets([0.01, 0.1, 1])`.
   */
  buckets(boundaries: readonly number[]): NumericReduceName {
    const name: NumericReduceName = `buckets(${boundaries.map(String).join(",")})`;
    getReduceDefinition(name);
    return name;
  },
  /** Keep the k best and k worst records by a numeric field, e.g. `Reduce.sample({ k: 3, by: "score" })`. */
  sample(options: SampleOptions = {}): RecordReduceName {
    const k = options.k ?? 1;
    const by = options.by ?? "reward";
    const name: RecordReduceName = k === 1 && by === "reward" ? "sample" : `sample(k=${k},by=${by})`;
    getReduceDefinition(name);
    return name;
  },
} as const;
