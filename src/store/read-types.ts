/**
 * The types of the store's reading side, defined once: what `rankscope/store` returns, what the
 * dashboard server sends as JSON and what its web app reads (`src/ui/web` imports this file; it is
 * bundled separately, so this file imports types only and holds no code but constants).
 */
import type { AlertEvent } from "../core/alert.js";
import type { HistogramData, SampleRecord } from "../core/reduce.js";
import type { RankRef, StragglerReport } from "../core/straggler-report.js";

export type { AlertEvent };

/**
 * The rank column holds a series' *line* (docs/DESIGN.md, "Identity"): `GLOBAL_RANK` for values
 * reduced across every recorder (`global_reduce`), `CONTROLLER_RANK` for the controller's own
 * values, r ≥ 0 for rank r, and thread lines (below −2^24) for a user worker's raw values —
 * `lineOf`, `recorderOfLine` and `lineLabel` (exported by `rankscope/store`) compute and name them.
 */
export const GLOBAL_RANK = -1;
/** The line of the controller's own values (its `per_rank_*` backends): never rank 0's. */
export const CONTROLLER_RANK = -2;

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

/**
 * A run's status: `running` while any writer has not finished and is alive; `crashed` once the
 * controller's process is gone without finishing (or ended by a signal or an uncaught exception);
 * `finished` / `failed` when every writer ended (a rank's writer whose process died is then a lost
 * rank, named in `lostRanks`). How a reader tells a dead writer: docs/lifecycle.md.
 */
export type RunStatus = "running" | "finished" | "failed" | "crashed" | "unknown";

/**
 * A rank the run lost: its process or thread ended without being shut down (a crash, `kill -9`),
 * recorded by the controller; or a rank whose store writer's process is gone without finishing
 * (seen by the reader). A NATS rank that fell silent is lost until it answers again (`back…`).
 */
export interface LostRank {
  readonly rank: number;
  readonly rankName: string;
  /** The last step the controller flushed before it was lost; null when unknown (no flush yet, or seen only by the reader). */
  readonly step: number | null;
  /** When it was lost (milliseconds since the epoch). */
  readonly wall: number;
  /** What happened, e.g. `exited (killed by SIGKILL)`. */
  readonly reason: string;
  /** The step at which it came back (a silent NATS rank answering again), else null. */
  readonly backStep: number | null;
}

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
  /** Ranks the run lost, oldest first (absent where the store could not be read). */
  readonly lostRanks?: readonly LostRank[];
}

/** One key of a run. */
export interface KeyInfo {
  readonly key: string;
  readonly kind: KeyKind;
  /** The reduction that produced it (`mean`, `max`, …), when known. */
  readonly reduce: string | null;
  /**
   * Lines with data for it, in line order: `GLOBAL_RANK` (−1, the series reduced across ranks)
   * first, then ranks ascending, `CONTROLLER_RANK` (−2), then thread lines.
   */
  readonly ranks: readonly number[];
}

/** A line of the run (a rank, the controller, the global line, a worker thread's raw values) and who it is. */
export interface RankInfo {
  /** The line (the value of the `rank` fields and options). */
  readonly rank: number;
  readonly rankName: string;
  /** `global`, `controller` or `rank` (decoded from the line in a version-1 file). */
  readonly role: "global" | "controller" | "rank";
  /** 0, or the threadId of the user's worker whose raw values this line holds. */
  readonly thread: number;
  /** The host it was recorded on, when the writer said (null in a version-1 file). */
  readonly host: string | null;
  /** How people read it: `global`, `controller`, `rank 3`, `rank 3 · thread 7` (`lineLabel`). */
  readonly label: string;
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

/** What an index of many runs keeps of each: `runOverview`. */
export interface RunOverview {
  readonly summary: RunSummary;
  readonly hyperparams: Record<string, unknown>;
  readonly lastValues: LastValue[];
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

/** One alert event of a run (docs/alerts.md), with its position among the run's alert events. */
export interface AlertEntry extends AlertEvent {
  readonly seq: number;
}

/** Options of `alerts`. */
export interface AlertsOptions {
  /** Only events after this position (`seq` of an earlier answer). */
  readonly after?: number;
  /** At most this many, the newest (default 1000). */
  readonly limit?: number;
  /** The oldest `limit` after `after` instead of the newest (a reader paging forward, as the sync does). */
  readonly oldest?: boolean;
}

/** Options of `rankTiming`. */
export interface RankTimingOptions {
  /** Only flushes at steps after this one (exclusive). */
  after?: number;
  /** Only flushes at steps before this one (exclusive): with `after`, a window; alone, a page back. */
  before?: number;
  /** The newest this many flushes of the range (default 200, at most 2,000); the oldest with `oldest`. */
  maxFlushes?: number;
  /** Take the oldest flushes of the range instead of the newest (a reader that follows the run: sync). */
  oldest?: boolean;
}

/**
 * Per-rank timings of a run's flushes (the dashboard's Ranks view; docs/stragglers.md): rows are
 * ranks, columns flushes. Matrices are row-major (`value[row * steps.length + column]`), ms, NaN
 * where a rank has no figure at a flush.
 */
export interface RankTimingWindow {
  /** Every rank of the window, by rank number. */
  readonly ranks: RankRef[];
  /** The flushes, ascending. */
  readonly steps: number[];
  /** When they were flushed (ms since the epoch). */
  readonly walls: number[];
  /** Mean step time of the analysed Tracer. */
  readonly stepMs: number[];
  /** Arrival of the rank's answer minus the median rank's. */
  readonly latenessMs: number[];
  /** Time at marked barriers per step. */
  readonly waitMs: number[];
  /** Each flush's straggler report. */
  readonly reports: StragglerReport[];
}
