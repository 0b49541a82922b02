/**
 * What the controller makes of its ranks' step timings at each flush (src/controller/stragglers.ts,
 * docs/stragglers.md): the ranks it names slow, the skew, the chronic ones. A contract every side
 * reads — the logger's `FlushResult.stragglers`, the alert rules, the backends (`logRankTiming`),
 * the store and the dashboard — so it lives here, with types only.
 */

/** What a rank is compared on: its step time, its answer's lateness, or the others' wait for it at marked barriers. */
export type StragglerMeasure = "step" | "lateness" | "wait";

/** The measures, in the order reports list them. */
export const STRAGGLER_MEASURES: readonly StragglerMeasure[] = ["step", "lateness", "wait"];

/** Who a rank is, as a report names it. */
export interface RankRef {
  /** The rank's number. */
  readonly rank: number;
  readonly rankName: string;
  /** The host it runs on. */
  readonly host: string;
}

/** A rank named slow at one flush. Times are ms per step of the analysed Tracer; null where unknown. */
export interface SlowRank extends RankRef {
  /** Its mean step time (the Tracer's `start()`…`stop()`). */
  readonly stepMs: number | null;
  /** How much later than the median rank its flush answer arrived (negative: earlier). */
  readonly latenessMs: number | null;
  /** Its own time at marked barriers (`tracer.barrier(name)`). */
  readonly waitMs: number | null;
  /** How much longer the median rank waited at the barriers than it did: the others' wait for it. */
  readonly causedWaitMs: number | null;
  /** The measures on which it stands out (at least one). */
  readonly by: readonly StragglerMeasure[];
  /** Its phase (`tracer.step(name)`) furthest above the median rank's, when it has phases. */
  readonly phase: { readonly name: string; readonly ms: number; readonly medianMs: number } | null;
  /** Slow in at least half of the chronic window's flushes, this one included. */
  readonly chronic: boolean;
}

/** A rank slow in at least half of the last `window` flushes (a chronic straggler, not a transient one). */
export interface ChronicRank extends RankRef {
  /** Flushes of the window in which it was named slow. */
  readonly slowFlushes: number;
  /** The window, in flushes. */
  readonly window: number;
}

/** The controller's straggler attribution at one flush. */
export interface StragglerReport {
  readonly step: number;
  /** Ranks compared (those whose answer carried step timings). */
  readonly ranks: number;
  /** The Tracer whose runs are the step (its prefix), null when no rank completed one. */
  readonly tracer: string | null;
  /** The median rank's step time, ms; null without step times. */
  readonly medianStepMs: number | null;
  /** Slowest step time / median step time; null without step times. */
  readonly skew: number | null;
  /** The median rank's time at marked barriers per step, ms; null without barriers. */
  readonly medianWaitMs: number | null;
  /** The ranks that stand out, slowest first (at most `topK` per measure). */
  readonly slowest: readonly SlowRank[];
  /** Every chronic straggler now (also those not among this flush's slowest). */
  readonly chronic: readonly ChronicRank[];
}

/**
 * Every compared rank's figures at one flush, in columns (row i is one rank), with the flush's
 * report: what a backend's `logRankTiming` receives (the store keeps it for the dashboard's Ranks
 * view). Times are ms; NaN where a rank has no such figure.
 */
export interface RankTimingRecord {
  readonly step: number;
  /** Milliseconds since the epoch, at flush. */
  readonly timestamp: number;
  readonly ranks: readonly number[];
  readonly rankNames: readonly string[];
  readonly hosts: readonly string[];
  /** Mean step time per rank. */
  readonly stepMs: Float64Array;
  /** Arrival of its answer minus the median rank's. */
  readonly latenessMs: Float64Array;
  /** Time at marked barriers per step. */
  readonly waitMs: Float64Array;
  readonly report: StragglerReport;
}
