/**
 * What the local runs index (`run-index.ts`) reads of one run directory: whether its store is
 * inside the root, its stamp (the files whose change means it is read again), and its row and last
 * values. No state: the index decides when to call these.
 */
import { realpathSync, statSync } from "node:fs";
import { basename, dirname, join, relative, sep } from "node:path";
import * as store from "../store/reader.js";
import { STORE_FILE } from "../store/store-file.js";
import { CONFIG_FILE, RUN_META_FILE } from "../run/run-files.js";
import type { IndexedRun } from "./run-query.js";
import type { RunLabelReader } from "./run-labels.js";
import type { LabelledRun } from "./source.js";

/** A path's size and mtime, or null when it is gone. */
export function statOrNull(path: string): { size: number; mtimeMs: number } | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !rel.startsWith(sep));
}

/** Whether a directory's store, links resolved, is inside the root (a link out of it is not a run of this dashboard). */
export function storeInside(realRoot: string, dirPath: string): boolean {
  try {
    return isInside(realRoot, realpathSync(join(dirPath, STORE_FILE)));
  } catch {
    return false;
  }
}

/**
 * A run's stamp: the size and mtime of `metrics.db`, of a non-empty `metrics.db-wal` (an empty one
 * is no change: a reader creates one), of `run.json` and of `config.yaml`. The run is read again
 * when it changes.
 */
export function runStamp(runDir: string): string {
  const of = (name: string): string => {
    const s = statOrNull(join(runDir, name));
    return s === null ? "-" : `${s.size}:${s.mtimeMs}`;
  };
  const wal = statOrNull(join(runDir, `${STORE_FILE}-wal`));
  const walStamp = wal === null || wal.size === 0 ? "0" : `${wal.size}:${wal.mtimeMs}`;
  return `${of(STORE_FILE)}|${walStamp}|${of(RUN_META_FILE)}|${of(CONFIG_FILE)}`;
}

/** A run's row and last values, read from its store and its directory's labels. */
export function readRun(realRoot: string, runDir: string, labels: RunLabelReader): IndexedRun {
  const id = relative(realRoot, runDir).split(sep).join("/");
  const parts = id.split("/");
  const name = (
    experiment: string | null,
    trial: string | null,
  ): { id: string; experiment: string; trial: string } => ({
    id,
    experiment: experiment ?? (parts.length > 1 ? parts.slice(0, -1).join("/") : ""),
    trial: trial ?? parts[parts.length - 1] ?? id,
  });
  try {
    const { summary, hyperparams, lastValues } = store.runOverview(runDir);
    const { runDir: _absolute, ...fields } = summary;
    const row: LabelledRun = {
      ...fields,
      ...name(summary.experiment, summary.trial),
      ...labels.labels(runDir, hyperparams),
    };
    const last: Record<string, number> = {};
    for (const v of lastValues) last[v.key] = v.value;
    return { row, lastValues: last };
  } catch (error) {
    // Named from its path ({root}/{experiment}/{trial}), with the reason instead of a guess.
    const row: LabelledRun = {
      ...name(basename(dirname(runDir)), basename(runDir)),
      status: "unknown",
      startedAt: null,
      endedAt: null,
      updatedAt: null,
      resumeStep: 0,
      error: store.storeFault(error),
      ...labels.labels(runDir, {}),
    };
    return { row, lastValues: {} };
  }
}
