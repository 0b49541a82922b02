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
 * The carrier contract and request ids are `rank-carrier.ts`; the merging of carried answers
 * `carried-answers.ts`.
 */
import type { RankIdentity } from "../../core/rank-identity.js";
import { warn } from "../../core/diagnostics.js";
import type { RankHandle, RankInit, RankSnapshot } from "../../pipeline/rank-handle.js";
import {
  encodeProtocolMessage,
  MAX_ACKED_PER_RANK,
  reportIgnored,
  type ControllerRequest,
  type RankReply,
} from "../protocol/messages.js";
import { answerSeqs, carrySnapshot, isHeldAnswer, remember } from "./carried-answers.js";
import {
  DEFAULT_REQUEST_DEADLINE_MS,
  nextRequestId,
  RankClosedError,
  RankDeadlineError,
  type RankCarrier,
} from "./rank-carrier.js";

interface Pending {
  readonly request: ControllerRequest;
  readonly resolve: (reply: RankReply & { ok: true }) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** Requests whose deadline passed that a late answer may still be carried for (the most recent). */
const REMEMBERED_EXPIRED = 64;

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
  /** The flush-answer numbers (`seq`) taken from this rank (the most recent): each is taken once. */
  private readonly seenSeqs = new Set<number>();
  /** Those acknowledged (the most recent): one the rank sends again had its ack lost, and is acknowledged again. */
  private readonly ackedSeqs = new Set<number>();
  /** Ids of flush and resend requests that passed their deadline: a late answer is carried once, for one of these only. */
  private readonly expired = new Set<number>();

  constructor(
    readonly identity: RankIdentity,
    readonly runId: string,
    private readonly carrier: RankCarrier,
  ) {}

  get rankName(): string {
    return this.identity.rankName;
  }

  get host(): string | undefined {
    return this.carrier.host;
  }

  /** The rank's process id, when its carrier knows it (NATS): its answer numbers are that process's. */
  get pid(): number | undefined {
    return this.carrier.pid;
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
    // An orphan's merged answers (NATS, before registering) are all taken: none is taken again.
    for (const seq of answerSeqs(snapshot)) remember(this.seenSeqs, seq);
    this.carried = carrySnapshot(this.carried, snapshot);
  }

  /**
   * The receiver took this answer (a `flush` result: logged by the controller, or kept in its host
   * answer by a host agent): tell the rank, which then stops sending it again (`KeptAnswers`). Over
   * NATS one `ack` message per flush for every rank (`carrier.acknowledge`); over a worker's port or
   * IPC an `ack` message to this rank.
   */
  acknowledge(snapshot: RankSnapshot): void {
    this.acknowledgeSeqs(answerSeqs(snapshot));
  }

  /** `acknowledge` by answer numbers (a host agent's, once the controller logged the answer holding them). */
  acknowledgeSeqs(seqs: readonly number[]): void {
    for (const seq of seqs) remember(this.ackedSeqs, seq);
    this.sendAck(seqs);
  }

  /**
   * These answers of the rank were taken elsewhere (a host agent's predecessor handed them to the
   * controller, which logged them): if the rank sends them again, they are not taken twice.
   */
  markTaken(seqs: readonly number[]): void {
    for (const seq of seqs) remember(this.seenSeqs, seq);
  }

  private sendAck(seqs: readonly number[]): void {
    if (seqs.length === 0 || this.closedReason !== null) return;
    if (this.carrier.acknowledge !== undefined) {
      this.carrier.acknowledge(seqs);
      return;
    }
    try {
      this.carrier.post(encodeProtocolMessage(this.runId, { t: "ack", acks: { [this.rankName]: seqs } }));
    } catch {
      // The rank is gone: nothing to tell (it sends them again if it is only slow).
    }
  }

  /**
   * An earlier answer the rank sent again because it had not seen it acknowledged (`reply.carried`):
   * taken once, by its number, into this rank's next flush result (the one it came before).
   */
  private takeCarried(snapshot: RankSnapshot): void {
    const seq = snapshot.seq;
    if (seq === undefined) return;
    remember(this.seenSeqs, seq);
    warn(
      `transport.resent:${this.rankName}`,
      `rank ${this.rankName}: its answer to flush(${snapshot.step}) was never acknowledged (lost in transit, or taken by an earlier controller of this run that never logged it); the rank sent it again with its next answer, and its values go into that flush`,
    );
    this.carried = carrySnapshot(this.carried, snapshot);
  }

  /** Numbers of the answers taken and not acknowledged yet (carried into the next flush): the rank need not send them again. */
  get takenSeqs(): readonly number[] {
    return this.carried === null ? [] : answerSeqs(this.carried);
  }

  async flush(step: number, deadlineMs = DEFAULT_REQUEST_DEADLINE_MS): Promise<RankSnapshot> {
    const id = this.carrier.broadcastFlush?.(step);
    const taken = this.takenSeqs;
    const request: ControllerRequest = {
      t: "flush",
      id: id ?? nextRequestId(),
      step,
      ...this.carrier.flushFields?.(),
      ...(taken.length > 0 ? { taken: { [this.rankName]: taken.slice(-MAX_ACKED_PER_RANK) } } : {}),
    };
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
    if (this.closedReason !== null) return;
    // Once it is being killed the rank is gone: a terminate that takes long on a loaded machine
    // must not leave it counted as live when the caller's deadline returns.
    const killed = this.carrier.terminate?.();
    this.close("shut down");
    await killed;
  }

  /** Import the rank module in the rank; resolves with the names of its exported functions. */
  async start(module: string, deadlineMs = DEFAULT_REQUEST_DEADLINE_MS): Promise<readonly string[]> {
    const reply = await this.request({ t: "start", id: nextRequestId(), module }, deadlineMs);
    this.exports = Array.isArray(reply.result)
      ? reply.result.filter((name): name is string => typeof name === "string")
      : [];
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

  /**
   * A reply arrived from this rank (already validated). Each answer is used at most once: one whose
   * number was seen already is a replay, and one for a request that is not waiting is carried
   * only if that request passed its deadline (a late answer) — once.
   */
  receive(reply: RankReply): void {
    const pending = this.pending.get(reply.id);
    const snapshot =
      reply.ok && reply.snapshot !== undefined && reply.snapshot.rankName === this.rankName
        ? reply.snapshot
        : undefined;
    const carried = reply.ok && reply.carried === true;
    if (snapshot?.seq !== undefined && pending?.request.t !== "resend" && this.seenSeqs.has(snapshot.seq)) {
      // Sent again before its acknowledgement reached the rank, or late after it was sent again (taken already): quietly not twice.
      if (carried && this.ackedSeqs.has(snapshot.seq)) this.sendAck([snapshot.seq]);
      if (carried || this.expired.delete(reply.id)) return;
      reportIgnored(
        "replayed",
        `rank ${this.rankName}'s flush answer ${snapshot.seq} arrived again; an answer is used once`,
      );
      return;
    }
    if (carried) {
      if (snapshot !== undefined) this.takeCarried(snapshot);
      return;
    }
    if (pending === undefined) {
      this.receiveUnasked(reply, snapshot);
      return;
    }
    if (snapshot?.seq !== undefined) remember(this.seenSeqs, snapshot.seq);
    this.pending.delete(reply.id);
    clearTimeout(pending.timer);
    if (snapshot !== undefined && pending.request.t === "flush" && isHeldAnswer(snapshot)) {
      // Registering with this receiver (`RankAgent.holdFlushes`): its values stay in its collector
      // for its next flush, so this flush must not count it as answered (it is named missing).
      pending.reject(
        new Error(
          `rank ${this.rankName} is registering and answered flush(${snapshot.step}) without its values (they go into its next flush)`,
        ),
      );
      return;
    }
    if (reply.ok) pending.resolve(reply);
    else pending.reject(new Error(`rank ${this.rankName}: ${reply.error}`));
  }

  /**
   * A reply to a request that is not waiting: a flush answer carried once if that request passed
   * its deadline (a late answer), anything else counted and dropped.
   */
  private receiveUnasked(reply: RankReply, snapshot: RankSnapshot | undefined): void {
    if (snapshot !== undefined && isHeldAnswer(snapshot)) return;
    if (!this.expired.delete(reply.id)) {
      reportIgnored(
        "replayed",
        `rank ${this.rankName} answered request ${reply.id}, which is not waiting for an answer (answered already, or never asked)`,
      );
      return;
    }
    if (snapshot === undefined) {
      reportIgnored("late", `rank ${this.rankName} answered request ${reply.id} after its deadline`);
      return;
    }
    if (snapshot.seq !== undefined) remember(this.seenSeqs, snapshot.seq);
    this.carried = carrySnapshot(this.carried, snapshot);
    reportIgnored(
      "late",
      `rank ${this.rankName} answered flush(${snapshot.step}) after the flush deadline; its values are carried into its next flush`,
    );
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

  private rememberExpired(id: number): void {
    this.expired.add(id);
    if (this.expired.size > REMEMBERED_EXPIRED) {
      const oldest = this.expired.values().next();
      if (oldest.done !== true) this.expired.delete(oldest.value);
    }
  }

  private request(
    request: ControllerRequest,
    deadlineMs: number,
    broadcast = false,
  ): Promise<RankReply & { ok: true }> {
    if (this.closedReason !== null)
      return Promise.reject(new RankClosedError(`rank ${this.rankName} ${this.closedReason}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(request.id);
        if (request.t === "flush" || request.t === "resend") this.rememberExpired(request.id);
        reject(new RankDeadlineError(`rank ${this.rankName} did not answer "${request.t}" within ${deadlineMs} ms`));
      }, deadlineMs);
      this.pending.set(request.id, { request, resolve, reject, timer });
      if (broadcast) return;
      try {
        this.carrier.post(encodeProtocolMessage(this.runId, request), request);
      } catch (error) {
        this.pending.delete(request.id);
        clearTimeout(timer);
        reject(
          new RankClosedError(
            `rank ${this.rankName}: could not send "${request.t}" over ${this.carrier.description}: ${String(error)}`,
          ),
        );
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
