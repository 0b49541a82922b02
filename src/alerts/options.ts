/**
 * The alerts' options, declared once: `AlertOptions` (the logger's `alerts` option), the settings
 * table each of them is resolved through (option → environment → default, `resolveSetting`), and
 * the rule configs with their fields and defaults, checked field by field with errors that say
 * what was wrong and what is valid.
 */
import { ALERT_LEVELS, type AlertLevel } from "../core/alert.js";
import {
  describeValue,
  enumKind,
  flagKind,
  integerKind,
  rejectUnknownOptions,
  resolveSetting,
  textKind,
  type Setting,
} from "../core/settings.js";

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

/**
 * The switch of the default rules: `RANKSCOPE_ALERTS=0` (or `false`, `no`, `off`) turns them off
 * when no `alerts` option is given, as `alerts: false` does in code.
 */
export const ALERTS_SWITCH: Setting<boolean> = {
  owner: "getOrCreateMetricLogger",
  option: "alerts",
  env: "RANKSCOPE_ALERTS",
  kind: flagKind,
  fallback: true,
};

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

/** One rule: a built-in rule by name, or a rule config. */
export type AlertRuleConfig =
  | BuiltinRuleName
  | NonfiniteRule
  | RankLostRule
  | StalledRule
  | StragglerRule
  | ThresholdRule
  | SpikeRule
  | RateDropRule;

/** The kinds of rule a config can name. */
export type AlertRuleKind = Exclude<AlertRuleConfig, string>["rule"];

/**
 * The logger's `alerts` option (docs/alerts.md). Alerts are evaluated on the controller at every
 * flush on the reduced values, and by a watchdog between flushes; each goes to the console and
 * the text log, the run's store (the dashboard's banner and Alerts tab) and the webhook.
 */
export interface AlertOptions {
  /**
   * Where every alert is POSTed as JSON (an `http://` or `https://` URL). Default: the
   * environment's `RANKSCOPE_ALERT_WEBHOOK`; none means no webhook. Treated as a secret (Slack's
   * URLs hold a token): never printed.
   */
  webhook?: string;
  /** `json` (default): the alert as JSON. `slack`: the same JSON plus `text`, the line Slack's incoming webhooks show. */
  webhookFormat?: "json" | "slack";
  /** How long one POST may take before it counts as failed (default 5000 ms; env RANKSCOPE_ALERT_WEBHOOK_DEADLINE_MS). */
  webhookDeadlineMs?: number;
  /** How long one alert is retried in all, attempts included, before it is counted undelivered (default 30 000 ms). */
  webhookRetryMs?: number;
  /** Alerts waiting for the webhook (default 256); past it the oldest waiting one is dropped and counted undelivered. */
  webhookQueue?: number;
  /** The rules. Default: the built-in ones (`nonfinite`, `rank_lost`, `stalled`, `straggler`); with no `alerts` option at all, `DEFAULT_RULES`. */
  rules?: readonly AlertRuleConfig[];
  /** A new episode of a rule for the same key or rank within this many ms of its last firing is recorded but not sent (default 60 000; 0: never held back). */
  minIntervalMs?: number;
  /** At most this many firings are sent per minute, all rules together (default 30); the rest are recorded as suppressed and counted. */
  maxPerMinute?: number;
}

/** Who the options belong to, in messages. */
const OWNER = "alerts";

/** The settings of `AlertOptions` (all but `rules`), each resolved option → environment → default. */
export const ALERT_SETTINGS = {
  webhook: {
    owner: OWNER,
    option: "webhook",
    env: "RANKSCOPE_ALERT_WEBHOOK",
    kind: textKind(/^https?:\/\/[^\s/]+\S*$/, "an http:// or https:// URL"),
    fallback: undefined,
    secret: true,
  },
  webhookFormat: {
    owner: OWNER,
    option: "webhookFormat",
    kind: enumKind<"json" | "slack">(["json", "slack"]),
    fallback: "json",
  },
  webhookDeadlineMs: {
    owner: OWNER,
    option: "webhookDeadlineMs",
    env: "RANKSCOPE_ALERT_WEBHOOK_DEADLINE_MS",
    kind: integerKind(1, 600_000),
    fallback: 5000,
  },
  webhookRetryMs: { owner: OWNER, option: "webhookRetryMs", kind: integerKind(0, 3_600_000), fallback: 30_000 },
  webhookQueue: { owner: OWNER, option: "webhookQueue", kind: integerKind(1, 100_000), fallback: 256 },
  minIntervalMs: { owner: OWNER, option: "minIntervalMs", kind: integerKind(0, 86_400_000), fallback: 60_000 },
  maxPerMinute: { owner: OWNER, option: "maxPerMinute", kind: integerKind(1, 100_000), fallback: 30 },
} satisfies { [K in Exclude<keyof AlertOptions, "rules">]-?: Setting<AlertOptions[K]> };

/** Every option `alerts` takes. */
const ALERT_OPTION_NAMES = [...Object.keys(ALERT_SETTINGS), "rules"];

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
    };

/** The alerts' options as resolved. */
export interface ResolvedAlertOptions {
  readonly webhook: string | undefined;
  readonly webhookFormat: "json" | "slack";
  readonly webhookDeadlineMs: number;
  readonly webhookRetryMs: number;
  readonly webhookQueue: number;
  readonly minIntervalMs: number;
  readonly maxPerMinute: number;
  /** Empty when alerts are off (`alerts: false`, `RANKSCOPE_ALERTS=0`): user `alert()` calls are still recorded. */
  readonly rules: readonly ResolvedRule[];
}

/** A number field of a rule: `[min, max, integer?]` and its default. */
interface NumberField {
  readonly min: number;
  readonly max: number;
  readonly integer: boolean;
  readonly fallback?: number;
  /** `min` itself is not valid (a strict lower bound). */
  readonly above?: boolean;
}

/** Each kind's fields besides `rule`, `name`, `level`: `key` (true: required), numbers, and its default level. */
const RULE_FIELDS: Record<
  AlertRuleKind,
  { readonly key?: boolean; readonly numbers: Readonly<Record<string, NumberField>>; readonly level: AlertLevel }
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
  threshold: {
    key: true,
    numbers: {
      above: { min: -Infinity, max: Infinity, integer: false },
      below: { min: -Infinity, max: Infinity, integer: false },
    },
    level: "warning",
  },
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
  const numbers: Record<string, number> = {};
  for (const [field, rule] of Object.entries(spec.numbers)) {
    const value = checkNumber(at, field, fields[field], rule);
    if (value !== undefined) numbers[field] = value;
  }
  return buildRule(kind, at, { name, level, key: typeof key === "string" ? key : "*", numbers });
}

/** The resolved rule of a kind, from its checked fields. */
function buildRule(
  kind: AlertRuleKind,
  at: string,
  f: { name: string; level: AlertLevel; key: string; numbers: Record<string, number> },
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
    case "threshold": {
      const { above, below } = f.numbers;
      if (above === undefined && below === undefined)
        throw new TypeError(`${at}: give above, below or both (the value it alerts past)`);
      if (above !== undefined && below !== undefined && below > above)
        throw new TypeError(
          `${at}: below (${below}) is above above (${above}); the alert fires outside [below, above]`,
        );
      return {
        kind,
        ...base,
        key: f.key,
        ...(above === undefined ? {} : { above }),
        ...(below === undefined ? {} : { below }),
      };
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

/**
 * Check and resolve the `alerts` option. `false` (or, with no option, `RANKSCOPE_ALERTS=0`) turns
 * alerts off, even with RANKSCOPE_ALERT_WEBHOOK set. With no `rules`: the four built-in rules when
 * the option is given or a webhook is set, else `DEFAULT_RULES` (`nonfinite`, `rank_lost`).
 * Throws a TypeError naming what was wrong and what is valid.
 */
export function resolveAlertOptions(
  options: AlertOptions | false | undefined,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedAlertOptions {
  if (
    options !== undefined &&
    options !== false &&
    (options === null || typeof options !== "object" || Array.isArray(options))
  ) {
    throw new TypeError(
      `getOrCreateMetricLogger: alerts must be an object of alert options or false, got ${describeValue(options)}`,
    );
  }
  const given: AlertOptions = options === false || options === undefined ? {} : options;
  rejectUnknownOptions(OWNER, given, ALERT_OPTION_NAMES);
  const on = resolveSetting(ALERTS_SWITCH, options === undefined ? undefined : options !== false, env);
  const webhook = on ? resolveSetting<string | undefined>(ALERT_SETTINGS.webhook, given.webhook, env) : undefined;
  const configured = options !== undefined || webhook !== undefined;
  if (given.rules !== undefined && !Array.isArray(given.rules))
    throw new TypeError(
      `alerts.rules must be a list of rules (built-in names or { rule, … } objects), got ${describeValue(given.rules)}`,
    );
  const configs: readonly unknown[] = given.rules ?? (configured ? BUILTIN_RULES : DEFAULT_RULES);
  const rules = on ? configs.map((config, i) => resolveRule(config, i)) : [];
  const names = new Map<string, string>();
  for (const rule of rules) {
    const identity = `${rule.name}\u0000${"key" in rule ? rule.key : ""}`;
    if (names.has(identity))
      throw new TypeError(
        `alerts.rules: two rules are named ${JSON.stringify(rule.name)}${"key" in rule ? ` for key ${JSON.stringify(rule.key)}` : ""}; give one a name of its own`,
      );
    names.set(identity, rule.name);
  }
  return {
    webhook,
    webhookFormat: resolveSetting(ALERT_SETTINGS.webhookFormat, given.webhookFormat, env),
    webhookDeadlineMs: resolveSetting(ALERT_SETTINGS.webhookDeadlineMs, given.webhookDeadlineMs, env),
    webhookRetryMs: resolveSetting(ALERT_SETTINGS.webhookRetryMs, given.webhookRetryMs, env),
    webhookQueue: resolveSetting(ALERT_SETTINGS.webhookQueue, given.webhookQueue, env),
    minIntervalMs: resolveSetting(ALERT_SETTINGS.minIntervalMs, given.minIntervalMs, env),
    maxPerMinute: resolveSetting(ALERT_SETTINGS.maxPerMinute, given.maxPerMinute, env),
    rules,
  };
}
