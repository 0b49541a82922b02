/**
 * What the dashboard reads, as the server serves it: one contract, two sources.
 *
 * The API (`routes.ts`) never touches SQLite, PostgreSQL or the run directories itself: it asks a
 * `DashboardSource` — the local runs root read through the store's reader (`store-source.ts`, what
 * `rankscope ui` serves) or a team server's PostgreSQL (`src/server/pg-source.ts`, what `rankscope
 * server` serves) — so the JSON API and the web app are the same over both. Every method is
 * read-only. A run is named on the wire by its id (`experiment/trial`); `resolveRun` turns it into
 * the source's own handle (a run directory, a database row), which the other methods take. Runs,
 * keys and histograms are the store's own types (`RunSummary`, `KeyInfo`, `HistogramEntry` from
 * src/store/read-types.ts), sent as they are.
 */
import type { Readable } from "node:stream";
import type { AlertEntry, HistogramEntry, KeyInfo, RunStatus, RunSummary } from "../store/read-types.js";
import type { RanksView } from "./ranks-view.js";

export type { AlertEntry, HistogramEntry, KeyInfo, RanksView, RunSummary };

/** How a parameter filter compares. */
export type ParamOp = "=" | "!=" | "<" | "<=" | ">" | ">=";

/** One `param=` filter. */
export interface ParamFilter {
  readonly name: string;
  readonly op: ParamOp;
  /** A number when the value reads as one, else the text. */
  readonly value: number | string;
}

/** One `metric=` filter: a key's last value against a number. */
export interface MetricFilter {
  readonly key: string;
  readonly op: ParamOp;
  readonly value: number;
}

/** The orders of `/api/runs`: a run field, or a parameter's or a metric's value (`by` names which). */
export type RunSort =
  | { readonly field: "started" | "updated" | "name" | "status" | "group" }
  | { readonly field: "param" | "metric"; readonly name: string };

/** A checked `/api/runs` query (parsed and applied in memory by `run-query.ts`, as SQL by `src/server/run-filter.ts`). */
export interface RunQuery {
  /** Texts a run's id, experiment, trial, group or a tag must each contain. */
  readonly texts?: readonly string[];
  readonly tags?: readonly string[];
  readonly group?: string;
  readonly statuses?: readonly RunStatus[];
  /** Only runs with these ids. */
  readonly ids?: readonly string[];
  readonly params?: readonly ParamFilter[];
  readonly metrics?: readonly MetricFilter[];
  /** Default: started. */
  readonly sort?: RunSort;
  /** Reverse `sort`'s natural order (newest first for times, A→Z for text, low→high for values). */
  readonly reverse?: boolean;
  readonly offset?: number;
  readonly limit?: number;
  /** Add each run's last values (`summary`); with `internal`, rankscope's own keys too. */
  readonly summary?: boolean;
  readonly internal?: boolean;
}

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

/**
 * A run of `/api/runs`: the summary and its labels; with `summary=1`, the last value of each of
 * its scalar keys (as `/api/summary` answers them).
 */
export type LabelledRun = DashboardRun & RunLabels & { readonly summary?: Record<string, number> };

/** One page of `/api/runs`: the runs matching the query, in its order, and how many matched in all. */
export interface RunsPage {
  readonly runs: LabelledRun[];
  /** Runs matching the filters (before `offset`/`limit`). */
  readonly total: number;
  /**
   * While a local root's first read is not done (a root of thousands of runs takes seconds): how
   * many runs are read of those found so far. The page then holds only the runs read.
   */
  readonly indexing?: { readonly runsRead: number; readonly runsFound: number };
}

/** What `/api/config` shows beside the hyperparameters: the run's files as written. */
export interface RunDetails {
  /** `config.yaml` as written (redacted by the job), or null. */
  readonly configYaml: string | null;
  /** `version.json`'s text, or null. */
  readonly versionJson: string | null;
  readonly tags: string[];
  readonly group: string | null;
}

/** A trace file of a run, as `/api/traces` lists it. */
export interface TraceFileEntry {
  readonly name: string;
  readonly size: number;
  /** Milliseconds since the epoch. */
  readonly modified: number;
}

/** A file of a run read a byte range at a time (a text log: it can be gigabytes). */
export interface RunBytes {
  readonly name: string;
  /** Its size now (a log grows while it is read). */
  size(): Promise<number>;
  /** Up to `length` bytes from `from` (fewer at the end of the file). */
  read(from: number, length: number): Promise<Buffer>;
}

/** A trace file opened for download. */
export interface TraceFile {
  readonly name: string;
  readonly size: number;
  open(): Readable;
}

/**
 * Everything the dashboard reads. `run` arguments are handles from `resolveRun`; a source throws
 * an `HttpError` (400/403/404) for a run or key it does not have, so the API answers with it.
 */
export interface DashboardSource {
  /**
   * How many runs of a many-runs request (`/api/keys?runs=[…]`) to read at once (default 4): a
   * source whose reads wait on a database and batch what one turn asks sets it higher; one whose
   * reads hold the event loop (SQLite) leaves it low.
   */
  readonly concurrentRuns?: number;
  /**
   * The handle of the run a request names (`experiment/trial`, as `listRuns` gives it); a 400 for
   * a malformed name, 404 for an unknown run, 403 for one the source refuses to open. With
   * `needsStore`, the run's metrics must be readable (a local run's `metrics.db` inside the root).
   */
  resolveRun(run: string | null, needsStore: boolean): Promise<string> | string;
  /** The runs matching `query` (all of them for an empty query), newest first unless it sorts otherwise. */
  listRuns(query: RunQuery): Promise<RunsPage> | RunsPage;
  /** The scalar keys of a run; `ranks` includes `GLOBAL_RANK` (-1) when the key has a global line. */
  keys(runDir: string): Promise<KeyInfo[]> | KeyInfo[];
  /** Names of the ranks that wrote (`Trainer_0_r1`), by rank number, when known. */
  rankNames?(runDir: string): Promise<Record<string, string>> | Record<string, string>;
  series(runDir: string, key: string, query: SeriesQuery): Promise<SeriesData> | SeriesData;
  streamKeys(runDir: string): Promise<string[]> | string[];
  /** A key's raw values: of every rank, or of `rank` only (a per-rank line). */
  stream(
    runDir: string,
    key: string,
    query: { after?: string; maxPoints?: number; rank?: number },
  ): Promise<StreamData> | StreamData;
  samples(runDir: string): Promise<SampleRow[]> | SampleRow[];
  /** Keys of `Reduce.HISTOGRAM` metrics. */
  histogramKeys?(runDir: string): Promise<string[]> | string[];
  /**
   * The newest histograms of a key (up to `limit`), in step order: the store's entries (`rank` -1
   * for the global one); only `rank`'s when it is given.
   */
  histograms?(runDir: string, key: string, limit: number, rank?: number): Promise<HistogramEntry[]> | HistogramEntry[];
  /** The lines that logged histograms of a key, in line order (docs/DESIGN.md, "Identity": -1 global, ranks, -2 the controller). */
  histogramRanks?(runDir: string, key: string): Promise<number[]> | number[];
  /** Hyperparameters / config as the store keeps them (config.yaml is read by the server). */
  config(runDir: string): Promise<Record<string, unknown>> | Record<string, unknown>;
  systemKeys(runDir: string): Promise<string[]> | string[];
  system(
    runDir: string,
    key: string,
    query: { after?: string; before?: string; maxPoints?: number },
  ): Promise<SeriesData> | SeriesData;
  /**
   * The run's alert events (firing and resolved, docs/alerts.md) in the order they happened, after
   * `after` (a `seq` of an earlier answer), the newest `limit`: the dashboard's banner and Alerts
   * tab. `seq` orders a run's events and is the cursor; its values are the source's own.
   */
  alerts(runDir: string, query: { after?: number; limit: number }): Promise<AlertEntry[]> | AlertEntry[];
  /** The last value of every scalar key (its global line, else its lowest rank's). */
  lastValues?(runDir: string): Promise<Record<string, number>> | Record<string, number>;
  /** config.yaml, version.json, tags and group of a run. */
  runDetails(runDir: string): Promise<RunDetails> | RunDetails;
  /** The run's trace files (Perfetto), sorted by name. */
  traceFiles(runDir: string): Promise<TraceFileEntry[]> | TraceFileEntry[];
  /** One trace file for download; a 400/404 HttpError for a bad or unknown name. */
  traceFile(runDir: string, name: string | null): Promise<TraceFile> | TraceFile;
  /** The run's text logs (`logs/`: merged.log, main.log, …), sorted by name. */
  logFiles(runDir: string): Promise<TraceFileEntry[]> | TraceFileEntry[];
  /** One text log, read by byte ranges; a 400/404 HttpError for a bad or unknown name. */
  logFile(runDir: string, name: string | null): Promise<RunBytes> | RunBytes;
  /**
   * The Ranks view (docs/stragglers.md): every rank's step time, lateness and barrier wait over the
   * newest `maxFlushes` flushes (rows by host past `MAX_RANK_ROWS` ranks) and the newest flush's
   * straggler report. A source that keeps no per-rank timings answers `emptyRanksView(reason)`.
   */
  ranks(runDir: string, query: { maxFlushes: number }): Promise<RanksView> | RanksView;
  /** Release open databases. */
  close?(): Promise<void> | void;
}

/** The ranks a stream query reads, of the key's `ranks`: all of them, or only `rank` (none when the key has no values of it). */
export function streamRanks(ranks: readonly number[], rank: number | undefined): readonly number[] {
  return rank === undefined ? ranks : ranks.filter((r) => r === rank);
}
