/**
 * The types of the store's reading side, defined once: what `rankscope/store` returns, what the
 * dashboard server sends as JSON and what its web app reads (`src/ui/web` imports this file; it is
 * bundled separately, so this file imports types only and holds no code but constants).
 */
import type { HistogramData, SampleRecord } from "../../core/reduce.js";

/** The rank column of series reduced across ranks (`global_reduce`). */
export const GLOBAL_RANK = -1;

/** What a series holds. `scalar`: reduced values by step; `stream`: raw values; `system`: GPU/CPU samples. */
export type SeriesKind = "scalar" | "stream" | "system";

/** What a key holds: a numeric series, or per-flush sample records or histograms. */
export type KeyKind = SeriesKind | "sample" | "histogram";

/** The valid series kinds, in the order messages list them. */
export const SERIES_KINDS: readonly SeriesKind[] = ["scalar", "stream", "system"];

/** Every key kind. */
export const KEY_KINDS: readonly KeyKind[] = [...SERIES_KINDS, "sample", "histogram"];

/** One point of a series. `wall` is milliseconds since the epoch. */
export interface SeriesPoint {
  readonly step: number;
  readonly wall: number;
  readonly value: number;
}

/** What the x axis is: the step, or the wall time. */
export type XAxis = "step" | "wall";

/** A run's status: `running` while any writer has not finished (or a writer died without saying). */
export type RunStatus = "running" | "finished" | "failed" | "crashed" | "unknown";

/** One run, as `listRuns` and `runInfo` describe it. Times are milliseconds since the epoch. */
export interface RunSummary {
  /** Absolute path of the run directory. */
  readonly runDir: string;
  readonly experiment: string | null;
  readonly trial: string | null;
  readonly status: RunStatus;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  /** When anything was last written (a live run's heartbeat). */
  readonly updatedAt: number | null;
  /** The step the run last resumed from (0 if never resumed). */
  readonly resumeStep: number;
  /** Why the store could not be read (a damaged file), when it could not; see `storeFault`. */
  readonly error?: string;
}

/** One key of a run. */
export interface KeyInfo {
  readonly key: string;
  readonly kind: KeyKind;
  /** The reduction that produced it (`mean`, `max`, …), when known. */
  readonly reduce: string | null;
  /** Ranks with data for it, ascending; `GLOBAL_RANK` (-1) is the series reduced across ranks. */
  readonly ranks: readonly number[];
}

/** A rank that wrote to the run. */
export interface RankInfo {
  readonly rank: number;
  readonly rankName: string;
}

/** Options of `series`. */
export interface SeriesOptions {
  /** `scalar` (default), `stream` or `system`. */
  kind?: SeriesKind;
  /** Which rank's series; default: the global one (-1) if present, else the lowest rank. */
  rank?: number;
  /** What the downsampling buckets cut: `step` (default for scalars) or `wall` (default for streams and system). */
  x?: XAxis;
  /** A cursor from an earlier call: only points after it are returned. */
  after?: number;
  /**
   * Only points before this position (exclusive), in the units of `after`: a step for scalars, an
   * arrival number for streams and system metrics. With `after`, a window: a zoom reads the raw
   * points of any stretch of a long series.
   */
  before?: number;
  /** Return at most about this many points (default 2000); `Infinity` for every point. */
  maxPoints?: number;
}

/** What `series` returns. */
export interface SeriesResult {
  readonly key: string;
  readonly kind: SeriesKind;
  readonly rank: number;
  /** Points in x order: every point, or per bucket its min, max, last (and first NaN). */
  readonly points: SeriesPoint[];
  /**
   * Pass back as `after` to get only newer points. A step for scalars, an arrival sequence number
   * for streams and system metrics; `null` when there is nothing yet.
   */
  readonly cursor: number | null;
  /** How many points the range held before downsampling. */
  readonly total: number;
  readonly downsampled: boolean;
}

/** Options of `seriesColumns`: the next points of one series past a cursor, every one, as columns. */
export interface SeriesColumnsOptions {
  /** `scalar` (default), `stream` or `system`. */
  kind?: SeriesKind;
  /** Which rank's series; default: the global one (-1) if present, else the lowest rank. */
  rank?: number;
  /** A cursor from `series` or `seriesColumns`: only points after it. */
  after?: number;
  /** At most this many points (default 65,536): the first ones past `after`, in position order. */
  limit?: number;
}

/**
 * What `seriesColumns` returns: points in position order (steps for scalars, arrival for streams
 * and system metrics) as float64 columns, and the cursor of the last one (`after` as given, or
 * null, when there are none). Fewer than `limit` points: nothing more is stored yet.
 */
export interface SeriesColumnsResult {
  readonly steps: Float64Array;
  readonly walls: Float64Array;
  readonly values: Float64Array;
  readonly cursor: number | null;
}

/** The last point of a scalar key (`lastValues`). */
export interface LastValue {
  readonly key: string;
  /** The line it comes from: `GLOBAL_RANK` when the key has a global line, else its lowest rank. */
  readonly rank: number;
  readonly step: number;
  readonly value: number;
}

/** Options of `samples` and `histograms`. */
export interface RecordsOptions {
  /** Only this rank's entries (default: all ranks). */
  rank?: number;
  /** A cursor (`seq`) from an earlier call: only newer entries. */
  after?: number;
  /** At most this many entries, the newest (default 100). */
  limit?: number;
}

/** The sample records of one key at one flush. */
export interface SampleEntry {
  readonly seq: number;
  readonly key: string;
  readonly rank: number;
  readonly step: number;
  readonly wall: number;
  readonly records: SampleRecord[];
}

/** The histogram of one key at one flush. */
export interface HistogramEntry {
  readonly seq: number;
  readonly key: string;
  readonly rank: number;
  readonly step: number;
  readonly wall: number;
  readonly histogram: HistogramData;
}
