/**
 * The controller's side of host agents: `serveHostsOverNats` registers one `HostHandle` per host
 * with the `MetricLogger`. A flush is one broadcast to every agent; each answers with one binary
 * frame holding the exact merge of its ranks' states, so the controller decodes and merges
 * hosts × keys states, not ranks × keys. The logger counts a host's ranks one by one and names the
 * missing ones: those the agent named, or every rank of a host whose agent did not answer.
 */
import { nats } from "../protocol/nats-client.js";
import { describeError, reportError, warn } from "../../core/diagnostics.js";
import { defaultLogger, type RankController } from "../../pipeline/default-logger.js";
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
import { connectTo, unrefSocket, unrefWhileIdle } from "../controller/nats-connection.js";
import { resolveNatsAuth, type NatsAuthOptions } from "../protocol/nats-auth.js";
import { checkEnvelope, reportIgnored } from "../protocol/messages.js";
import { RunKey } from "../protocol/seal.js";
import { SealedNats, type OpenedMessage } from "../protocol/sealed-nats.js";
import {
  DEFAULT_REQUEST_DEADLINE_MS,
  nextRequestId,
  RankClosedError,
  RankDeadlineError,
} from "../controller/rank-carrier.js";
import { isWireFrame, StateDecoder, WireFormatError, type DecodedFrame } from "../wire/codec.js";
import {
  decodeHostMessage,
  encodeHostMessage,
  hostSubjects,
  validateHostStatesHeader,
  type HostMessage,
  type HostStatesHeader,
  type RankAnswers,
} from "./messages.js";

/** Options of `serveHostsOverNats`. */
export interface ServeHostsOverNatsOptions {
  /** The NATS server(s): one URL or several separated by commas (every node of a cluster); `user:password@` or `token@` carry credentials. */
  url: string;
  /** How the controller authenticates (each setting also from its `RANKSCOPE_NATS_*` variable; docs/security.md). */
  auth?: NatsAuthOptions;
  /** The controller (default `getOrCreateMetricLogger()`). */
  logger?: RankController;
  /** How long to try the first connection (default 5 s). */
  connectTimeoutMs?: number;
  /**
   * A host whose agent missed this many flushes in a row is gone for good: it is no longer asked
   * (nor its ranks expected or named missing), it is warned about by name and counted
   * (`HostServerStats.goneHosts`, `HostServer.goneHostIds`). It is asked again as soon as its
   * agent (or a replacement) registers or answers. Default 10.
   */
  maxMissedFlushes?: number;
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

/** Hosts one controller registers at most: a register beyond is refused and counted (`refused`). */
const MAX_HOSTS = 10_000;
/** Answer numbers a host handle remembers per rank (a rank keeps at most 16 answers). */
const KEPT_RANK_SEQS = 16;
/** Flush requests that name a gone agent's ranks' answers to its replacement, at most. */
const MAX_LOGGED_SENDS = 1000;

/** The ranks of one host, reached through its agent. */
export class HostHandle implements RankGroupHandle {
  readonly rankName: string;
  readonly decoder = new StateDecoder();
  private members: readonly string[] = [];
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
    private readonly server: HostServer,
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
    const states = this.decoder.toKeyStates(frame);
    this.server.answered(this);
    this.take(header);
    this.noteTook(header);
    if (pending === undefined || pending.step !== header.step) {
      this.carryLate(header, states);
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
    const result: RankGroupSnapshot = {
      rankName: this.rankName,
      step: header.step,
      states:
        carried === null
          ? states
          : mergeRankKeyStates(
              [
                { rankName: this.rankName, states: carried },
                { rankName: this.rankName, states },
              ],
              header.step,
            ),
      droppedKeyRecords: header.dropped,
      ...(offCycle.length === 0 ? {} : { offCycle }),
      ...(alerts.length === 0 ? {} : { alerts }),
      group: { reporting: header.reporting, missing: header.missing, ...(timing === undefined ? {} : { timing }) },
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
    for (const row of t.rows) {
      const name = this.members[row];
      if (name === undefined) return undefined;
      rankNames.push(name);
    }
    return {
      rankNames,
      ranks: t.ranks,
      hosts: rankNames.map(() => this.hostId),
      arrivalMs: t.arrivalMs,
      tracers: t.tracers,
    };
  }
}

/** The controller's end of the host layer. */
export class HostServer {
  private readonly hosts = new Map<string, HostHandle>();
  private readonly inbox: string;
  private currentFlush: { step: number; id: number } | null = null;
  private readonly resync = new Set<string>();
  private closing = false;
  /** Flushes missed in a row, by host; hosts gone for good (no longer asked). */
  private readonly missed = new Map<string, number>();
  private readonly gone = new Set<string>();
  readonly stats: HostServerStats = {
    frames: 0,
    frameBytes: 0,
    lateFrames: 0,
    lateValues: 0,
    lostStates: 0,
    goneHosts: 0,
  };

  /** @internal use `serveHostsOverNats` */
  constructor(
    readonly url: string,
    readonly runId: string,
    private readonly nc: SealedNats,
    private readonly logger: RankController,
    private readonly maxMissedFlushes = 10,
  ) {
    const s = hostSubjects(runId);
    this.inbox = nats.createInbox(`rankscope.${runId}.ctlh`);
    // Like the rank server's: the connection alone does not keep the controller alive (a job that
    // forgets shutdown() reaches beforeExit); flushes in flight have referenced deadline timers.
    if (!unrefWhileIdle(nc.nc))
      warn(
        "transport.nats.unref",
        "this NATS client version does not let rankscope unref its connection: a controller that forgets logger.shutdown() will not end by itself while hosts are served over NATS",
      );
    void (async () => {
      for await (const status of nc.nc.status()) if (status.type === "reconnect") unrefSocket(nc.nc);
    })();
    nc.subscribe(s.register, (msg) => void this.onRegister(msg));
    nc.subscribe(s.deregister, (msg) => this.onDeregister(msg));
    nc.subscribe(this.inbox, (msg) => this.onFrame(msg));
  }

  /** Ids of the hosts registered. */
  get hostIds(): string[] {
    return [...this.hosts.keys()];
  }

  /** Ids of the hosts gone for good (missed `maxMissedFlushes` flushes in a row; asked again once they register or answer). */
  get goneHostIds(): string[] {
    return [...this.gone];
  }

  /** Answers logged since the last `hostAck`, by host; sent as one message on the next microtask. */
  private pendingAcks: Map<string, number[]> | null = null;
  /** The agent process of each host those answers are of. */
  private readonly ackAgents = new Map<string, string>();

  /** @internal the controller logged these answers of a host's agent: one `hostAck` per flush tells every agent. */
  queueAck(hostId: string, seqs: readonly number[], agent: string | undefined): void {
    if (this.pendingAcks === null) {
      this.pendingAcks = new Map();
      queueMicrotask(() => this.sendAcks());
    }
    if (agent !== undefined) this.ackAgents.set(hostId, agent);
    const list = this.pendingAcks.get(hostId) ?? [];
    list.push(...seqs);
    this.pendingAcks.set(hostId, list);
  }

  private sendAcks(): void {
    const pending = this.pendingAcks;
    this.pendingAcks = null;
    const agents = Object.fromEntries(this.ackAgents);
    this.ackAgents.clear();
    if (pending === null || this.closing) return;
    try {
      this.nc.publish(
        hostSubjects(this.runId).flush,
        encodeHostMessage(this.runId, { t: "hostAck", acks: Object.fromEntries(pending), agents }),
      );
    } catch (error) {
      // Not a loss: the agents keep those answers and send them again; this controller takes each once.
      reportError(
        "host.ack",
        `the controller could not tell the host agents which answers it logged: ${describeError(error)}`,
      );
    }
  }

  /** @internal a host's agent did not answer a flush by its deadline. */
  missedFlush(handle: HostHandle): void {
    const missed = (this.missed.get(handle.hostId) ?? 0) + 1;
    this.missed.set(handle.hostId, missed);
    if (missed < this.maxMissedFlushes || this.gone.has(handle.hostId) || this.hosts.get(handle.hostId) !== handle)
      return;
    if (!this.logger.deregisterRank(handle.rankName, handle)) return;
    this.gone.add(handle.hostId);
    this.stats.goneHosts++;
    warn(
      `host.gone:${handle.hostId}`,
      `host ${handle.hostId} missed ${missed} flushes in a row: it is gone for good, no longer asked and its ranks (${handle.memberRanks().join(", ") || "none known"}) no longer expected; it is asked again once its agent registers or answers`,
    );
  }

  /** @internal a host's agent answered: a host gone for good is asked again. */
  answered(handle: HostHandle): void {
    this.missed.set(handle.hostId, 0);
    if (this.gone.has(handle.hostId)) void this.readmit(handle);
  }

  private async readmit(handle: HostHandle): Promise<void> {
    if (!this.gone.delete(handle.hostId)) return;
    this.missed.set(handle.hostId, 0);
    warn(`host.back:${handle.hostId}`, `host ${handle.hostId} is back: it is asked at flush again`);
    try {
      await this.logger.registerRank(handle);
    } catch (error) {
      reportError(
        `host.readmit:${handle.hostId}`,
        `host ${handle.hostId} answered again but could not be admitted again: ${describeError(error)}`,
      );
    }
  }

  /** The handle of a registered host. */
  host(hostId: string): HostHandle | undefined {
    return this.hosts.get(hostId);
  }

  /** Bytes this connection sent and received so far (NATS protocol included). */
  get connectionStats(): { inBytes: number; outBytes: number; inMsgs: number; outMsgs: number } {
    return this.nc.nc.stats();
  }

  /** @internal the next flush asks this host to resend its key table and rank list. */
  requestResync(hostId: string): void {
    this.resync.add(hostId);
  }

  /**
   * @internal One flush message per `MetricLogger.flush`, whatever the number of hosts: the first
   * handle asked publishes it, the others share its id (the logger asks them in one pass).
   */
  broadcastFlush(step: number, deadlineMs: number): number {
    if (this.currentFlush === null || this.currentFlush.step !== step) {
      const id = nextRequestId();
      this.currentFlush = { step, id };
      queueMicrotask(() => (this.currentFlush = null));
      const resync = [...this.resync];
      this.resync.clear();
      const taken = this.takenSeqs();
      const logged = this.loggedElsewhere();
      this.nc.publish(
        hostSubjects(this.runId).flush,
        encodeHostMessage(this.runId, {
          t: "hostFlush",
          id,
          step,
          deadlineMs,
          resync,
          ...(taken === undefined ? {} : { taken }),
          ...(logged === undefined ? {} : { logged }),
        }),
        this.inbox,
      );
    }
    return this.currentFlush.id;
  }

  /** By host, the answers its handle carries late and has not acknowledged (the agent keeps them, not sending them again); undefined when none. */
  private takenSeqs(): Record<string, readonly number[]> | undefined {
    let taken: Record<string, readonly number[]> | undefined;
    for (const [hostId, handle] of this.hosts) {
      const seqs = handle.takenSeqs;
      if (seqs.length > 0) (taken ??= {})[hostId] = seqs.slice(-64);
    }
    return taken;
  }

  /** By host, its ranks' answers taken through an agent that is gone (`HostHandle.predecessorAnswers`); undefined when none. */
  private loggedElsewhere(): Record<string, RankAnswers> | undefined {
    let logged: Record<string, RankAnswers> | undefined;
    for (const [hostId, handle] of this.hosts) {
      const answers = handle.predecessorAnswers();
      if (answers !== undefined) (logged ??= {})[hostId] = answers;
    }
    return logged;
  }

  /** @internal a request to one agent, answered by "hostReply" within `deadlineMs`. */
  async control(hostId: string, message: HostMessage, deadlineMs: number): Promise<void> {
    let answer: OpenedMessage;
    try {
      answer = await this.nc.request(
        hostSubjects(this.runId).control(hostId),
        encodeHostMessage(this.runId, message),
        deadlineMs,
      );
    } catch (error) {
      throw new RankDeadlineError(
        `host ${hostId} did not answer "${message.t}" within ${deadlineMs} ms: ${describeError(error)}`,
      );
    }
    const reply = decodeHostMessage(this.runId, answer.data, `host ${hostId}`);
    if (reply?.t !== "hostReply") throw new Error(`host ${hostId} answered "${message.t}" with something else`);
    if (!reply.ok) throw new Error(`host ${hostId}: ${reply.error ?? "failed"}`);
  }

  /** Stop serving hosts and close the connection (after `logger.shutdown()` this happens by itself). */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const [hostId, handle] of this.hosts) {
      this.logger.deregisterRank(handle.rankName, handle);
      handle.close(`was disconnected: the controller closed its NATS connection (host ${hostId})`);
    }
    try {
      await this.nc.nc.drain();
    } catch {
      await this.nc.nc.close().catch(() => undefined);
    }
  }

  private async onRegister(msg: OpenedMessage): Promise<void> {
    const message = decodeHostMessage(this.runId, msg.data, `NATS subject ${msg.subject}`);
    if (message === undefined) return;
    if (message.t !== "hostRegister") {
      reportIgnored("malformed", `a "${message.t}" message arrived on ${msg.subject}, which takes only "hostRegister"`);
      return;
    }
    const answer = (ok: boolean, error?: string): void => {
      this.nc.respond(
        msg,
        encodeHostMessage(this.runId, {
          t: "hostRegistered",
          host: message.host,
          ok,
          ...(error === undefined ? {} : { error }),
        }),
      );
    };
    // A host that registers again (its agent restarted) keeps its handle: the logger still knows it,
    // and the new agent's frames start a new key-table session by themselves.
    let handle = this.hosts.get(message.host);
    if (handle === undefined && this.hosts.size >= MAX_HOSTS) {
      reportIgnored(
        "refused",
        `host ${message.host} asked to register while ${MAX_HOSTS} hosts are registered, the most a controller takes`,
      );
      answer(false, `this controller already has ${MAX_HOSTS} hosts registered`);
      return;
    }
    this.gone.delete(message.host);
    this.missed.set(message.host, 0);
    if (handle === undefined) {
      handle = new HostHandle(message.host, this);
      this.hosts.set(message.host, handle);
    } else {
      warn(
        `host.reregistered:${message.host}`,
        `host ${message.host} registered again (pid ${message.pid}); its agent was restarted`,
      );
    }
    handle.agentRegistered(message.agent);
    try {
      await this.logger.registerRank(handle);
      answer(true);
    } catch (error) {
      answer(false, describeError(error));
    }
  }

  private onDeregister(msg: OpenedMessage): void {
    const message = decodeHostMessage(this.runId, msg.data, `NATS subject ${msg.subject}`);
    if (message === undefined || message.t !== "hostDeregister") return;
    const handle = this.hosts.get(message.host);
    if (handle === undefined) return;
    this.hosts.delete(message.host);
    this.gone.delete(message.host);
    this.missed.delete(message.host);
    this.logger.deregisterRank(handle.rankName, handle);
    handle.close(`left the run (${message.reason})`);
  }

  private onFrame(msg: OpenedMessage): void {
    const from = `NATS subject ${msg.subject}`;
    if (!isWireFrame(msg.data)) {
      reportIgnored("malformed", `a message from ${from} is not a host states frame`);
      return;
    }
    let header: Record<string, unknown>;
    try {
      header = peekHeader(msg.data);
    } catch (error) {
      reportIgnored("malformed", `a frame from ${from} cannot be read (${describeError(error)})`);
      return;
    }
    if (!checkEnvelope(this.runId, header, from)) return;
    const problem = validateHostStatesHeader(header);
    if (problem !== undefined) {
      const { kind, detail } = typeof problem === "string" ? { kind: "malformed" as const, detail: problem } : problem;
      reportIgnored(kind, `a frame from ${from} is ${kind === "malformed" ? "malformed" : "refused"} (${detail})`);
      return;
    }
    const states = header as unknown as HostStatesHeader;
    const handle = this.hosts.get(states.host);
    if (handle === undefined) {
      reportIgnored("foreign", `a frame came from host ${states.host}, which is not registered with this controller`);
      return;
    }
    try {
      handle.receive(msg.data, states);
    } catch (error) {
      if (!(error instanceof WireFormatError)) throw error;
      reportIgnored(
        error.kind,
        `a frame from host ${states.host} is ${error.kind === "malformed" ? "malformed" : "refused"} (${error.message})`,
      );
    }
  }
}

/** The JSON header of a frame, without decoding its states (to find which host's decoder reads it). */
function peekHeader(data: Uint8Array): Record<string, unknown> {
  if (data.length < 20) throw new WireFormatError("shorter than a frame header");
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const length = view.getUint32(16, true);
  if (20 + length > data.length) throw new WireFormatError("the header runs past the end of the frame");
  const value: unknown = JSON.parse(Buffer.from(data.buffer, data.byteOffset + 20, length).toString("utf8"));
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new WireFormatError("the header is not an object");
  return value as Record<string, unknown>;
}

/**
 * Serve host agents for this controller: agents started with this run id (`startHostAgent`, or
 * `rankscope-host-agent` with `RANKSCOPE_RUN_ID`) register here, and each answers every flush for
 * the ranks of its host. Ranks without an agent can still join directly (`serveRanksOverNats`).
 * The connection closes at `logger.shutdown()`. Throws an Error naming the URL when NATS cannot
 * be reached.
 */
export async function serveHostsOverNats(options: ServeHostsOverNatsOptions): Promise<HostServer> {
  if (options === null || typeof options !== "object" || typeof options.url !== "string" || options.url.length === 0) {
    throw new TypeError(`serveHostsOverNats takes { url: "nats://host:port[,nats://…]", logger? }`);
  }
  const logger = options.logger ?? (await defaultLogger());
  const maxMissed = options.maxMissedFlushes ?? 10;
  if (!Number.isInteger(maxMissed) || maxMissed < 1)
    throw new TypeError(`serveHostsOverNats: maxMissedFlushes must be a positive integer, got ${String(maxMissed)}`);
  const auth = resolveNatsAuth("serveHostsOverNats", options.url, options.auth);
  const nc = await connectTo(auth, {
    name: `rankscope-controller-hosts-${logger.runId}`,
    runId: logger.runId,
    role: "controller",
    timeoutMs: options.connectTimeoutMs ?? 5000,
  });
  const server = new HostServer(
    auth.url,
    logger.runId,
    new SealedNats(nc, RunKey.derive(logger.runSecret, logger.runId)),
    logger,
    maxMissed,
  );
  logger.onShutdown(() => server.close());
  return server;
}
