/**
 * The controller's side of one remote rank: a `RankHandle` whose requests travel as protocol
 * messages over some carrier (a worker's MessagePort, a child's IPC channel, NATS).
 *
 * Every request gets an id and a deadline. A reply is matched to its request by id. A flush reply
 * whose request already timed out (a late answer: the rank was slow, or the network was down) is
 * never logged at the step it answered, and never dropped either: the rank took those values out
 * of its collector, so they are carried into this rank's next flush that arrives in time (states
 * merge exactly), and counted as `late`. Each reply is used exactly once. When the carrier closes
 * (the rank exited), every pending request fails at once instead of waiting for its deadline.
 */
import type { RankIdentity } from "../../core/rank-identity.js";
import { describeError, reportError, warn } from "../../core/diagnostics.js";
import { mergeRankKeyStates } from "../../controller/reduce-states.js";
import { mergeTracerTimings, type RankTiming } from "../../core/step-timing.js";
import type { OffCycleLog, RankHandle, RankInit, RankSnapshot } from "../protocol/types.js";
import { encodeProtocolMessage, reportIgnored, type ControllerRequest, type RankReply } from "../protocol/messages.js";

/** Default deadline of requests other than flush and shutdown (start, call, init). */
export const DEFAULT_REQUEST_DEADLINE_MS = 30_000;

/** How a request leaves the controller. `flushId` lets NATS send one flush to every rank at once. */
export interface RankCarrier {
  /** Human-readable description for messages, e.g. `child process 1234`. */
  readonly description: string;
  /** Send one encoded request to this rank. May throw if the carrier is already closed. */
  post(text: string, request: ControllerRequest): void;
  /**
   * Optional scatter-gather: instead of posting a flush to this rank, return the id of a flush
   * broadcast to every rank at `step` (sent once per step), whose replies arrive through `receive`.
   */
  broadcastFlush?(step: number): number;
  /**
   * Set when the carrier ends with the rank (a worker, a child's IPC channel): after answering
   * shutdown the rank exits, and the handle waits for that before killing it.
   */
  readonly closesWithRank: boolean;
  /** Force the rank to stop (kill the process, terminate the worker). */
  terminate?(): Promise<void> | void;
}

/** An error for a request that got no answer by its deadline. */
export class RankDeadlineError extends Error {
  override name = "RankDeadlineError";
}

/** An error for a request whose rank went away. */
export class RankClosedError extends Error {
  override name = "RankClosedError";
}

interface Pending {
  readonly request: ControllerRequest;
  readonly resolve: (reply: RankReply & { ok: true }) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

let lastRequestId = 0;

/** At most this many off-cycle logs are carried per rank; older ones are dropped and counted. */
const MAX_CARRIED_OFF_CYCLE = 1000;

/**
 * One snapshot holding both `earlier`'s values and `later`'s (exact: accumulator states merge), at
 * `later`'s step. Used for flush answers that arrived after their deadline: they join the next one.
 */
export function carrySnapshot(earlier: RankSnapshot | null, later: RankSnapshot): RankSnapshot {
  if (earlier === null) return later;
  let offCycle: OffCycleLog[] = [...(earlier.offCycle ?? []), ...(later.offCycle ?? [])];
  if (offCycle.length > MAX_CARRIED_OFF_CYCLE) {
    const dropped = offCycle.length - MAX_CARRIED_OFF_CYCLE;
    offCycle = offCycle.slice(dropped);
    reportError("rank.offCycleFull", `rank ${later.rankName}: ${dropped} off-cycle logs (system monitor) carried over late flushes exceeded ${MAX_CARRIED_OFF_CYCLE}; the oldest are dropped and counted`);
  }
  return {
    rankName: later.rankName,
    step: later.step,
    states: mergeRankKeyStates(
      [
        { rankName: earlier.rankName, states: earlier.states },
        { rankName: later.rankName, states: later.states },
      ],
      later.step,
    ),
    droppedKeyRecords: Math.max(earlier.droppedKeyRecords, later.droppedKeyRecords),
    ...(offCycle.length > 0 ? { offCycle } : {}),
    ...carriedTiming(earlier.timing, later.timing),
  };
}

/** The timings of a late answer and the next one together (their sums add), as a snapshot field. */
function carriedTiming(earlier: RankTiming | undefined, later: RankTiming | undefined): { timing?: RankTiming } {
  if (earlier === undefined) return later === undefined ? {} : { timing: later };
  if (later === undefined) return { timing: earlier };
  return { timing: { ...later, tracers: mergeTracerTimings(earlier.tracers, later.tracers) } };
}

/** A process-wide unique request id (NATS flushes share one id across ranks). */
export function nextRequestId(): number {
  lastRequestId = lastRequestId >= Number.MAX_SAFE_INTEGER ? 1 : lastRequestId + 1;
  return lastRequestId;
}

/** A rank reached through a carrier. */
export class RemoteRankHandle implements RankHandle {
  private readonly pending = new Map<number, Pending>();
  private closedReason: string | null = null;
  private readonly closeListeners: Array<(reason: string) => void> = [];
  /** Names of the functions the rank module exports (after `start`). */
  exports: readonly string[] = [];
  /** Set once `shutdown()` was called: the rank's exit is then expected, not a fault. */
  shutdownRequested = false;
  /** Flush answers that came after their deadline, merged, waiting for the next flush in time. */
  private carried: RankSnapshot | null = null;
  /** The init this rank last accepted (a rank admitted again is not restarted for the same one). */
  private initialised: RankInit | null = null;
  /** The highest flush-answer number (`seq`) seen from this rank, and the recent ones seen. */
  private lastSeq: number | null = null;
  private readonly seenSeqs = new Set<number>();

  constructor(
    readonly identity: RankIdentity,
    readonly runId: string,
    private readonly carrier: RankCarrier,
  ) {}

  get rankName(): string {
    return this.identity.rankName;
  }

  /** Why the rank went away, or null while it is connected. */
  get closed(): string | null {
    return this.closedReason;
  }

  get description(): string {
    return this.carrier.description;
  }

  async init(message: RankInit): Promise<void> {
    if (message === this.initialised) return;
    await this.request({ t: "init", id: nextRequestId(), init: message }, DEFAULT_REQUEST_DEADLINE_MS);
    this.initialised = message;
  }

  /** Values of this rank that arrived too late for their flush, still waiting for the next one. */
  get carriedStates(): number {
    return this.carried?.states.length ?? 0;
  }

  /** Keep a flush answer that came too late; it is merged into this rank's next flush in time. */
  carry(snapshot: RankSnapshot): void {
    this.noteSeq(snapshot);
    this.carried = carrySnapshot(this.carried, snapshot);
  }

  /**
   * Note a flush answer's number. Carriers deliver one rank's messages in order, so a gap means
   * answers were lost in transit (e.g. inside a NATS server that died): ask the rank for them again
   * (it keeps its last few); one it no longer has is reported and counted as lost.
   */
  private noteSeq(snapshot: RankSnapshot): void {
    const seq = snapshot.seq;
    if (seq === undefined) return;
    this.seenSeqs.add(seq);
    if (this.seenSeqs.size > 256) {
      const oldest = this.seenSeqs.values().next();
      if (oldest.done !== true) this.seenSeqs.delete(oldest.value);
    }
    if (this.lastSeq !== null && seq > this.lastSeq + 1) {
      for (let lost = this.lastSeq + 1; lost < seq; lost++) void this.recover(lost);
    }
    if (this.lastSeq === null || seq > this.lastSeq) this.lastSeq = seq;
  }

  private async recover(seq: number): Promise<void> {
    try {
      const reply = await this.request({ t: "resend", id: nextRequestId(), seq }, DEFAULT_REQUEST_DEADLINE_MS);
      const snapshot = reply.snapshot;
      if (snapshot === undefined || snapshot.seq !== seq || snapshot.rankName !== this.rankName) throw new Error("the rank answered without that flush answer");
      // Seen meanwhile (it was not lost after all): never twice.
      if (this.seenSeqs.has(seq)) return;
      warn(`transport.resent:${this.rankName}`, `rank ${this.rankName}: its answer to flush(${snapshot.step}) was lost in transit; it sent it again, and its values go into its next flush`);
      this.carried = carrySnapshot(this.carried, snapshot);
      this.seenSeqs.add(seq);
    } catch (error) {
      if (this.seenSeqs.has(seq)) return;
      reportError(`transport.lostAnswer:${this.rankName}`, `rank ${this.rankName}: flush answer ${seq} was lost in transit and could not be sent again (${describeError(error)}); its values are not logged`);
    }
  }

  async flush(step: number, deadlineMs = DEFAULT_REQUEST_DEADLINE_MS): Promise<RankSnapshot> {
    const id = this.carrier.broadcastFlush?.(step);
    const request: ControllerRequest = { t: "flush", id: id ?? nextRequestId(), step };
    const reply = await this.request(request, deadlineMs, id !== undefined);
    if (reply.snapshot === undefined || reply.snapshot.step !== step || reply.snapshot.rankName !== this.rankName) {
      throw new Error(`rank ${this.rankName} answered flush(${step}) without its states for that step`);
    }
    const carried = this.carried;
    this.carried = null;
    return carrySnapshot(carried, reply.snapshot);
  }

  /** Ask the rank to finish its backends and exit; kill it if it has not by the deadline. */
  async shutdown(deadlineMs = 5000): Promise<void> {
    this.shutdownRequested = true;
    if (this.closedReason !== null) return;
    const exited = new Promise<void>((resolve) => this.onClose(() => resolve()));
    const started = Date.now();
    try {
      await this.request({ t: "shutdown", id: nextRequestId() }, deadlineMs);
      // The rank exits on its own after answering; give it what is left of the deadline.
      if (this.carrier.closesWithRank) await waitAtMost(exited, Math.max(0, deadlineMs - (Date.now() - started)));
    } catch {
      // Dead or stuck: it is killed below either way.
    }
    if (this.closedReason === null) await this.carrier.terminate?.();
    this.close("shut down");
  }

  /** Import the rank module in the rank; resolves with the names of its exported functions. */
  async start(module: string, deadlineMs = DEFAULT_REQUEST_DEADLINE_MS): Promise<readonly string[]> {
    const reply = await this.request({ t: "start", id: nextRequestId(), module }, deadlineMs);
    this.exports = Array.isArray(reply.result) ? reply.result.filter((name): name is string => typeof name === "string") : [];
    return this.exports;
  }

  /** Call a function the rank module exports, with JSON-serialisable arguments; resolves with its result. */
  async call(fn: string, args: readonly unknown[] = [], deadlineMs = DEFAULT_REQUEST_DEADLINE_MS): Promise<unknown> {
    const reply = await this.request({ t: "call", id: nextRequestId(), fn, args }, deadlineMs);
    return reply.result;
  }

  /** Ask the rank to write `marker` as a line on its stdout (so its output can be awaited in order). */
  async sync(marker: string, deadlineMs = DEFAULT_REQUEST_DEADLINE_MS): Promise<void> {
    await this.request({ t: "sync", id: nextRequestId(), marker }, deadlineMs);
  }

  /** A reply arrived from this rank (already validated). */
  receive(reply: RankReply): void {
    const pending = this.pending.get(reply.id);
    if (reply.ok && reply.snapshot !== undefined && reply.snapshot.rankName === this.rankName && pending?.request.t !== "resend") this.noteSeq(reply.snapshot);
    if (pending === undefined) {
      if (reply.ok && reply.snapshot !== undefined && reply.snapshot.rankName === this.rankName) {
        this.carried = carrySnapshot(this.carried, reply.snapshot);
        reportIgnored("late", `rank ${this.rankName} answered flush(${reply.snapshot.step}) after the flush deadline; its values are carried into its next flush`);
      } else {
        reportIgnored("late", `rank ${this.rankName} answered request ${reply.id} after its deadline`);
      }
      return;
    }
    this.pending.delete(reply.id);
    clearTimeout(pending.timer);
    if (reply.ok) pending.resolve(reply);
    else pending.reject(new Error(`rank ${this.rankName}: ${reply.error}`));
  }

  /** The carrier is gone (the rank exited or disconnected): fail every pending request now. */
  close(reason: string): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      this.pending.delete(id);
      pending.reject(new RankClosedError(`rank ${this.rankName} ${reason}`));
    }
    for (const listener of this.closeListeners.splice(0)) listener(reason);
  }

  /** Be told once when the rank goes away. */
  onClose(listener: (reason: string) => void): void {
    if (this.closedReason !== null) listener(this.closedReason);
    else this.closeListeners.push(listener);
  }

  private request(request: ControllerRequest, deadlineMs: number, broadcast = false): Promise<RankReply & { ok: true }> {
    if (this.closedReason !== null) return Promise.reject(new RankClosedError(`rank ${this.rankName} ${this.closedReason}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(request.id);
        reject(new RankDeadlineError(`rank ${this.rankName} did not answer "${request.t}" within ${deadlineMs} ms`));
      }, deadlineMs);
      this.pending.set(request.id, { request, resolve, reject, timer });
      if (broadcast) return;
      try {
        this.carrier.post(encodeProtocolMessage(this.runId, request), request);
      } catch (error) {
        this.pending.delete(request.id);
        clearTimeout(timer);
        reject(new RankClosedError(`rank ${this.rankName}: could not send "${request.t}" over ${this.carrier.description}: ${String(error)}`));
      }
    });
  }
}

/**
 * Wait for `promise` at most `ms`; resolves with undefined at the deadline. The timer is cleared
 * as soon as the promise settles or `signal` aborts (then only `promise` can settle the wait), so
 * a wait nobody needs never keeps the process alive.
 */
export function waitAtMost<T>(promise: Promise<T>, ms: number, signal?: AbortSignal): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
    signal?.addEventListener("abort", () => clearTimeout(timer), { once: true });
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
