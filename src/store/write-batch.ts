/**
 * What a store writer is given (`writer.ts`): the batch one transaction stores — scalar, stream and
 * system points, samples, histograms, hyperparameters, alert events, per-rank timings, lost ranks
 * and the lines they use — and the writer's options and end status. The store backend's writer
 * thread receives these from its channel.
 */
import type { AlertEvent } from "../core/alert.js";
import type { HistogramData, SampleRecord } from "../core/reduce.js";
import type { PointColumns } from "./columns.js";

/** One reduced value of a scalar series. `rank` defaults to the writer's rank. */
export interface ScalarPoint {
  readonly key: string;
  readonly step: number;
  /** Milliseconds since the epoch. */
  readonly wall: number;
  readonly value: number;
  readonly reduce?: string;
  readonly rank?: number;
}

/** One raw value of a stream or a system metric, kept in arrival order. */
export interface RawPoint {
  readonly key: string;
  readonly step: number;
  readonly wall: number;
  readonly value: number;
  readonly rank?: number;
}

/** The records of one `Reduce.SAMPLE` key at a flush, to write (what the reading side gives back is `SampleEntry`). */
export interface SampleWrite {
  readonly key: string;
  readonly step: number;
  readonly wall: number;
  readonly records: readonly SampleRecord[];
  readonly rank?: number;
}

/** @deprecated Renamed `SampleWrite`: `SampleEntry` is what the reading side gives back. */
export type SamplesEntry = SampleWrite;

/** The buckets of one `Reduce.HISTOGRAM` key at a flush, to write (what the reading side gives back is `HistogramEntry`). */
export interface HistogramWrite {
  readonly key: string;
  readonly step: number;
  readonly wall: number;
  readonly histogram: HistogramData;
  readonly rank?: number;
}

/**
 * Every rank's timings at one flush (`RankTimingRecord` as the store keeps it): float32 columns
 * in the order of `ranks`, which is given when it changed since this writer's last such write.
 */
export interface RankTimingWrite {
  readonly step: number;
  readonly wall: number;
  /** `[rank, rankName, host]` per row; absent: the same ranks as the previous write. */
  readonly ranks?: readonly (readonly [number, string, string])[];
  /** The flush's straggler report, as JSON. */
  readonly report: string;
  readonly stepMs: Float32Array;
  readonly latenessMs: Float32Array;
  readonly waitMs: Float32Array;
}

/** A rank the controller lost (see `LostRank`), or one that came back (`back: true`: its latest loss gets `backStep`). */
export interface LostRankWrite {
  readonly rank: number;
  readonly rankName: string;
  readonly step: number | null;
  readonly wall: number;
  readonly reason: string;
  readonly back?: boolean;
}

/** Everything one write call stores, in one transaction. */
export interface WriteBatch {
  scalars?: readonly ScalarPoint[];
  /** Scalars in columns (what the backend sends its writer thread). */
  scalarColumns?: PointColumns;
  streams?: readonly RawPoint[];
  /** Stream values in columns. */
  streamColumns?: PointColumns;
  system?: readonly RawPoint[];
  samples?: readonly SampleWrite[];
  histograms?: readonly HistogramWrite[];
  /** Merged into the run's hyperparameters at every depth (`mergeHyperparams`: a name given again replaces the earlier value). */
  hyperparams?: Readonly<Record<string, unknown>>;
  /** Alert events, in the order they happened. */
  alerts?: readonly AlertEvent[];
  /** Per-rank timings of flushes (the controller's store only). */
  rankTiming?: readonly RankTimingWrite[];
  /** Ranks lost (or back) since the last batch. */
  lostRanks?: readonly LostRankWrite[];
  /** Lines this batch's records use besides the writer's own (a user worker's raw values), named in `ranks`. */
  lines?: readonly LineWrite[];
}

/** A line to name in `ranks` (see `lineOf`). */
export interface LineWrite {
  readonly line: number;
  readonly name: string;
  readonly host?: string;
}

/** Who writes and where. */
export interface StoreWriterOptions {
  readonly runDir: string;
  /** `controller` writes the `global_reduce` series (rank -1) and owns the run's status. */
  readonly role: "controller" | "rank";
  /**
   * This writer's line (docs/DESIGN.md, "Identity"): `GLOBAL_RANK` (−1) for the controller's
   * reduced series, `CONTROLLER_RANK` (−2) for the controller's own per-rank values, r for rank r.
   */
  readonly rank: number;
  readonly rankName: string;
  /** The host the writer runs on (named in `ranks`). */
  readonly host?: string;
  readonly experiment: string;
  readonly trial: string;
  /** Restart from this step: this writer's rows at or after it (from an earlier attempt) are removed. */
  readonly resumeStep?: number;
  /**
   * Whether this writer names its rank when it writes data, replacing a name registered before
   * (default true). The controller's own per-rank values have a line of their own (−2), so the
   * built-in backend always claims; kept for writers that share a line on purpose.
   */
  readonly claimRankName?: boolean;
}

/**
 * How a writer ends: `finished` after a clean shutdown, `failed` when the job reports a failure,
 * `crashed` when its process ends by a signal or an uncaught exception (src/core/lifecycle.ts).
 */
export type WriterStatus = "finished" | "failed" | "crashed";
