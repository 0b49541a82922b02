/**
 * The alerts' options, declared once: `AlertOptions` (the logger's `alerts` option), the settings
 * table each of them is resolved through (option → environment → default, `resolveSetting`), and
 * `resolveAlertOptions`, which checks them with errors that say what was wrong and what is valid.
 * The rules' configs, their fields and defaults are `rule-config.ts` (re-exported here).
 */
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
import { BUILTIN_RULES, DEFAULT_RULES, resolveRule, type AlertRuleConfig, type ResolvedRule } from "./rule-config.js";

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
    const key = "key" in rule ? rule.key : "numerator" in rule ? `${rule.numerator} / ${rule.denominator}` : "";
    const identity = `${rule.name}\u0000${key}`;
    if (names.has(identity))
      throw new TypeError(
        `alerts.rules: two rules are named ${JSON.stringify(rule.name)}${key === "" ? "" : ` for key ${JSON.stringify(key)}`}; give one a name of its own`,
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
