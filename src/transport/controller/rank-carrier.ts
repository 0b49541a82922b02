/**
 * How the controller's requests reach a remote rank: the carrier contract (a worker's MessagePort,
 * a child's IPC channel, NATS), the process-wide request ids replies are matched by, the default
 * deadline, and the errors a request ends in when no answer comes.
 */
import type { ControllerRequest } from "../protocol/messages.js";

/** Default deadline of requests other than flush and shutdown (start, call, init). */
export const DEFAULT_REQUEST_DEADLINE_MS = 30_000;

/** How a request leaves the controller. `flushId` lets NATS send one flush to every rank at once. */
export interface RankCarrier {
  /** Human-readable description for messages, e.g. `child process 1234`. */
  readonly description: string;
  /** Send one encoded request (or `ack`, without `request`) to this rank. May throw if the carrier is already closed. */
  post(text: string, request?: ControllerRequest): void;
  /**
   * Optional scatter-gather: instead of posting a flush to this rank, return the id of a flush
   * broadcast to every rank at `step` (sent once per step), whose replies arrive through `receive`.
   */
  broadcastFlush?(step: number): number;
  /**
   * Fields the next flush request carries: a carrier that reads wire frames (a worker's port, a
   * child's IPC) asks for them (`wire`), naming this rank in `resync` when it lost its key table.
   */
  flushFields?(): { readonly wire: number; readonly resync?: readonly string[] };
  /**
   * Set when the carrier ends with the rank (a worker, a child's IPC channel): after answering
   * shutdown the rank exits, and the handle waits for that before killing it.
   */
  readonly closesWithRank: boolean;
  /** The host the rank runs on, when known (a child or worker runs on this one; a NATS rank says at register). */
  readonly host?: string;
  /** The rank's process id, when known (a NATS rank says at register): its answer numbers are that process's. */
  readonly pid?: number;
  /** Force the rank to stop (kill the process, terminate the worker). */
  terminate?(): Promise<void> | void;
  /**
   * Tell the rank that its receiver took these answers of its (by `seq`), where the carrier has a
   * way of its own (NATS: one message per flush for every rank joined to the controller; a host
   * agent's next flush request); otherwise the handle posts an `ack` to the rank. See
   * `RankHandle.acknowledge`.
   */
  acknowledge?(seqs: readonly number[]): void;
}

/** An error for a request that got no answer by its deadline. */
export class RankDeadlineError extends Error {
  override name = "RankDeadlineError";
}

/** An error for a request whose rank went away. */
export class RankClosedError extends Error {
  override name = "RankClosedError";
}

let lastRequestId = 0;

/** A process-wide unique request id (NATS flushes share one id across ranks). */
export function nextRequestId(): number {
  lastRequestId = lastRequestId >= Number.MAX_SAFE_INTEGER ? 1 : lastRequestId + 1;
  return lastRequestId;
}
