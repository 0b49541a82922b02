/**
 * Where a run's files go: `{root}/{experiment}/{trial}/`.
 *
 * Options win over the environment (`RANKSCOPE_ROOT`, `RANKSCOPE_EXPERIMENT`, `RANKSCOPE_TRIAL`,
 * or `RANKSCOPE_RUN_DIR` for the whole path; the one settings resolver); a user who sets nothing gets
 * `./runs/default/{YYYYMMDD-HHMMSS}`. `resolveRunLocation` creates nothing. `claimRunLocation` (the
 * logger's) claims a default-named run directory atomically: two jobs started in the same second —
 * or millisecond — on one root get `…-HHMMSS` and `…-HHMMSS-2`, never one shared directory. A
 * named trial or run directory is used as it is (a resume, or ranks joining it). The logger removes
 * a claimed directory that is still empty at shutdown, so a console-only job leaves none behind.
 */
import { join, resolve } from "node:path";
import { warn } from "../core/diagnostics.js";
import { resolveSetting, textKind, type SettingKind } from "../core/settings.js";
import { claimDirectory, removeIfEmpty } from "../io/atomic-write.js";

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
  /** Set when `claimRunLocation` created the directory (a default-named trial): what to remove if it stays empty. */
  readonly claimed?: { readonly createdParent: string | undefined };
}

function timestampTrial(date: Date): string {
  const pad = (n: number): string => String(n).padStart(2, "0");
  return `${date.getFullYear()}${pad(date.getMonth() + 1)}${pad(date.getDate())}-${pad(date.getHours())}${pad(date.getMinutes())}${pad(date.getSeconds())}`;
}

/**
 * Why `name` cannot be one folder name, or null when it can. The one rule for run names (the API
 * here, the dashboard's `run` parameter): any text that is one path segment — no `/` or `\\`, not
 * `.` or `..`, no NUL or other control character, not empty, at most 255 bytes (a file name's
 * limit) — so `café`, `lr=3e-4,bs=256`, `2026-11-24T00:45:00`, `ablation (v2)`, `run+1` and
 * `实验1` are all names.
 */
export function pathSegmentProblem(name: string): string | null {
  if (typeof name !== "string" || name.length === 0) return "is empty";
  if (name === "." || name === "..") return "is . or .., which name a folder relative to another";
  if (/[/\\]/.test(name)) return "contains a slash, so it would be a path of several folders";
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return "contains a control character (NUL, newline, tab, …)";
  if (Buffer.byteLength(name) > 255) return "is longer than 255 bytes, the limit of a file name";
  return null;
}

function checkName(what: string, value: string): string {
  const problem = pathSegmentProblem(value);
  if (problem !== null)
    throw new TypeError(
      `${what} ${JSON.stringify(value)} ${problem}; it must be one folder name (any text without '/', '\\', NUL or control characters, not '.' or '..')`,
    );
  return value;
}

/** The environment variable naming the runs root, and the root when neither it nor an option is given. */
export const RUNS_ROOT_ENV = "RANKSCOPE_ROOT";
export const DEFAULT_RUNS_ROOT = "runs";

/** Resolve a run's location from options, then the environment, then defaults. */
export function resolveRunLocation(
  options: RunDirOptions = {},
  env: NodeJS.ProcessEnv = process.env,
  now = new Date(),
): RunLocation {
  // The one settings resolver: option → environment → default, an invalid value a TypeError naming its source.
  const setting = <T>(option: keyof RunDirOptions, variable: string, kind: SettingKind<T>, fallback: T): T =>
    resolveSetting({ owner: "run directory", option, env: variable, kind, fallback }, options[option], env);
  const path = textKind(undefined, "a non-empty path");
  // Any string here; `checkName` says precisely what is wrong with one that is not a folder name.
  const name: SettingKind<string> = {
    valid: "one folder name",
    fromOption: (v) => (typeof v === "string" ? v : undefined),
    fromEnv: (raw) => raw,
  };
  const root = resolve(setting("root", RUNS_ROOT_ENV, path, DEFAULT_RUNS_ROOT));
  const experiment = checkName("experiment", setting("experiment", "RANKSCOPE_EXPERIMENT", name, "default"));
  const trial = checkName("trial", setting("trial", "RANKSCOPE_TRIAL", name, timestampTrial(now)));
  const explicit = setting<string | undefined>("runDir", "RANKSCOPE_RUN_DIR", path, undefined);
  return {
    runDir: explicit !== undefined ? resolve(explicit) : join(root, experiment, trial),
    root,
    experiment,
    trial,
  };
}

/** True when neither a trial nor a run directory was given (in code or the environment): the trial is the start time. */
function trialDefaulted(options: RunDirOptions, env: NodeJS.ProcessEnv): boolean {
  const given = (option: keyof RunDirOptions, variable: string): boolean =>
    resolveSetting<string | undefined>(
      {
        owner: "run directory",
        option,
        env: variable,
        kind: textKind(undefined, "a non-empty text"),
        fallback: undefined,
      },
      options[option],
      env,
    ) !== undefined;
  return !given("trial", "RANKSCOPE_TRIAL") && !given("runDir", "RANKSCOPE_RUN_DIR");
}

/**
 * `resolveRunLocation`, and when the trial is the default (the start time), claim its directory
 * atomically (`claimDirectory`): a job that finds it taken — another job started in the same
 * second on this root — takes `{trial}-2` (then `-3`, …), with a warning naming both.
 */
export function claimRunLocation(
  options: RunDirOptions = {},
  env: NodeJS.ProcessEnv = process.env,
  now = new Date(),
): RunLocation {
  const location = resolveRunLocation(options, env, now);
  if (!trialDefaulted(options, env)) return location;
  const claimed = claimDirectory(join(location.root, location.experiment), location.trial);
  if (claimed.name !== location.trial) {
    warn(
      "run.dirTaken",
      `run directory ${location.runDir} already exists (another job started in the same second on this root); this run writes to ${claimed.path}`,
    );
  }
  return { ...location, trial: claimed.name, runDir: claimed.path, claimed: { createdParent: claimed.createdParent } };
}

/** Remove a run directory `claimRunLocation` created if nothing was written into it (nor into the parents it created). */
export function releaseUnusedRunLocation(location: RunLocation): void {
  if (location.claimed === undefined) return;
  removeIfEmpty(location.runDir, location.claimed.createdParent);
}
