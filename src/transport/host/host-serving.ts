/**
 * The contract between a `HostHandle` and the serving end that made it (`HostServer`, the
 * controller's or a rack agent's): what the handle asks of it, and what it counts.
 */
import type { RankGroupHandle } from "../../pipeline/rank-handle.js";
import type { HostMessage } from "./messages.js";

/** A host as its serving end knows it. */
export interface ServedHost extends RankGroupHandle {
  readonly hostId: string;
}

/** What the host layer of this controller received (for benchmarks and health pages). */
export interface HostServerStats {
  frames: number;
  frameBytes: number;
  /** Frames that arrived after their flush's deadline: their states are carried into the host's next flush (never logged at the wrong step, never dropped). */
  lateFrames: number;
  /** Recorded values (summed state counts) in those late frames. */
  lateValues: number;
  /** States a frame carried for keys whose definition was lost with an earlier frame (not logged, counted; the host resends its table). */
  lostStates: number;
  /** Hosts found gone for good (missed `maxMissedFlushes` in a row), counted each time. */
  goneHosts: number;
}

/** What a handle asks of the serving end that made it (`HostServer`). */
export interface HostServing {
  readonly stats: HostServerStats;
  /** A flush request id for `step`: one broadcast per flush, whatever the number of hosts. */
  broadcastFlush(step: number, deadlineMs: number): number;
  /** A request to one agent, answered within `deadlineMs`. */
  control(hostId: string, message: HostMessage, deadlineMs: number): Promise<void>;
  /** The host's agent answered / did not answer a flush by its deadline. */
  answered(handle: ServedHost): void;
  missedFlush(handle: ServedHost): void;
  /** These answers of the host's agent were logged: tell it. */
  queueAck(hostId: string, seqs: readonly number[], agent: string | undefined): void;
  /** The next flush asks this host to resend its key table and rank list. */
  requestResync(hostId: string): void;
}
