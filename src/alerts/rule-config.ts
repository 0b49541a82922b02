/**
 * The alert rules' configs, declared once: the built-in rules, the config of each kind of rule
 * (`AlertRuleConfig`, the `rules` of the `alerts` option) with its fields and defaults, and
 * `resolveRule`, which checks a config field by field (errors that say what was wrong and what is
 * valid) into the `ResolvedRule` the engine runs.
 */
import { ALERT_LEVELS, type AlertLevel } from "../core/alert.js";
import { describeValue, rejectUnknownOptions } from "../core/settings.js";

/** The rules rankscope has built in. */
export type BuiltinRuleName = "nonfinite" | "rank_lost" | "stalled" | "straggler";

/** The built-in rules, in the order docs and messages list them (all on by default). */
export const BUILTIN_RULES = [
  "nonfinite",
  "rank_lost",
  "stalled",
  "straggler",
] as const satisfies readonly BuiltinRuleName[];

/**
 * The rules on by default, with no `alerts` option and no webhook: a loss that turns NaN and a
 * rank that is lost are never silent. `stalled` and `straggler` judge time, which a job that
 * pauses on purpose (a notebook, a debugger) would trip: they run when alerts are configured.
 */
export const DEFAULT_RULES = ["nonfinite", "rank_lost"] as const satisfies readonly BuiltinRuleName[];

/** What every rule config may say. */
export interface AlertRuleBase {
  /** The `rule` field of its alerts (default: the rule's kind, e.g. `threshold`). */
  name?: string;
  /** How serious its alerts are (default: `error` for nonfinite, rank_lost and stalled, else `warning`). */
  level?: AlertLevel;
}

/** `nonfinite`: a key that was finite becomes NaN or ±Infinity; resolves when it is finite again. */
export interface NonfiniteRule extends AlertRuleBase {
  rule: "nonfinite";
  /** Which keys: a key, or a pattern with `*` (default `*`: every key but rankscope's own). */
  key?: string;
}

/** `rank_lost`: an expected rank stops answering flushes (or its process ends); resolves when it answers again. */
export interface RankLostRule extends AlertRuleBase {
  rule: "rank_lost";
}

/** `stalled`: no flush for `factor` × the median interval between the recent flushes (at least `minMs`); resolves at the next flush. */
export interface StalledRule extends AlertRuleBase {
  rule: "stalled";
  /** How many median flush intervals without a flush make a stall (default 10). */
  factor?: number;
  /** Never sooner than this many milliseconds after the last flush (default 1000). */
  minMs?: number;
}

/** `straggler`: a rank the straggler attribution marks chronic (among the slowest in most recent flushes); resolves when it no longer is. */
export interface StragglerRule extends AlertRuleBase {
  rule: "straggler";
}

/** `threshold`: a key's reduced value above `above` or below `below`; resolves when it is back inside. */
export interface ThresholdRule extends AlertRuleBase {
  rule: "threshold";
  /** A key, or a pattern with `*` (`grad_norm/*`). */
  key: string;
  above?: number;
  below?: number;
  /**
   * Fire only once the key's value has been outside for this many flushes in a row at which the
   * key was logged (default 1: at the first); `{ key: "gen_ai.server.time_to_first_token/p99*",
   * above: 0.5, flushes: 3 }` is "p99 TTFT over 0.5 s for 3 flushes", per model.
   */
  flushes?: number;
}

/** `spike`: a value further than `k` × MAD from the rolling median of the key's previous `window` values; resolves when one is back within. */
export interface SpikeRule extends AlertRuleBase {
  rule: "spike";
  key: string;
  /** How many median absolute deviations make a spike (default 6: about 4 standard deviations for normal noise). */
  k?: number;
  /** How many previous values the median and the MAD are taken over (default 50). */
  window?: number;
  /** Values needed before anything is judged (default 10). */
  minPoints?: number;
}

/** `rate_drop`: a value below `fraction` × the rolling median of the key's values before the drop (a throughput that falls); resolves when it is back above. */
export interface RateDropRule extends AlertRuleBase {
  rule: "rate_drop";
  key: string;
  /** The fraction of the rolling median under which a value is a drop (default 0.5). */
  fraction?: number;
  /** How many values before the drop the median is taken over (default 20). */
  window?: number;
  /** Values needed before anything is judged (default 5). */
  minPoints?: number;
}

/**
 * `ratio`: the sum of the `numerator` keys over a `denominator` key, above `above` or below
 * `below` (at `flushes` flushes in a row); resolves when it is back inside. One episode per
 * denominator key: `{ numerator: "inference/errors/total*", denominator: "inference/requests/total*",
 * above: 0.05 }` is "error rate over 5 %", per model.
 */
export interface RatioRule extends AlertRuleBase {
  rule: "ratio";
  /**
   * The keys added up (a key or `*` pattern). A numerator key counts toward each denominator key
   * whose attributes it carries too (an error count with its `error.type` toward its model's
   * requests); a flush with a denominator and none of its numerator keys is a ratio of 0.
   */
  numerator: string;
  /** The keys divided by (a key or `*` pattern), each its own subject; 0 or not logged at a flush: no evidence. */
  denominator: string;
  above?: number;
  below?: number;
  /** Fire only once the ratio has been outside for this many flushes in a row (default 1). */
  flushes?: number;
}

/** One rule: a built-in rule by name, or a rule config. */
export type AlertRuleConfig =
  | BuiltinRuleName
  | NonfiniteRule
  | RankLostRule
  | StalledRule
  | StragglerRule
  | ThresholdRule
  | SpikeRule
  | RateDropRule
  | RatioRule;

/** The kinds of rule a config can name. */
export type AlertRuleKind = Exclude<AlertRuleConfig, string>["rule"];

/** A rule after its config was checked: every field resolved. */
export type ResolvedRule =
  | { readonly kind: "nonfinite"; readonly name: string; readonly level: AlertLevel; readonly key: string }
  | { readonly kind: "rank_lost" | "straggler"; readonly name: string; readonly level: AlertLevel }
  | {
      readonly kind: "stalled";
      readonly name: string;
      readonly level: AlertLevel;
      readonly factor: number;
      readonly minMs: number;
    }
  | {
      readonly kind: "threshold";
      readonly name: string;
      readonly level: AlertLevel;
      readonly key: string;
      readonly above?: number;
      readonly below?: number;
      readonly flushes?: number;
    }
  | {
      readonly kind: "spike";
      readonly name: string;
      readonly level: AlertLevel;
      readonly key: string;
      readonly k: number;
      readonly window: number;
      readonly minPoints: number;
    }
  | {
      readonly kind: "rate_drop";
      readonly name: string;
      readonly level: AlertLevel;
      readonly key: string;
      readonly fraction: number;
      readonly window: number;
      readonly minPoints: number;
    }
  | {
      readonly kind: "ratio";
      readonly name: string;
      readonly level: AlertLevel;
      readonly numerator: string;
      readonly denominator: string;
      readonly above?: number;
      readonly below?: number;
      readonly flushes?: number;
    };

/** A number field of a rule: `[min, max, integer?]` and its default. */
interface NumberField {
  readonly min: number;
  readonly max: number;
  readonly integer: boolean;
  readonly fallback?: number;
  /** `min` itself is not valid (a strict lower bound). */
  readonly above?: boolean;
}

/** A threshold's numbers (`threshold`, `ratio`). */
const THRESHOLD_NUMBERS: Readonly<Record<string, NumberField>> = {
  above: { min: -Infinity, max: Infinity, integer: false },
  below: { min: -Infinity, max: Infinity, integer: false },
  flushes: { min: 1, max: 10_000, integer: true },
};

/**
 * Each kind's fields besides `rule`, `name`, `level`: `key` (true: required), the further key
 * patterns it requires (`patterns`), numbers, and its default level.
 */
const RULE_FIELDS: Record<
  AlertRuleKind,
  {
    readonly key?: boolean;
    readonly patterns?: readonly string[];
    readonly numbers: Readonly<Record<string, NumberField>>;
    readonly level: AlertLevel;
  }
> = {
  nonfinite: { key: false, numbers: {}, level: "error" },
  rank_lost: { numbers: {}, level: "error" },
  stalled: {
    numbers: {
      factor: { min: 1, max: 1e6, integer: false, fallback: 10, above: true },
      minMs: { min: 0, max: 86_400_000, integer: true, fallback: 1000 },
    },
    level: "error",
  },
  straggler: { numbers: {}, level: "warning" },
  threshold: { key: true, numbers: THRESHOLD_NUMBERS, level: "warning" },
  spike: {
    key: true,
    numbers: {
      k: { min: 0, max: 1e6, integer: false, fallback: 6, above: true },
      window: { min: 3, max: 10_000, integer: true, fallback: 50 },
      minPoints: { min: 3, max: 10_000, integer: true, fallback: 10 },
    },
    level: "warning",
  },
  rate_drop: {
    key: true,
    numbers: {
      fraction: { min: 0, max: 1, integer: false, fallback: 0.5, above: true },
      window: { min: 1, max: 10_000, integer: true, fallback: 20 },
      minPoints: { min: 1, max: 10_000, integer: true, fallback: 5 },
    },
    level: "warning",
  },
  ratio: { patterns: ["numerator", "denominator"], numbers: THRESHOLD_NUMBERS, level: "warning" },
};

const RULE_KINDS = Object.keys(RULE_FIELDS);

function isRuleKind(kind: unknown): kind is AlertRuleKind {
  return typeof kind === "string" && RULE_KINDS.includes(kind);
}

function isLevel(level: unknown): level is AlertLevel {
  return ALERT_LEVELS.some((l) => l === level);
}

function describeField(field: NumberField): string {
  const kind = field.integer ? "an integer" : "a number";
  if (field.min === -Infinity) return `a finite number`;
  return `${kind} ${field.above === true ? "above" : "from"} ${field.min}${field.max === Infinity ? "" : ` ${field.above === true ? "up to" : "to"} ${field.max}`}`;
}

function checkNumber(where: string, name: string, value: unknown, field: NumberField): number | undefined {
  if (value === undefined) return field.fallback;
  const ok =
    typeof value === "number" &&
    Number.isFinite(value) &&
    (!field.integer || Number.isInteger(value)) &&
    (field.above === true ? value > field.min : value >= field.min) &&
    value <= field.max;
  if (!ok) throw new TypeError(`${where}: ${name} must be ${describeField(field)}, got ${describeValue(value)}`);
  return value;
}

/** Check one rule config (a built-in name or an object) and resolve its defaults. */
export function resolveRule(config: unknown, index: number): ResolvedRule {
  const where = `alerts.rules[${index}]`;
  const object: unknown = typeof config === "string" ? { rule: config } : config;
  if (object === null || typeof object !== "object" || Array.isArray(object)) {
    throw new TypeError(
      `${where} must be a built-in rule's name (${BUILTIN_RULES.join(", ")}) or an object { rule, … }, got ${describeValue(config)}`,
    );
  }
  const fields: Record<string, unknown> = { ...object };
  const kind = fields["rule"];
  if (!isRuleKind(kind))
    throw new TypeError(`${where}: rule must be one of ${RULE_KINDS.join(", ")}, got ${describeValue(kind)}`);
  const spec = RULE_FIELDS[kind];
  const at = `${where} (${kind})`;
  rejectUnknownOptions(at, fields, [
    "rule",
    "name",
    "level",
    ...(spec.key === undefined ? [] : ["key"]),
    ...(spec.patterns ?? []),
    ...Object.keys(spec.numbers),
  ]);
  const name = fields["name"] ?? kind;
  if (typeof name !== "string" || !/^[A-Za-z0-9_.:/-]{1,100}$/.test(name))
    throw new TypeError(`${at}: name must be 1 to 100 letters, digits or _ . : / -, got ${describeValue(name)}`);
  const level = fields["level"] ?? spec.level;
  if (!isLevel(level))
    throw new TypeError(`${at}: level must be one of ${ALERT_LEVELS.join(", ")}, got ${describeValue(level)}`);
  const key = fields["key"] ?? (spec.key === false ? "*" : undefined);
  if (spec.key !== undefined && (typeof key !== "string" || key.length === 0))
    throw new TypeError(
      `${at}: key must be a metric key or a pattern with * (e.g. "loss", "grad_norm/*"), got ${describeValue(key)}`,
    );
  const patterns: Record<string, string> = {};
  for (const field of spec.patterns ?? []) {
    const pattern = fields[field];
    if (typeof pattern !== "string" || pattern.length === 0)
      throw new TypeError(
        `${at}: ${field} must be a metric key or a pattern with * (e.g. "inference/errors/total*"), got ${describeValue(pattern)}`,
      );
    patterns[field] = pattern;
  }
  const numbers: Record<string, number> = {};
  for (const [field, rule] of Object.entries(spec.numbers)) {
    const value = checkNumber(at, field, fields[field], rule);
    if (value !== undefined) numbers[field] = value;
  }
  return buildRule(kind, at, { name, level, key: typeof key === "string" ? key : "*", patterns, numbers });
}

/** A threshold's resolved numbers (`threshold`, `ratio`): above and/or below, and flushes. */
function thresholdNumbers(
  at: string,
  numbers: Record<string, number>,
): { above?: number; below?: number; flushes?: number } {
  const { above, below, flushes } = numbers;
  if (above === undefined && below === undefined)
    throw new TypeError(`${at}: give above, below or both (the value it alerts past)`);
  if (above !== undefined && below !== undefined && below > above)
    throw new TypeError(`${at}: below (${below}) is above above (${above}); the alert fires outside [below, above]`);
  return {
    ...(above === undefined ? {} : { above }),
    ...(below === undefined ? {} : { below }),
    ...(flushes === undefined ? {} : { flushes }),
  };
}

/** The resolved rule of a kind, from its checked fields. */
function buildRule(
  kind: AlertRuleKind,
  at: string,
  f: {
    name: string;
    level: AlertLevel;
    key: string;
    patterns: Record<string, string>;
    numbers: Record<string, number>;
  },
): ResolvedRule {
  const n = (field: string): number => f.numbers[field] ?? NaN;
  const base = { name: f.name, level: f.level };
  switch (kind) {
    case "nonfinite":
      return { kind, ...base, key: f.key };
    case "rank_lost":
    case "straggler":
      return { kind, ...base };
    case "stalled":
      return { kind, ...base, factor: n("factor"), minMs: n("minMs") };
    case "threshold":
      return { kind, ...base, key: f.key, ...thresholdNumbers(at, f.numbers) };
    case "ratio": {
      const { numerator = "", denominator = "" } = f.patterns;
      return { kind, ...base, numerator, denominator, ...thresholdNumbers(at, f.numbers) };
    }
    case "spike":
      if (n("minPoints") > n("window"))
        throw new TypeError(`${at}: minPoints (${n("minPoints")}) cannot exceed window (${n("window")})`);
      return { kind, ...base, key: f.key, k: n("k"), window: n("window"), minPoints: n("minPoints") };
    case "rate_drop":
      if (n("minPoints") > n("window"))
        throw new TypeError(`${at}: minPoints (${n("minPoints")}) cannot exceed window (${n("window")})`);
      return { kind, ...base, key: f.key, fraction: n("fraction"), window: n("window"), minPoints: n("minPoints") };
  }
}
