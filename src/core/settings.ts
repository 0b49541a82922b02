/**
 * The one settings resolver: every setting of rankscope that can come from code or from the
 * environment is resolved here, in one order and under one policy.
 *
 * - Order: the option given in code, else its environment variable, else the documented default.
 *   An option that differs from a (valid) environment value wins, with a warning naming both.
 * - Invalid values: every value given is checked, option and environment variable alike; an
 *   invalid one is a TypeError naming the setting, where the value came from (the option or the
 *   variable) and what is valid. A typo never silently becomes a default.
 * - Unknown option keys: a TypeError listing the valid ones (`rejectUnknownOptions`).
 */
import { warn } from "./diagnostics.js";

/** How one kind of setting is parsed from code and from the environment. */
export interface SettingKind<T> {
  /** What is valid, for messages ("an integer from 1 to 3600000"). */
  readonly valid: string;
  /** The value given in code, or undefined if it is not valid. */
  fromOption(value: unknown): T | undefined;
  /** The value of the environment variable (trimmed, non-empty), or undefined if it is not valid. */
  fromEnv(raw: string): T | undefined;
}

/** One setting: where it is read and what it defaults to. */
export interface Setting<T> {
  /** Who takes the option, for messages: `getOrCreateMetricLogger`, `startStream`, `joinRun`… */
  readonly owner: string;
  /** The option's name in code. */
  readonly option: string;
  /** Its environment variable, if it has one. */
  readonly env?: string;
  readonly kind: SettingKind<T>;
  /** The default; undefined = no value unless given. */
  readonly fallback: T;
  /** A secret (an API key): messages never show its value. */
  readonly secret?: boolean;
}

/** An integer from `min` to `max`. */
export function integerKind(min: number, max: number = Number.MAX_SAFE_INTEGER): SettingKind<number> {
  const ok = (v: number): boolean => Number.isInteger(v) && v >= min && v <= max;
  return {
    valid: max === Number.MAX_SAFE_INTEGER ? `an integer ≥ ${min}` : `an integer from ${min} to ${max}`,
    fromOption: (v) => (typeof v === "number" && ok(v) ? v : undefined),
    fromEnv: (raw) => {
      const v = Number(raw);
      return /^[+-]?\d+$/.test(raw) && ok(v) ? v : undefined;
    },
  };
}

const TRUE = new Set(["1", "true", "yes", "on"]);
const FALSE = new Set(["0", "false", "no", "off"]);

/** A boolean: `true`/`false` in code; `1/true/yes/on` or `0/false/no/off` (any case) in the environment. */
export const flagKind: SettingKind<boolean> = {
  valid: "true/1/yes/on or false/0/no/off",
  fromOption: (v) => (typeof v === "boolean" ? v : undefined),
  fromEnv: (raw) => {
    const v = raw.toLowerCase();
    return TRUE.has(v) ? true : FALSE.has(v) ? false : undefined;
  },
};

/**
 * A switch set by the mere presence of its variable (the `NO_COLOR` convention: any non-empty value
 * counts): in the environment it means `whenSet`; in code it is a boolean.
 */
export function presenceKind(whenSet: boolean): SettingKind<boolean> {
  return {
    valid: "true or false (the variable: any non-empty value)",
    fromOption: (v) => (typeof v === "boolean" ? v : undefined),
    fromEnv: () => whenSet,
  };
}

/** A non-empty string, matching `pattern` when given (`valid` says what it must look like). */
export function textKind(pattern?: RegExp, valid = "a non-empty string"): SettingKind<string> {
  const ok = (v: string): boolean => v.length > 0 && (pattern === undefined || pattern.test(v));
  return {
    valid,
    fromOption: (v) => (typeof v === "string" && ok(v) ? v : undefined),
    fromEnv: (raw) => (ok(raw) ? raw : undefined),
  };
}

/** One of `values` (the environment's value is matched case-insensitively). */
export function enumKind<T extends string>(values: readonly T[]): SettingKind<T> {
  return {
    valid: `one of ${values.join(", ")}`,
    fromOption: (v) => values.find((value) => value === v),
    fromEnv: (raw) => values.find((v) => v === raw.toLowerCase()),
  };
}

/** A readable rendering of any value for messages (bigints and symbols included). */
export function describeValue(value: unknown): string {
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined)
    return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * Resolve one setting: `option` (the value given in code, undefined if not given), else the
 * environment variable, else the default. Throws a TypeError for an invalid value from either.
 */
export function resolveSetting<T>(setting: Setting<T>, option: unknown, env: NodeJS.ProcessEnv = process.env): T {
  const { owner, kind } = setting;
  let fromEnv: T | undefined;
  const raw = setting.env === undefined ? undefined : env[setting.env];
  if (raw !== undefined && raw.trim() !== "") {
    fromEnv = kind.fromEnv(raw.trim());
    if (fromEnv === undefined) {
      if (setting.secret === true)
        throw new TypeError(
          `${setting.env} is not valid (its value is not shown: it is a secret); valid: ${kind.valid}`,
        );
      const sets = setting.option === setting.env ? "" : ` (it sets ${owner}'s ${setting.option})`;
      throw new TypeError(`${setting.env}=${JSON.stringify(raw)} is not valid${sets}; valid: ${kind.valid}`);
    }
  }
  if (option === undefined) return fromEnv ?? setting.fallback;
  const fromOption = kind.fromOption(option);
  if (fromOption === undefined)
    throw new TypeError(
      `${owner}: ${setting.option} must be ${kind.valid}, got ${setting.secret === true ? "another value (not shown: it is a secret)" : describeValue(option)}`,
    );
  if (fromEnv !== undefined && fromEnv !== fromOption && setting.secret !== true) {
    warn(
      `settings.override:${owner}.${setting.option}`,
      `${owner}: option ${setting.option}=${describeValue(fromOption)} overrides ${setting.env}=${raw}; the option given in code wins`,
    );
  }
  return fromOption;
}

/** Throw a TypeError for an option key not in `known` (typos never pass silently). */
export function rejectUnknownOptions(owner: string, options: object, known: Iterable<string>): void {
  const valid = [...known];
  for (const key of Object.keys(options)) {
    if (!valid.includes(key)) throw new TypeError(`${owner}: unknown option "${key}"; valid: ${valid.join(", ")}`);
  }
}
