/**
 * Who a rank is: the one contract the transport, the controller, the stream, the run directory and
 * the backends all read, so it lives here, below all of them.
 */

/** Who a rank is. */
export interface RankIdentity {
  /** Global rank number (0 for the controller and single-process jobs). */
  readonly rank: number;
  /** Short stable name: `{processName}_{replicaId}_r{localRank}` for spawned ranks. */
  readonly rankName: string;
  /** The process (actor) name, e.g. `Controller` or `Trainer`. */
  readonly processName: string;
  /** Rank within its replica, and ranks per replica (for stream lines like `[0] [Trainer-0/2]`). */
  readonly localRank: number;
  readonly localWorldSize: number;
}

/** The process name of the controller (and of a single-process job) when none is given. */
export const DEFAULT_PROCESS_NAME = "Controller";

/** Name shown by global backends as the source of their metrics (Forge's). */
export const GLOBAL_DISPLAY_NAME = "GlobalReduce";
