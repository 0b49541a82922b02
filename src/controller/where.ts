/**
 * Where a job's data went, said once by the controller at `shutdown()` (every job, not only the
 * demo): the run directory and, when it has a store, how to open the dashboard on it. Silenced by
 * the logger's `quiet` option or `RANKSCOPE_QUIET=1`; ranks never print it.
 */
import { existsSync } from "node:fs";
import { isAbsolute, join, relative } from "node:path";
import { STORE_FILE } from "../store/store-file.js";
import type { RunLocation } from "../run/run-dir.js";

/** A path as the user would type it from `cwd`: relative when inside it, absolute otherwise. */
function shown(path: string, cwd: string): string {
  const rel = relative(cwd, path);
  if (rel === "") return ".";
  return rel.startsWith("..") || isAbsolute(rel) ? path : rel;
}

/** The lines to print for a run, or undefined when its directory was never written. */
export function runLocationNote(run: RunLocation, cwd: string = process.cwd()): string | undefined {
  if (!existsSync(run.runDir)) return undefined;
  let note = `rankscope: this run's data is in ${shown(run.runDir, cwd)}\n`;
  if (existsSync(join(run.runDir, STORE_FILE)))
    note += `rankscope: open the dashboard with: npx rankscope ui --root ${shown(run.root, cwd)}\n`;
  return note;
}
