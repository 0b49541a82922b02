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
import { describeError, reportError, warn } from "../../core/diagnostics.js";
import type { RankHandle, RankInit, RankSnapshot } from "../../pipeline/rank-handle.js";
import {
  encodeProtocolMessage,
  reportIgnored,
  transportStats,
  type ControllerRequest,
  type RankReply,
} from "../protocol/messages.js";
import { KEPT_FLUSH_ANSWERS } from "../rank/rank-agent.js";
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

/**
 * Answers asked for again per gap in a rank's answer numbers, and at most at once: a rank keeps its
 * last `KEPT_FLUSH_ANSWERS`, so older ones of a gap cannot be had and are counted as lost at once
 * (a gap of 100,000 costs 16 requests, not 100,000).
 */
export const MAX_RESENDS = KEPT_FLUSH_ANSWERS;

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
  /** The highest flush-answer number (`seq`) seen from this rank, and the recent ones seen. */
  private lastSeq: number | null = null;
  private readonly seenSeqs = new Set<number>();
  /** Answer numbers being asked for again (`resend`), at most `MAX_RESENDS`. */
  private readonly recovering = new Set<number>();
  /** Ids of flush and resend requests that passed their deadline: a late answer is carried once, for one of these only. */
  private readonly expired = new Set<number>();
  /** Answers this controller logged (acknowledged), the most recent `MAX_REMEMBERED_SEQS`. */
  private readonly loggedSeqs = new Set<number>();

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
    // An orphan's merged answers (NATS, before registering) are all taken: none is asked for again.
    for (const seq of answerSeqs(snapshot)) remember(this.seenSeqs, seq);
    this.carried = carrySnapshot(this.carried, snapshot);
  }

  /** The controller logged this answer (a `flush` result): tell the rank, over a carrier that can (NATS). */
  acknowledge(snapshot: RankSnapshot): void {
    const seqs = answerSeqs(snapshot);
    if (seqs.length === 0 || this.carrier.acknowledge === undefined) return;
    for (const seq of seqs) remember(this.loggedSeqs, seq);
    this.carrier.acknowledge(seqs);
  }

  /**
   * The rank (re)registered listing the answers no controller acknowledged (`register.unacked`).
   * Those this controller logged are acknowledged again (that ack was lost); those it took and has
   * not logged yet will be; the others were taken by an earlier controller of the run that died
   * before logging them: asked for again (`resend`) and carried into this rank's next flush.
   */
  recoverUnacked(seqs: readonly number[]): void {
    const again = seqs.filter((seq) => this.loggedSeqs.has(seq));
    if (again.length > 0) this.carrier.acknowledge?.(again);
    for (const seq of seqs) {
      if (this.seenSeqs.has(seq)) continue;
      remember(this.seenSeqs, seq);
      void this.takeUnacked(seq);
    }
  }

  private async takeUnacked(seq: number): Promise<void> {
    try {
      const reply = await this.request({ t: "resend", id: nextRequestId(), seq }, DEFAULT_REQUEST_DEADLINE_MS);
      const snapshot = reply.snapshot;
      if (snapshot === undefined || snapshot.seq !== seq || snapshot.rankName !== this.rankName)
        throw new Error("the rank answered without that flush answer");
      warn(
        `transport.recovered:${this.rankName}`,
        `rank ${this.rankName}: its answer to flush(${snapshot.step}) was taken by an earlier controller of this run that never logged it; it was sent again, and its values go into this rank's next flush`,
      );
      this.carried = carrySnapshot(this.carried, snapshot);
    } catch (error) {
      reportError(
        `transport.lostAnswer:${this.rankName}`,
        `rank ${this.rankName}: flush answer ${seq}, taken by an earlier controller that never logged it, could not be sent again (${describeError(error)}); its values are not logged`,
      );
    }
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
    if (this.lastSeq !== null && seq > this.lastSeq + 1) this.recoverGap(this.lastSeq + 1, seq);
    if (this.lastSeq === null || seq > this.lastSeq) this.lastSeq = seq;
  }

  /** Ask again for answers `from` … `to - 1`: the last `MAX_RESENDS` of them at most; the others are lost (counted). */
  private recoverGap(from: number, to: number): void {
    const first = Math.max(from, to - MAX_RESENDS);
    const asked: number[] = [];
    for (let seq = first; seq < to; seq++) {
      if (this.recovering.size >= MAX_RESENDS) break;
      if (this.recovering.has(seq)) continue;
      this.recovering.add(seq);
      asked.push(seq);
    }
    const lost = to - from - asked.length;
    if (lost > 0) {
      transportStats().lostAnswers += lost;
      reportError(
        `transport.lostAnswer:${this.rankName}`,
        `rank ${this.rankName}: ${lost} flush answer(s) between ${from} and ${to - 1} were lost in transit, beyond the last ${MAX_RESENDS} a rank keeps to send again; their values are not logged (counted in transportStats().lostAnswers)`,
      );
    }
    for (const seq of asked) void this.recover(seq).finally(() => this.recovering.delete(seq));
  }

  private async recover(seq: number): Promise<void> {
    try {
      const reply = await this.request({ t: "resend", id: nextRequestId(), seq }, DEFAULT_REQUEST_DEADLINE_MS);
      const snapshot = reply.snapshot;
      if (snapshot === undefined || snapshot.seq !== seq || snapshot.rankName !== this.rankName)
        throw new Error("the rank answered without that flush answer");
      // Seen meanwhile (it was not lost after all): never twice.
      if (this.seenSeqs.has(seq)) return;
      warn(
        `transport.resent:${this.rankName}`,
        `rank ${this.rankName}: its answer to flush(${snapshot.step}) was lost in transit; it sent it again, and its values go into its next flush`,
      );
      this.carried = carrySnapshot(this.carried, snapshot);
      this.seenSeqs.add(seq);
    } catch (error) {
      if (this.seenSeqs.has(seq)) return;
      transportStats().lostAnswers++;
      reportError(
        `transport.lostAnswer:${this.rankName}`,
        `rank ${this.rankName}: flush answer ${seq} was lost in transit and could not be sent again (${describeError(error)}); its values are not logged`,
      );
    }
  }

  async flush(step: number, deadlineMs = DEFAULT_REQUEST_DEADLINE_MS): Promise<RankSnapshot> {
    const id = this.carrier.broadcastFlush?.(step);
    const request: ControllerRequest = { t: "flush", id: id ?? nextRequestId(), step, ...this.carrier.flushFields?.() };
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
    if (snapshot?.seq !== undefined && pending?.request.t !== "resend" && this.seenSeqs.has(snapshot.seq)) {
      reportIgnored(
        "replayed",
        `rank ${this.rankName}'s flush answer ${snapshot.seq} arrived again; an answer is used once`,
      );
      return;
    }
    if (pending === undefined) {
      if (snapshot !== undefined && isHeldAnswer(snapshot)) return;
      if (!this.expired.delete(reply.id)) {
        reportIgnored(
          "replayed",
          `rank ${this.rankName} answered request ${reply.id}, which is not waiting for an answer (answered already, or never asked)`,
        );
        return;
      }
      if (snapshot !== undefined) {
        this.noteSeq(snapshot);
        this.carried = carrySnapshot(this.carried, snapshot);
        reportIgnored(
          "late",
          `rank ${this.rankName} answered flush(${snapshot.step}) after the flush deadline; its values are carried into its next flush`,
        );
      } else {
        reportIgnored("late", `rank ${this.rankName} answered request ${reply.id} after its deadline`);
      }
      return;
    }
    if (snapshot !== undefined && pending.request.t !== "resend") this.noteSeq(snapshot);
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
