/**
 * Where a run's files go: `{root}/{experiment}/{trial}/`.
 *
 * Options win over the environment (`RANKSCOPE_ROOT`, `RANKSCOPE_EXPERIMENT`, `RANKSCOPE_TRIAL`,
 * or `RANKSCOPE_RUN_DIR` for the whole path; the one settings resolver); a user who sets nothing gets
 * `./runs/default/{YYYYMMDD-HHMMSS}`. Nothing is created here: the first writer creates what it
 * needs, so a console-only job leaves no directories behind.
 */
import { join, resolve } from "node:path";
import { resolveSetting, textKind, type SettingKind } from "../core/settings.js";

/** How to name a run's directory. */
export interface RunDirOptions {
  /** The whole run directory; overrides root/experiment/trial. */
  runDir?: string;
  /** Parent of every experiment (default `./runs`). */
  root?: string;
  /** Experiment name (default `default`). */
  experiment?: string;
  /** Trial name (default: the start time, `YYYYMMDD-HHMMSS`). */
  trial?: string;
}

/** A resolved run location. */
export interface RunLocation {
  readonly runDir: string;
  readonly root: string;
  readonly experiment: string;
  readonly trial: string;
}

function timestampTrial(date: Date): string {
  const pad = (n: number): string => String(n).padStart(2, "0");
  return `${date.getFullYear()}${pad(date.getMonth() + 1)}${pad(date.getDate())}-${pad(date.getHours())}${pad(date.getMinutes())}${pad(date.getSeconds())}`;
}

const SAFE_NAME = /^[A-Za-z0-9._-][A-Za-z0-9._ -]*$/;

function checkName(what: string, value: string): string {
  if (!SAFE_NAME.test(value) || value === "." || value === "..") {
    throw new TypeError(`${what} ${JSON.stringify(value)} must be a plain name (letters, digits, '.', '_', '-', spaces), not a path`);
  }
  return value;
}

/** Resolve a run's location from options, then the environment, then defaults. */
export function resolveRunLocation(options: RunDirOptions = {}, env: NodeJS.ProcessEnv = process.env, now = new Date()): RunLocation {
  // The one settings resolver: option → environment → default, an invalid value a TypeError naming its source.
  const setting = <T>(option: string, variable: string, kind: SettingKind<T>, fallback: T): T =>
    resolveSetting({ owner: "run directory", option, env: variable, kind, fallback }, (options as Record<string, unknown>)[option], env);
  const path = textKind(undefined, "a non-empty path");
  const name = textKind(SAFE_NAME, "a plain name (letters, digits, '.', '_', '-', spaces), not a path");
  const root = resolve(setting("root", "RANKSCOPE_ROOT", path, "runs"));
  const experiment = checkName("experiment", setting("experiment", "RANKSCOPE_EXPERIMENT", name, "default"));
  const trial = checkName("trial", setting("trial", "RANKSCOPE_TRIAL", name, timestampTrial(now)));
  const explicit = setting<string | undefined>("runDir", "RANKSCOPE_RUN_DIR", path, undefined);
  return { runDir: explicit !== undefined ? resolve(explicit) : join(root, experiment, trial), root, experiment, trial };
}
