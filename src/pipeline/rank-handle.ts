/**
 * The shapes the controller and its ranks exchange, whatever carries them: what a rank is sent at
 * init, what it answers a flush with, and the handle through which the controller asks it.
 * The pipeline's, below the transport that carries them and the controller that asks.
 */
import type { UncheckedBackendsConfig } from "../backends/options.js";
import type { UserAlertCall } from "../core/alert.js";
import type { KeyState } from "../core/key-state.js";
import type { MetricEntry } from "../core/collector.js";
import type { RankIdentity } from "../core/rank-identity.js";
import type { RankTiming, TimingColumns } from "../core/step-timing.js";
/** Where a run's files go and where it starts. */
export interface RunInfo {
  readonly runDir: string;
  readonly experiment: string;
  readonly trial: string;
  /** The step the run resumes from (0 for a fresh run). */
  readonly resumeStep: number;
}

/** What the controller sends a rank at `initBackends` (or when the rank registers late). */
export interface RankInit {
  /** Only the per-rank backends (`per_rank_reduce`, `per_rank_no_reduce`). */
  readonly backends: UncheckedBackendsConfig;
  /** Per backend name: what the controller-side instance handed to ranks (e.g. a shared run id). */
  readonly primaryMetadata: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  readonly run: RunInfo;
  /** The run's hyperparameters (`initBackends`' run config and version info), for the per-rank backends. */
  readonly hyperparams?: Readonly<Record<string, unknown>>;
}

/** A rank's answer to flush(step). */
export interface RankSnapshot {
  readonly rankName: string;
  /** The step this snapshot answers (a late answer is carried into the rank's next flush instead). */
  readonly step: number;
  /**
   * The rank's count of flush answers so far (1, 2, …), set by the carriers: a gap tells the
   * controller an answer was lost in transit, and it asks the rank to send that one again.
   */
  readonly seq?: number;
  readonly states: readonly KeyState[];
  /** Records dropped because their key was new past the key bound, since the rank started. */
  readonly droppedKeyRecords: number;
  /** Values logged on this rank since the last flush on axes of their own (see `OffCycleLog`). */
  readonly offCycle?: readonly OffCycleLog[];
  /** The user's `alert()` calls made in the rank's process since its last answer (src/alerts/user-alert.ts). */
  readonly alerts?: readonly UserAlertCall[];
  /** The rank's Tracer step timings since the last flush, for straggler attribution (absent when it traced nothing). */
  readonly timing?: RankTiming;
}

/**
 * A flush answer whose states merge with the other answers of a flush without a state object per
 * rank·key (one that came as a wire frame, its states still in the frame's columns).
 */
export interface MergeableSnapshot extends RankSnapshot {
  /**
   * Merge every answer of a flush (this one among them), in their order: exactly what
   * `mergeRankKeyStates` gives for their `states`, sorted by key. Undefined where it cannot (a key
   * recorded with two reductions): then merge the states, which reports the conflict by rank.
   */
  mergeAll(snapshots: readonly RankSnapshot[]): KeyState[] | undefined;
}

/** True for an answer that merges from its columns (`MergeableSnapshot`); a decoded JSON answer never is (JSON holds no function). */
export function isMergeableSnapshot(snapshot: RankSnapshot): snapshot is MergeableSnapshot {
  return "mergeAll" in snapshot && typeof snapshot.mergeAll === "function";
}

/**
 * Values a rank logged outside the flush cycle, on an axis of their own (the system monitor's
 * `system/step`). A rank has no global backends, so they ride along with the next flush's
 * snapshot and the controller logs them on their own axis, never at the training step.
 */
export interface OffCycleLog {
  readonly axis: string;
  /** The value on `axis`. */
  readonly step: number;
  /** Milliseconds since the epoch, when they were logged. */
  readonly timestamp: number;
  readonly states: readonly KeyState[];
}

/** How the controller reaches one rank, whatever carries the messages. */
export interface RankHandle {
  readonly rankName: string;
  /** The host the rank runs on, when the transport knows it (alerts name it). */
  readonly host?: string;
  /** Who the rank is, when the handle is one rank's (a host agent's answers for several). */
  readonly identity?: RankIdentity;
  init(message: RankInit): Promise<void>;
  /**
   * The rank's states at `step`. `deadlineMs` is how long the controller will wait: a remote
   * handle stops waiting then (and treats a later answer as late), so nothing piles up.
   */
  flush(step: number, deadlineMs?: number): Promise<RankSnapshot>;
  /** Stop the rank within `deadlineMs`; a remote rank that does not finish by then is killed. */
  shutdown(deadlineMs?: number): Promise<void>;
  /**
   * The controller logged this answer (a `flush` result) to its backends. Over a carrier whose
   * ranks outlive their controller (NATS), the rank is told, so it no longer offers the answer to
   * a later controller of the run (docs/lifecycle.md, "A controller restarted").
   */
  acknowledge?(snapshot: RankSnapshot): void;
}

/**
 * A handle that answers for several ranks at once: a host agent's (see src/transport/host and
 * docs/scale.md). The controller counts and names its ranks one by one.
 */
export interface RankGroupHandle extends RankHandle {
  /** The ranks this handle answers for, as last reported (named missing when it does not answer). */
  memberRanks(): readonly string[];
  /** The host of each rank of `memberRanks()`, in its order, when they are not all on `host` (a rack agent's). */
  memberHostList?(): readonly string[];
  /** A rack agent's handle: the rack's id (the ranks' hosts are in `memberHostList`). */
  readonly rack?: string | undefined;
  /** A rack agent's handle: the rack of each rank of `memberRanks()` (a rack below it in a deeper tree). */
  memberRackList?(): readonly string[] | undefined;
}

/** The answer of a `RankGroupHandle`: the merged states of its ranks, and which of them answered. */
export interface RankGroupSnapshot extends RankSnapshot {
  readonly group: {
    /** How many of its ranks answered in time. */
    readonly reporting: number;
    /** Its ranks that did not (named by the agent, by its own shorter deadline). */
    readonly missing: readonly string[];
    /** Its ranks' arrival at the agent and step timings, one row per rank that answered (docs/stragglers.md). */
    readonly timing?: TimingColumns;
  };
}

/**
 * Writes a flush answer straight from the collector's entries (see `RankRuntime.flushFrame`):
 * takes every entry with values, or throws having taken nothing.
 */
export type FrameWriter = (
  entries: readonly MetricEntry[],
  droppedKeyRecords: number,
  timing: RankTiming | undefined,
) => Uint8Array;

/** A flush answered as a wire frame (`RankRuntime.flushFrame`). */
export interface FramedFlush {
  readonly rankName: string;
  readonly step: number;
  readonly droppedKeyRecords: number;
  /** The rank's step timings, which the frame's header carries (see `RankSnapshot.timing`). */
  readonly timing?: RankTiming;
  /** The frame: the answer's bytes. */
  readonly bytes: Uint8Array;
}
