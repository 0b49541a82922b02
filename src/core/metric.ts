/** What backends receive: reduced metrics, histograms, samples and raw stream records. */
import type { RecorderRole } from "./rank-identity.js";
import type { HistogramData, SampleRecord } from "./reduce.js";

/** How a backend sees the ranks (Forge's logging modes). */
export type LoggingMode = "global_reduce" | "per_rank_reduce" | "per_rank_no_reduce";

/** The valid logging modes, in the order error messages list them. */
export const LOGGING_MODES = [
  "global_reduce",
  "per_rank_reduce",
  "per_rank_no_reduce",
] as const satisfies readonly LoggingMode[];

/** One reduced scalar at a flush. */
export interface Metric {
  /** Full key, with the reduction's suffix when it has several outputs (`latency/p99`). */
  readonly key: string;
  readonly value: number;
  /** The reduction that produced it. */
  readonly reduce: string;
  readonly step: number;
  /** Milliseconds since the epoch, at flush. */
  readonly timestamp: number;
  /** The rank it belongs to, for per-rank modes; absent for `global_reduce`. */
  readonly rankName?: string;
  /**
   * Set when the metric has an x-axis of its own instead of the training step: the name of that
   * axis (e.g. `system/step` for the system monitor), whose value is `step`. Backends with one
   * global monotonic step (W&B) must plot it against this axis and must not advance their
   * training step for it.
   */
  readonly axis?: string;
}

/** The buckets of a `Reduce.HISTOGRAM` key at a flush. */
export interface HistogramMetric {
  readonly key: string;
  readonly step: number;
  readonly timestamp: number;
  readonly histogram: HistogramData;
  readonly rankName?: string;
  /** Set when the histogram has an x-axis of its own (see `Metric.axis`). */
  readonly axis?: string;
}

/** Records kept by `Reduce.SAMPLE` keys at a flush, by key. */
export type SampleBatch = Readonly<Record<string, readonly SampleRecord[]>>;

/** One raw value recorded by a rank, as `per_rank_no_reduce` backends receive it. */
export interface StreamRecord {
  readonly key: string;
  readonly value: number;
  /** The step it belongs to: the last flushed step + 1. */
  readonly step: number;
  /** Milliseconds since the epoch, when it was recorded. */
  readonly timestamp: number;
  /**
   * Who recorded it (docs/DESIGN.md, "Identity"): `role` `controller` for the controller's own
   * values (its `rank` is 0 but it is not rank 0), `rank` for a rank's; `rankName` the identity's
   * name; `thread` 0 for the identity's own thread, else the threadId of a user's worker thread.
   */
  readonly rank: number;
  readonly rankName: string;
  readonly role: RecorderRole;
  readonly thread: number;
}

/**
 * A rank the controller lost — its process or thread ended without being shut down (a crash,
 * `kill -9`), or a NATS rank fell silent — or, with `back`, one that answered again. Given to
 * backends that keep such events (`Backend.logRankLoss`: the store records them for the dashboard).
 */
export interface RankLoss {
  readonly rank: number;
  readonly rankName: string;
  /** The last step flushed before it was lost (with `back`: the step it answered again); null before the first flush. */
  readonly step: number | null;
  /** Milliseconds since the epoch. */
  readonly timestamp: number;
  /** What happened, e.g. `exited (killed by SIGKILL)`. */
  readonly reason: string;
  readonly back?: boolean;
}
