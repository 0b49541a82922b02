/**
 * What the dashboard reads, as the server serves it.
 *
 * The server never touches SQLite itself: it asks a `DashboardSource` (by default the store
 * backend's reader, see `store-source.ts`) so the wire format of the JSON API stays the same if
 * the store's own layout changes. Every method is read-only. Runs, keys and histograms are the
 * store's own types (`RunSummary`, `KeyInfo`, `HistogramEntry` from src/backends/store/read-types.ts),
 * sent as they are.
 */
import type { AlertEntry, HistogramEntry, KeyInfo, RunSummary } from "../backends/store/read-types.js";

export type { AlertEntry, HistogramEntry, KeyInfo, RunSummary };

/**
 * One run under the root, as `/api/runs` lists it: the store's `RunSummary` (same fields, same
 * names), named by its id under the root instead of its absolute path (the browser never sees the
 * server's paths).
 */
export interface DashboardRun extends Omit<RunSummary, "runDir" | "experiment" | "trial"> {
  /** `experiment/trial`, relative to the root; the `run` parameter of every other request. */
  readonly id: string;
  /** As the store recorded it, else from the run's path. */
  readonly experiment: string;
  readonly trial: string;
}

/** What `/api/runs` adds to each run from its directory (`run.json`, `config.yaml`) and its hyperparameters. */
export interface RunLabels {
  /** From `initBackends(config, { tags })`; empty when none. */
  readonly tags: string[];
  /** From `initBackends(config, { group })`; null when none. */
  readonly group: string | null;
  /** The run config and hyperparameters, nested keys flattened to `a.b.c`, secrets redacted. */
  readonly params: Record<string, string | number | boolean | null>;
}

/** A series request. */
export interface SeriesQuery {
  /** The rank's own line; absent for the global line. */
  readonly rank?: number;
  /** Only points after this cursor (from a previous answer). */
  readonly after?: string;
  /** Only points before this step (exclusive): with `after`, a window for a zoom. */
  readonly before?: string;
  /** At most this many points (server-side downsampling keeps min, max and last per bucket). */
  readonly maxPoints?: number;
}

/** Points of one line, in step order; arrays of equal length. */
export interface SeriesData {
  readonly steps: number[];
  /** Milliseconds since the epoch. */
  readonly times: number[];
  readonly values: number[];
  /** Pass back as `after` to get only newer points; null when there are none yet. */
  readonly cursor: string | null;
  /** True when the answer was downsampled. */
  readonly downsampled: boolean;
}

/** Raw per-rank stream values (`per_rank_no_reduce`), for a scatter over time. */
export interface StreamData {
  readonly key: string;
  readonly ranks: number[];
  readonly steps: number[];
  readonly times: number[];
  readonly values: number[];
  readonly cursor: string | null;
}

/** Records of a `Reduce.SAMPLE` key. */
export interface SampleRow {
  readonly key: string;
  readonly step: number;
  readonly rank: number | null;
  readonly record: unknown;
}

/** Everything the dashboard reads from one run. */
export interface DashboardSource {
  listRuns(root: string): Promise<DashboardRun[]> | DashboardRun[];
  /** The scalar keys of a run; `ranks` includes `GLOBAL_RANK` (-1) when the key has a global line. */
  keys(runDir: string): Promise<KeyInfo[]> | KeyInfo[];
  /** Names of the ranks that wrote (`Trainer_0_r1`), by rank number, when known. */
  rankNames?(runDir: string): Promise<Record<string, string>> | Record<string, string>;
  series(runDir: string, key: string, query: SeriesQuery): Promise<SeriesData> | SeriesData;
  streamKeys(runDir: string): Promise<string[]> | string[];
  stream(runDir: string, key: string, query: { after?: string; maxPoints?: number }): Promise<StreamData> | StreamData;
  samples(runDir: string): Promise<SampleRow[]> | SampleRow[];
  /** Keys of `Reduce.HISTOGRAM` metrics. */
  histogramKeys?(runDir: string): Promise<string[]> | string[];
  /**
   * The newest histograms of a key (up to `limit`), in step order: the store's entries (`rank` -1
   * for the global one); only `rank`'s when it is given.
   */
  histograms?(runDir: string, key: string, limit: number, rank?: number): Promise<HistogramEntry[]> | HistogramEntry[];
  /** The ranks that logged histograms of a key (-1: the global line), ascending. */
  histogramRanks?(runDir: string, key: string): Promise<number[]> | number[];
  /** Hyperparameters / config as the store keeps them (config.yaml is read by the server). */
  config(runDir: string): Promise<Record<string, unknown>> | Record<string, unknown>;
  systemKeys(runDir: string): Promise<string[]> | string[];
  system(runDir: string, key: string, query: { after?: string; before?: string; maxPoints?: number }): Promise<SeriesData> | SeriesData;
  /**
   * The run's alert events (firing and resolved, docs/alerts.md) in order, after `after` (a
   * `seq`), the newest `limit`: the dashboard's banner and Alerts tab. Absent: a source without
   * alerts (the app shows none).
   */
  alerts?(runDir: string, query: { after?: number; limit: number }): Promise<AlertEntry[]> | AlertEntry[];
  /** The last value of every scalar key (its global line, else its lowest rank's). */
  lastValues?(runDir: string): Promise<Record<string, number>> | Record<string, number>;
  /** Release open databases. */
  close?(): void;
}
