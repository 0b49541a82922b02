/**
 * Where a run's files go: `{root}/{experiment}/{trial}/`.
 *
 * Options win over the environment (`RANKSCOPE_ROOT`, `RANKSCOPE_EXPERIMENT`, `RANKSCOPE_TRIAL`,
 * or `RANKSCOPE_RUN_DIR` for the whole path); a user who sets nothing gets
 * `./runs/default/{YYYYMMDD-HHMMSS}`. Nothing is created here: the first writer creates what it
 * needs, so a console-only job leaves no directories behind.
 */
import { join, resolve } from "node:path";

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
  const root = resolve(options.root ?? env["RANKSCOPE_ROOT"] ?? "runs");
  const experiment = checkName("experiment", options.experiment ?? env["RANKSCOPE_EXPERIMENT"] ?? "default");
  const trial = checkName("trial", options.trial ?? env["RANKSCOPE_TRIAL"] ?? timestampTrial(now));
  const explicit = options.runDir ?? env["RANKSCOPE_RUN_DIR"];
  return { runDir: explicit !== undefined ? resolve(explicit) : join(root, experiment, trial), root, experiment, trial };
}
