/**
 * How CLI commands name a run: a run directory (`runs/ppo/seed1`), or `experiment/trial` under
 * `--root` (default `$RANKSCOPE_ROOT` or `./runs`).
 */
import { existsSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { STORE_FILE } from "../store/schema.js";
import { resolveSetting, textKind } from "../core/settings.js";
import { DEFAULT_RUNS_ROOT, RUNS_ROOT_ENV } from "../run/run-dir.js";

/** The help of every command's `--root`. */
export const ROOT_OPTION_HELP = `the runs root for experiment/trial (default: $${RUNS_ROOT_ENV} or ./${DEFAULT_RUNS_ROOT})`;

/** The runs root a command uses when `--root` is not given (the same setting as the logger's `root`). */
export function defaultRoot(): string {
  return resolveSetting(
    {
      owner: "rankscope",
      option: "--root",
      env: RUNS_ROOT_ENV,
      kind: textKind(undefined, "a non-empty path"),
      fallback: DEFAULT_RUNS_ROOT,
    },
    undefined,
  );
}

/**
 * The run directory `run` names, or an Error saying where it looked: the first candidate (`run`
 * itself, then `root/run`) that holds `marker` (the store by default; `traces` for `traces merge`).
 */
export function resolveRunArg(run: string, root: string = defaultRoot(), marker: string = STORE_FILE): string {
  const candidates = isAbsolute(run) ? [run] : [resolve(run), resolve(join(root, run))];
  for (const dir of candidates) if (existsSync(join(dir, marker))) return dir;
  throw new Error(
    `no run ${JSON.stringify(run)}: none of ${candidates.map((c) => join(c, marker)).join(", ")} exists; give a run directory or experiment/trial under --root (list them with: rankscope runs --root ${root})`,
  );
}

/** A positive integer option, or an Error naming the option. */
export function positiveInteger(name: string, text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(text)}`);
  return n;
}

/** A number for people: up to 6 significant digits, NaN and ±Infinity spelled out. */
export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (Number.isInteger(value) && Math.abs(value) < 1e15) return String(value);
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-4 || abs >= 1e9)) return value.toExponential(4);
  return String(Number(value.toPrecision(6)));
}
