/**
 * `HostHandle`: the ranks of one host (or of one rack: docs/scale.md, "A deeper tree"), reached
 * through its agent, as the controller — or a rack agent serving hosts — sees them. It turns the
 * agent's frames into flush results, carries late answers into the next flush, takes each answer
 * once by number, and remembers which ranks' answers it took through which agent process.
 */
import { reportError, warn } from "../../core/diagnostics.js";
import type { KeyState } from "../../core/key-state.js";
import type { TimingColumns } from "../../core/step-timing.js";
import { mergeRankKeyStates } from "../../pipeline/reduce-states.js";
import type { UserAlertCall } from "../../core/alert.js";
import { newestAlerts } from "../../alerts/user-alert.js";
import type {
  OffCycleLog,
  RankGroupHandle,
  RankGroupSnapshot,
  RankInit,
  RankSnapshot,
} from "../../pipeline/rank-handle.js";
import { reportIgnored } from "../protocol/messages.js";
import {
  DEFAULT_REQUEST_DEADLINE_MS,
  nextRequestId,
  RankClosedError,
  RankDeadlineError,
} from "../controller/rank-carrier.js";
import { StateDecoder, type DecodedFrame } from "../wire/codec.js";
import { expandRuns, type HostStatesHeader, type RankAnswers } from "./messages.js";
import type { HostServing } from "./host-serving.js";
import { FramedHostSnapshot } from "./host-snapshot.js";

/** Answer numbers a host handle remembers per rank (a rank keeps at most 16 answers); flush requests that name a gone agent's ranks' answers to its replacement, at most. */
const KEPT_RANK_SEQS = 16;
const MAX_LOGGED_SENDS = 1000;

/** The ranks of one host, reached through its agent. */
export class HostHandle implements RankGroupHandle {
  readonly rankName: string;
  readonly decoder = new StateDecoder();
  private members: readonly string[] = [];
  /** A rack's answers: the host and the rack of each member rank (`HostStatesHeader.hosts`, `.racks`, expanded); empty for a host. */
  private memberHosts: readonly string[] = [];
  private memberRacks: readonly string[] = [];
  private membersVersion = -1;
  private readonly pending = new Map<
    number,
    { step: number; resolve: (s: RankGroupSnapshot) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
  >();
  private closedReason: string | null = null;
  /** States of frames that came too late, merged, waiting for the next flush in time. */
  private carried: KeyState[] | null = null;
  /** Ids of flushes that passed their deadline unanswered: a late frame is carried once, for one of these only. */
  private readonly expired = new Set<number>();
  private readonly carriedOffCycle: OffCycleLog[] = [];
  /** The user's `alert()` calls of late answers, for the next answer in time. */
  private carriedAlerts: UserAlertCall[] = [];
  /** Numbers (`seq`) of the agent's answers taken (the most recent): each is taken once. */
  private readonly seenSeqs = new Set<number>();
  /** The agent process those numbers are of (`HostStatesHeader.agent`). */
  private agent: string | undefined;
  /** Numbers of the answers carried, waiting for the next flush in time (acknowledged with it). */
  private carriedSeqs: number[] = [];
  /** The answer numbers each flush result holds, to acknowledge once it is logged. */
  private readonly resultSeqs = new WeakMap<RankSnapshot, readonly number[]>();
  /** The agent process that registered last for this host (a replacement's predecessor is gone). */
  private registeredAgent: string | undefined;
  /**
   * By rank, the last answers of the host's ranks this controller took, and through which agent:
   * those taken through an agent that is gone are named to its replacement (`hostFlush.logged`),
   * which tells the ranks, so that what they still keep is not taken twice.
   */
  private readonly tookRanks = new Map<string, { agent: string | undefined; p: number; s: number[]; sent: number }>();

  constructor(
    readonly hostId: string,
    private readonly server: HostServing,
  ) {
    this.rankName = `host:${hostId}`;
  }

  /** Its ranks run on this host (named by its agent's id). */
  get host(): string {
    return this.hostId;
  }

  memberRanks(): readonly string[] {
    return this.members;
  }

  /** The host of each rank of `memberRanks()`, in its order (all this host, unless this is a rack's handle). */
  memberHostList(): readonly string[] {
    return this.memberHosts.length === this.members.length ? this.memberHosts : this.members.map(() => this.hostId);
  }

  /** For a rack's handle, the rack of each rank of `memberRanks()`: the rack agent its host agent registered with. */
  memberRackList(): readonly string[] | undefined {
    return this.rack === undefined ? undefined : this.members.map((_, i) => this.memberRacks[i] ?? this.hostId);
  }

  /** The rack's id when this handle answers for a rack (its answers name each rank's host), not one host. */
  get rack(): string | undefined {
    return this.memberHosts.length > 0 ? this.hostId : undefined;
  }

  /** The agent process registered now for this host (its id), if it said. */
  get currentAgent(): string | undefined {
    return this.registeredAgent ?? this.agent;
  }

  /** @internal the agent's answer numbers a flush result of this handle holds. */
  answerSeqs(snapshot: RankSnapshot): readonly number[] {
    return this.resultSeqs.get(snapshot) ?? [];
  }

  async init(init: RankInit): Promise<void> {
    await this.server.control(this.hostId, { t: "hostInit", id: nextRequestId(), init }, DEFAULT_REQUEST_DEADLINE_MS);
  }

  flush(step: number, deadlineMs = DEFAULT_REQUEST_DEADLINE_MS): Promise<RankGroupSnapshot> {
    if (this.closedReason !== null)
      return Promise.reject(new RankClosedError(`host ${this.hostId} ${this.closedReason}`));
    const id = this.server.broadcastFlush(step, deadlineMs);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.expired.add(id);
        if (this.expired.size > 64) this.expired.delete(this.expired.values().next().value ?? id);
        this.server.missedFlush(this);
        reject(new RankDeadlineError(`host ${this.hostId} did not answer flush(${step}) within ${deadlineMs} ms`));
      }, deadlineMs);
      this.pending.set(id, { step, resolve, reject, timer });
    });
  }

  async shutdown(deadlineMs = 5000): Promise<void> {
    if (this.closedReason !== null) return;
    try {
      await this.server.control(this.hostId, { t: "hostShutdown", id: nextRequestId(), deadlineMs }, deadlineMs);
    } finally {
      this.close("shut down");
    }
  }

  /** The controller logged this flush result: the agent may forget the answers it holds (`hostAck`). */
  acknowledge(snapshot: RankSnapshot): void {
    const seqs = this.resultSeqs.get(snapshot);
    if (seqs !== undefined && seqs.length > 0 && this.closedReason === null)
      this.server.queueAck(this.hostId, seqs, this.agent);
  }

  /** Note an answer's number as taken; false when it was taken already (sent again before its ack arrived). */
  private take(header: HostStatesHeader): boolean {
    const seq = header.seq;
    if (seq === undefined) return true;
    this.noteAgent(header);
    if (this.seenSeqs.has(seq)) return false;
    this.seenSeqs.add(seq);
    if (this.seenSeqs.size > 256) this.seenSeqs.delete(this.seenSeqs.values().next().value ?? seq);
    return true;
  }

  /** Numbers of this agent's answers carried late into the next flush, not acknowledged yet. */
  get takenSeqs(): readonly number[] {
    return this.carriedSeqs;
  }

  /** @internal an agent process registered for this host: answers taken through any other are its predecessor's. */
  agentRegistered(agent: string | undefined): void {
    if (agent !== undefined) this.registeredAgent = agent;
  }

  /** Note the ranks' answers a taken host answer holds (`took`), and the agent it came through. */
  private noteTook(header: HostStatesHeader): void {
    if (header.took === undefined) return;
    for (const [rankName, { p, s }] of Object.entries(header.took)) {
      const known = this.tookRanks.get(rankName);
      const seqs = known !== undefined && known.p === p && known.agent === header.agent ? [...known.s, ...s] : [...s];
      this.tookRanks.set(rankName, { agent: header.agent, p, s: seqs.slice(-KEPT_RANK_SEQS), sent: 0 });
    }
  }

  /**
   * @internal The ranks' answers this controller took through an agent of this host other than the
   * one registered now (gone: its replacement must not take them again); undefined when none.
   * Named in every flush request until the current agent's answers name those ranks, at most
   * `MAX_LOGGED_SENDS` times (a rank that never joins the replacement).
   */
  predecessorAnswers(): RankAnswers | undefined {
    const current = this.registeredAgent ?? this.agent;
    let logged: Record<string, { p: number; s: readonly number[] }> | undefined;
    for (const [rankName, entry] of this.tookRanks) {
      if (entry.agent === current || current === undefined) continue;
      if (++entry.sent > MAX_LOGGED_SENDS) {
        this.tookRanks.delete(rankName);
        continue;
      }
      (logged ??= {})[rankName] = { p: entry.p, s: entry.s };
    }
    return logged;
  }

  /** A replacement agent numbers its answers from 1 again: the numbers taken are its predecessor's. */
  private noteAgent(header: HostStatesHeader): void {
    if (header.agent === this.agent) return;
    this.agent = header.agent;
    this.seenSeqs.clear();
  }

  /** Whether this answer's number was taken already (of the agent that sent it). */
  private taken(header: HostStatesHeader): boolean {
    this.noteAgent(header);
    return header.seq !== undefined && this.seenSeqs.has(header.seq);
  }

  /** The agent left or the controller closed: fail what is pending now. */
  close(reason: string): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(new RankClosedError(`host ${this.hostId} ${reason}`));
    }
  }

  /**
   * @internal a frame from this host's agent, already checked. Each answer is used once: a frame
   * for a flush that is not waiting is used only if that flush passed its deadline (carried, once);
   * any other (answered already, or never asked: a replay) is dropped and counted.
   */
  receive(data: Uint8Array, header: HostStatesHeader): void {
    if (header.carried === true) {
      this.receiveCarried(data, header);
      return;
    }
    const waiting = this.pending.get(header.id);
    const late = waiting === undefined && this.expired.delete(header.id);
    if (this.taken(header)) {
      // Sent again already (carried) and taken: its late original is not taken twice.
      if (!late)
        reportIgnored("replayed", `host ${this.hostId}'s answer ${header.seq} arrived again; an answer is used once`);
      this.decoder.decode(data);
      return;
    }
    if (waiting === undefined && !late) {
      reportIgnored(
        "replayed",
        `host ${this.hostId} answered flush ${header.id} (step ${header.step}), which is not waiting for an answer (answered already, or never asked)`,
      );
      return;
    }
    // Decoding absorbs the frame's key definitions even when its values come too late.
    const frame = this.decoder.decode(data);
    this.noteFrame(data.length, header, frame);
    const pending = this.pending.get(header.id);
    this.server.answered(this);
    this.take(header);
    this.noteTook(header);
    if (pending === undefined || pending.step !== header.step) {
      this.carryLate(header, this.decoder.toKeyStates(frame));
      return;
    }
    this.pending.delete(header.id);
    clearTimeout(pending.timer);
    const carried = this.carried;
    this.carried = null;
    const seqs = [...this.carriedSeqs.splice(0), ...(header.seq === undefined ? [] : [header.seq])];
    const offCycle = [...this.carriedOffCycle.splice(0), ...(header.offCycle ?? [])];
    const alerts = newestAlerts(this.carriedAlerts, header.alerts, `host ${this.hostId}'s answers`);
    this.carriedAlerts = [];
    const timing = this.timingOf(header);
    const group = { reporting: header.reporting, missing: header.missing, ...(timing === undefined ? {} : { timing }) };
    // Nothing carried (the steady state): the states stay in the frame's columns, merged from there.
    const result: RankGroupSnapshot =
      carried === null
        ? new FramedHostSnapshot(
            this.rankName,
            header.step,
            header.seq ?? 0,
            header.dropped,
            frame,
            group,
            offCycle,
            alerts,
          )
        : {
            rankName: this.rankName,
            step: header.step,
            states: mergeRankKeyStates(
              [
                { rankName: this.rankName, states: carried },
                { rankName: this.rankName, states: this.decoder.toKeyStates(frame) },
              ],
              header.step,
            ),
            droppedKeyRecords: header.dropped,
            ...(offCycle.length === 0 ? {} : { offCycle }),
            ...(alerts.length === 0 ? {} : { alerts }),
            group,
          };
    this.resultSeqs.set(result, seqs);
    pending.resolve(result);
  }

  /**
   * An earlier answer the agent sent again because the controller had not acknowledged it (lost
   * in transit, or taken but not logged yet): its key definitions are absorbed either way; its
   * values are taken once, by number, into this host's next flush (the one it came before).
   */
  private receiveCarried(data: Uint8Array, header: HostStatesHeader): void {
    const frame = this.decoder.decode(data);
    if (!this.take(header)) return;
    this.noteTook(header);
    this.noteFrame(data.length, header, frame);
    warn(
      `host.resent:${this.hostId}`,
      `host ${this.hostId}: its answer to flush(${header.step}) was never acknowledged (lost in transit); the agent sent it again with its next answer, and its values go into that flush`,
    );
    this.carryLate(header, this.decoder.toKeyStates(frame), false);
  }

  /** Count a decoded frame, take its rank list (or ask for it again), and report states lost with an earlier frame. */
  private noteFrame(bytes: number, header: HostStatesHeader, frame: DecodedFrame): void {
    const stats = this.server.stats;
    stats.frames++;
    stats.frameBytes += bytes;
    if (header.ranks !== undefined) {
      this.members = header.ranks;
      this.memberHosts = expandRuns(header.hosts);
      this.memberRacks = expandRuns(header.racks);
      this.membersVersion = header.mv;
    } else if (header.mv !== this.membersVersion) {
      this.server.requestResync(this.hostId);
    }
    if (frame.tableGap) {
      this.server.requestResync(this.hostId);
      stats.lostStates += frame.unknownKeys;
      reportError(
        `host.tableGap:${this.hostId}`,
        `host ${this.hostId}: flush(${header.step}) carried ${frame.unknownKeys} state(s) for keys whose definitions were lost with an earlier frame; they are not logged (counted in lostStates) and the host resends its key table`,
      );
    }
  }

  /**
   * A frame too late for its flush: carried into this host's next flush (exact merges make that
   * correct), as a rank's late answer is (RemoteRankHandle).
   */
  private carryLate(header: HostStatesHeader, states: KeyState[], late = true): void {
    const stats = this.server.stats;
    if (header.seq !== undefined) this.carriedSeqs.push(header.seq);
    if (late) {
      stats.lateFrames++;
      for (const s of states) stats.lateValues += s.state.count;
    }
    this.carried =
      this.carried === null
        ? states
        : mergeRankKeyStates(
            [
              { rankName: this.rankName, states: this.carried },
              { rankName: this.rankName, states },
            ],
            header.step,
          );
    if (header.offCycle !== undefined) this.carriedOffCycle.push(...header.offCycle);
    if (header.alerts !== undefined)
      this.carriedAlerts = newestAlerts(this.carriedAlerts, header.alerts, `host ${this.hostId}'s late answers`);
    if (late)
      reportIgnored(
        "late",
        `host ${this.hostId} answered flush(${header.step}) after the flush deadline; its values are carried into its next flush`,
      );
  }

  /**
   * The frame's step timings with the ranks' names (from the rank list this handle holds), or
   * undefined when it has none or its rows name a rank list this handle does not hold.
   */
  private timingOf(header: HostStatesHeader): TimingColumns | undefined {
    const t = header.timing;
    if (t === undefined || header.mv !== this.membersVersion) return undefined;
    const rankNames: string[] = [];
    const hosts: string[] = [];
    for (const row of t.rows) {
      const name = this.members[row];
      if (name === undefined) return undefined;
      rankNames.push(name);
      hosts.push(this.memberHosts[row] ?? this.hostId);
    }
    return {
      rankNames,
      ranks: t.ranks,
      hosts,
      arrivalMs: t.arrivalMs,
      tracers: t.tracers,
    };
  }
}
