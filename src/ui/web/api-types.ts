/**
 * What the dashboard's endpoints are asked and answer, as the app types them (besides the server's
 * own types, which `api.ts` re-exports): runs and their pages, the runs query and its query
 * string, group lines, the lines requested, a run's keys, its config and its files.
 */
import type { DashboardRun, KeyInfo } from "../source.js";

/** A hyperparameter value as `/api/runs` flattens them. */
export type ParamValue = string | number | boolean | null;

/**
 * A run as the runs table shows it. `tags`, `group` and `params` come from servers that know them
 * (absent from older ones: the app then shows none).
 */
export interface RunInfo extends DashboardRun {
  tags?: string[];
  group?: string | null;
  params?: Record<string, ParamValue>;
  /** The last value of each scalar key, when asked for (`summary=1`). */
  summary?: Record<string, number>;
}

/** One page of `/api/runs`. */
export interface RunsPage {
  runs: RunInfo[];
  total: number;
  /** While a large local root is first read: how far it has come. */
  indexing?: { runsRead: number; runsFound: number };
}

export { runsSearch, type RunsQuery } from "../runs-filter.js";

/** A group's line (`/api/groups`): the mean across its runs, with the band's figures per step. */
export interface GroupLine {
  values: (string | number | boolean | null)[];
  label: string;
  runs: string[];
  steps: number[];
  mean: number[];
  std: number[];
  min: number[];
  max: number[];
  count: number[];
}

/**
 * A scalar key as the store describes it (`ranks` includes `GLOBAL_RANK` when it has a global
 * line); `internal` (rankscope's own bookkeeping) when the server says so.
 */
export type MetricKey = KeyInfo & { internal?: boolean };

/** One requested line of `/api/lines`: key, rank, `after` cursor, and `before` (exclusive upper step bound). */
export type LineRequest =
  [string, number | null, string | null] | [string, number | null, string | null, number | null];

/** One requested line of many runs' `/api/lines`: the run, then as `LineRequest`. */
export type RunLineRequest = [string, ...LineRequest];

/** Keys of one run, by kind. */
export interface RunKeys {
  metrics: MetricKey[];
  streams: string[];
  system: string[];
  /** Keys of `Reduce.HISTOGRAM` metrics. */
  histograms: string[];
  /** Line → the name its process registered (`Trainer_0_r1`, `Controller`), when known. */
  rankNames: Record<string, string>;
  /** Line → its label (`rank 1 (Trainer_0_r1)`, `controller (Controller)`, `rank 1 · thread 7 (Trainer_0_r1)`). */
  rankLabels?: Record<string, string>;
}

export interface ConfigView {
  params: Record<string, unknown>;
  configYaml: string | null;
  version: unknown;
}

export interface TraceFile {
  name: string;
  size: number;
  modified: number;
}
