/**
 * The store's reading API — the one way to read a run's store: what the dashboard, `rankscope
 * runs`, `tail` and `export` read, and what `rankscope/store` exports.
 *
 * Every function takes a run directory (the folder holding `metrics.db`) and reads through a
 * cached read-only connection (reader-cache.ts; `closeStores()` closes them); WAL mode means
 * reading never blocks the run's writers. Reading one key touches only that key's rows and chunks.
 * The types are in read-types.ts (shared with the dashboard), one run's reader in store-reader.ts,
 * the series reads in series-read.ts.
 *
 * ```ts
 * import { listRuns, keys, series } from "rankscope/store";
 * for (const run of listRuns("runs")) console.log(run.experiment, run.trial, run.status);
 * const { points, cursor } = series(runDir, "train/loss", { maxPoints: 2000 });
 * const more = series(runDir, "train/loss", { after: cursor }); // only newer points
 * ```
 */
import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type {
  AlertEntry,
  AlertsOptions,
  HistogramEntry,
  KeyInfo,
  KeyKind,
  LastValue,
  RankInfo,
  RankTimingOptions,
  RankTimingWindow,
  RecordsOptions,
  RunOverview,
  RunSummary,
  SampleEntry,
  SeriesColumnsOptions,
  SeriesColumnsResult,
  SeriesOptions,
  SeriesResult,
} from "./read-types.js";
import { cachedReader, closeStores, openReader } from "./reader-cache.js";
import { STORE_FILE } from "./schema.js";
import { storeFault } from "./store-file.js";
import { errorCode } from "../core/errors.js";
import { RunReader } from "./store-reader.js";

export * from "./read-types.js";
export {
  lineOf,
  lineLabel,
  recorderOfLine,
  compareLines,
  type Recorder,
  type RecorderRole,
  type LineOwner,
} from "../core/rank-identity.js";
export { storeFault, closeStores };

/**
 * @deprecated Use the functions of this module, which take the run directory (`series(runDir,
 * key)` for `openStore(runDir).series(key)`): one reading API. Kept for code written against it.
 */
export function openStore(runDir: string): StoreReader {
  return cachedReader(runDir);
}

/**
 * @deprecated Use the functions of this module (`series(runDir, key)`, …): one reading API, with
 * the connections cached and closed by `closeStores()`. `new StoreReader(runDir)` still opens an
 * uncached reader (close it yourself).
 */
export const StoreReader = RunReader;
/** @deprecated See the `StoreReader` value. */
export type StoreReader = RunReader;

/** Options of `listRuns`. */
export interface ListRunsOptions {
  /** Skip stores whose file resolves (through symlinks) outside `root`, without opening them. */
  withinRoot?: boolean;
}

/** Whether `child` is `parent` or inside it (both real, absolute paths). */
function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!isAbsolute(rel) && rel !== ".." && !rel.startsWith(`..${sep}`));
}

/**
 * Every run under `root` that has a store: `root` itself, `root/{experiment}/{trial}` (the
 * standard layout) and anything up to three levels down. Newest first.
 */
export function listRuns(root: string, options: ListRunsOptions = {}): RunSummary[] {
  const base = resolve(root);
  if (!existsSync(base)) throw new Error(`runs root ${base} does not exist`);
  if (!statSync(base).isDirectory()) throw new Error(`runs root ${base} is not a directory`);
  const realBase = options.withinRoot === true ? realpathSync(base) : base;
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (
      existsSync(join(dir, STORE_FILE)) &&
      (options.withinRoot !== true || isInside(realBase, realpathSync(join(dir, STORE_FILE))))
    )
      found.push(dir);
    if (depth === 3) return;
    let entries: string[];
    try {
      entries = readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory() && !e.name.startsWith("."))
        .map((e) => e.name);
    } catch {
      return;
    }
    for (const name of entries.sort()) walk(join(dir, name), depth + 1);
  };
  walk(base, 0);
  const runs: RunSummary[] = [];
  for (const dir of found) {
    try {
      runs.push(cachedReader(dir).runInfo());
    } catch (error) {
      // Named from its path ({root}/{experiment}/{trial}), with the reason instead of a guess.
      runs.push({
        runDir: dir,
        experiment: basename(dirname(dir)),
        trial: basename(dir),
        status: "unknown",
        startedAt: null,
        endedAt: null,
        updatedAt: null,
        resumeStep: 0,
        error: storeFault(error),
      });
    }
  }
  return runs.sort((a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0) || (a.runDir < b.runDir ? -1 : 1));
}

/** A run's metadata. */
export function runInfo(runDir: string): RunSummary {
  return cachedReader(runDir).runInfo();
}

/** A run's keys (optionally of one kind), with their ranks. */
export function keys(runDir: string, kind?: KeyKind): KeyInfo[] {
  return cachedReader(runDir).keys(kind);
}

/** The ranks that wrote to a run. */
export function ranks(runDir: string): RankInfo[] {
  return cachedReader(runDir).ranks();
}

/**
 * The points of one series of a run, downsampled to about `maxPoints` (min, max and last of each
 * bucket, so spikes stay visible), and a cursor for asking only for newer points next time (see
 * `SeriesOptions`). Throws when the run has no such key.
 */
export function series(runDir: string, key: string, options: SeriesOptions = {}): SeriesResult {
  return cachedReader(runDir).series(key, options);
}

/**
 * The next points of one series past a cursor, every one (at most `limit`), as float64 columns,
 * with the cursor of the last: reading a whole series a window at a time without building a point
 * object per point (what `rankscope sync` and the live sync read). Throws when the run has no such key.
 */
export function seriesColumns(runDir: string, key: string, options: SeriesColumnsOptions = {}): SeriesColumnsResult {
  return cachedReader(runDir).seriesColumns(key, options);
}

/** The stream keys of a run (raw values of `per_rank_no_reduce`); read them with `series(..., { kind: "stream" })`. */
export function streams(runDir: string): KeyInfo[] {
  return cachedReader(runDir).keys("stream");
}

/** The system-metric keys of a run (GPU/CPU monitor); read them with `series(..., { kind: "system" })`. */
export function systemMetrics(runDir: string): KeyInfo[] {
  return cachedReader(runDir).keys("system");
}

/** Sample records of a run. */
export function samples(runDir: string, key?: string, options: RecordsOptions = {}): SampleEntry[] {
  return cachedReader(runDir).samples(key, options);
}

/** Histograms of a run. */
export function histograms(runDir: string, key?: string, options: RecordsOptions = {}): HistogramEntry[] {
  return cachedReader(runDir).histograms(key, options);
}

/** The last value of every scalar key of a run (its global line, else its lowest rank's; one row or chunk summary per key, never the points). */
export function lastValues(runDir: string): LastValue[] {
  return cachedReader(runDir).lastValues();
}

/**
 * Per-rank step time, lateness and barrier wait of a run's newest flushes, with each flush's
 * straggler report (docs/stragglers.md); empty when the run has none.
 */
export function rankTiming(runDir: string, options: RankTimingOptions = {}): RankTimingWindow {
  return cachedReader(runDir).rankTiming(options);
}

/** A run's hyperparameters / config. */
export function config(runDir: string): Record<string, unknown> {
  return cachedReader(runDir).config();
}

/**
 * A run's alert events (firing and resolved) in order, the newest `limit` (1000) after `after`.
 * An episode's events share an `id`; it is firing while its last event is. A store written
 * before alerts existed has none.
 */
export function alerts(runDir: string, options: AlertsOptions = {}): AlertEntry[] {
  return cachedReader(runDir).alerts(options);
}

/** Same as `config`. */
export const hparams = config;

/**
 * A run's metadata, hyperparameters and last values in one go, for an index of many runs (the
 * dashboard's): through the run's cached reader when one is open, else through a connection
 * opened and closed for it, so reading thousands of runs never evicts the readers in use.
 * Hyperparameters that are not valid JSON read as none (as the runs list has always shown such a
 * run); a store SQLite cannot read throws.
 */
export function runOverview(runDir: string): RunOverview {
  const cached = openReader(runDir);
  const reader = cached ?? new RunReader(runDir);
  try {
    const summary = reader.runInfo();
    let hyperparams: Record<string, unknown> = {};
    try {
      hyperparams = reader.config();
    } catch (error) {
      if (errorCode(error).startsWith("SQLITE_")) throw error;
    }
    return { summary, hyperparams, lastValues: reader.lastValues() };
  } finally {
    if (cached === undefined) reader.close();
  }
}
