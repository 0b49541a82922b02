/**
 * Ranks on other machines: the controller and its ranks meet on a NATS server.
 *
 * Subjects are namespaced by the run id, so two runs on one server never see each other (the
 * subject table is in `../protocol/nats.ts`). This is the controller's side; the rank's is
 * `../rank/nats.ts`.
 *
 * Both sides reconnect on their own (the client retries forever, every 250 ms); while the server
 * is away a flush returns by its deadline naming the ranks that did not answer, and the flushes
 * after the reconnect are complete again. Loaded only by `serveRanksOverNats` and by `joinRun`
 * with a NATS URL, so `import { recordMetric } from "rankscope"` never loads the NATS client.
 */
import type { RankIdentity } from "../../core/rank-identity.js";
import { describeError, reportError, warn } from "../../core/diagnostics.js";
import { defaultLogger, type RankController } from "../../pipeline/default-logger.js";
import { assertSubjectToken } from "../protocol/identity.js";
import {
  decodeProtocolMessage,
  encodeProtocolMessage,
  MAX_ACKED_PER_RANK,
  reportIgnored,
  type RankMessage,
} from "../protocol/messages.js";
import { isWireFrame, WIRE_VERSION } from "../wire/codec.js";
import { MAX_ORPHAN_RANKS, RankFrames } from "./rank-frames.js";
import { subjects } from "../protocol/nats.js";
import { RunKey } from "../protocol/seal.js";
import { SealedNats, type OpenedMessage } from "../protocol/sealed-nats.js";
import { resolveNatsAuth, type NatsAuthOptions } from "../protocol/nats-auth.js";
import { connectTo, rankAuthEnv, unrefSocket, unrefWhileIdle } from "./nats-connection.js";
import type { RankServer } from "./launcher.js";
import type { RankSnapshot } from "../../pipeline/rank-handle.js";
import { RemoteRankHandle } from "./remote-rank.js";
import { carrySnapshot, isHeldAnswer } from "./carried-answers.js";
import { nextRequestId, type RankCarrier } from "./rank-carrier.js";

/** Options of `serveRanksOverNats`. */
export interface ServeRanksOverNatsOptions {
  /** The NATS server, e.g. `nats://127.0.0.1:4222`; `nats://user:password@host` and `nats://token@host` carry credentials. */
  url: string;
  /** How the controller authenticates (each setting also from its `RANKSCOPE_NATS_*` variable; docs/security.md). */
  auth?: NatsAuthOptions;
  /** The controller (default `getOrCreateMetricLogger()`); its `runId` names the run. */
  logger?: RankController;
  /** How long to try the first connection (default 5 s). */
  connectTimeoutMs?: number;
  /**
   * A rank that missed this many flushes in a row is no longer expected at flush (a NATS rank that
   * died without leaving has no process to watch); it is admitted again as soon as it answers or
   * registers. Default 3.
   */
  maxMissedFlushes?: number;
}

/** What a rank server registers its ranks with: the controller's `MetricLogger`, or a host agent (docs/scale.md). */
export interface RankRegistry {
  registerRank(handle: RemoteRankHandle): Promise<void>;
  deregisterRank(rankName: string, handle?: RemoteRankHandle): boolean;
  /** A rank fell silent (the controller counts it as lost, and its `rank_lost` alert names it with `host`, until it answers again). */
  rankLost?(identity: RankIdentity, reason: string, host?: string): void;
  /** A silent rank answered or registered again. */
  rankBack?(identity: RankIdentity): void;
  /**
   * Answers of this rank the registry took and has not acknowledged yet, beside those its handle
   * carries (a host agent: those in its own answers the controller has not logged): named in the
   * flush request (`taken`), so the rank does not send them again.
   */
  takenSeqs?(rankName: string): readonly number[];
}

/** A rank registered over NATS: its handle and the process behind it. */
interface Registration {
  readonly handle: RemoteRankHandle;
  readonly pid: number;
  readonly host: string;
}

/** Ranks one server registers at most: a register beyond is refused and counted (`refused`), so registrations cannot grow without bound. */
const MAX_REGISTERED_RANKS = 100_000;

/** A rank this controller does not know is told `hello` at most this often. */
const HELLO_EVERY_MS = 1000;

/**
 * The controller's side: ranks register here and are flushed by one broadcast per step.
 *
 * Ranks that come back are welcome back. A rank that missed `maxMissedFlushes` flushes in a row is
 * no longer expected at flush (so flushes stop naming it), but it stays known: the first answer it
 * sends again, or its next `register`, admits it again with the same handle (no restart of its
 * per-rank backends when their config did not change). A rank registers again by itself after its
 * connection comes back, and whenever a controller says `hello` — which this server does when it
 * starts (a controller restarted on the same run id picks up the ranks still alive) and after its
 * own reconnect. Flush answers that arrive too late, or from a rank not registered yet, are
 * carried into that rank's next flush: counted once, never dropped.
 */
export class NatsRankServer implements RankServer {
  private readonly ranks = new Map<string, Registration>();
  /** Ranks no longer expected at flush because they were silent; any sign of life admits them again. */
  private readonly silent = new Set<string>();
  private readonly missed = new Map<string, number>();
  /** Flush answers of ranks not registered here (yet), merged per rank, for their next flush. */
  private readonly orphans = new Map<string, RankSnapshot>();
  /** The last flush ids this server broadcast (an orphan's answer must be to one), and the orphan answers used (`rank:id`, once each). */
  private readonly recentFlushIds = new Set<number>();
  private readonly orphanAnswers = new Set<string>();
  private readonly helloSent = new Map<string, number>();
  /** Registrations being admitted (the rank's init in flight), by rank: a repeated try waits for the same one. */
  private readonly admitting = new Map<string, Promise<void>>();
  private readonly waiters = new Map<string, Array<(handle: RemoteRankHandle) => void>>();
  private readonly inbox: string;
  /**
   * The key tables of its ranks' binary flush answers (wire frames): the controller asks the ranks
   * joined to it directly for frames, as a host agent asks its host's ranks.
   */
  private readonly frames: RankFrames;
  private currentFlush: { step: number; id: number } | null = null;
  /**
   * Answers logged since the last `ack` message, by rank; sent as one message on the next microtask
   * (the controller) or with the next flush request (a host agent, `flush.acks`).
   */
  private pendingAcks: Map<string, number[]> | null = null;
  private closing = false;
  private forgotten = 0;

  /** @internal use `serveRanksOverNats` */
  constructor(
    readonly url: string,
    readonly runId: string,
    /** The run secret its messages are sealed with (handed to the ranks `spawnRanks` starts over NATS). */
    readonly runSecret: string,
    private readonly nc: SealedNats,
    private readonly logger: RankRegistry,
    private readonly maxMissedFlushes: number,
    /** A host agent's scope (its host id): serve that host's subjects (docs/scale.md). */
    private readonly scope?: string,
  ) {
    const s = subjects(runId, scope);
    this.inbox = s.inbox();
    this.frames = new RankFrames(
      runId,
      (rankName) => this.ranks.has(rankName),
      () => this.ranks.size,
      (rankName, id, seq) =>
        assertSubjectTokenSafe(rankName, (name) =>
          this.nc.publish(s.rank(name), encodeProtocolMessage(runId, { t: "resend", id, seq }), this.inbox),
        ),
    );
    // A host agent (scope) is a daemon: its connection is what keeps it alive.
    if (scope === undefined && !unrefWhileIdle(nc.nc)) {
      warn(
        "transport.nats.unref",
        "this NATS client version does not let rankscope unref its connection: a controller that forgets logger.shutdown() will not end by itself while ranks are served over NATS",
      );
    }
    nc.subscribe(s.register, (msg) => void this.onRegister(msg));
    nc.subscribe(s.deregister, (msg) => this.onDeregister(msg));
    nc.subscribe(this.inbox, (msg) => this.onReply(msg));
    void this.watchStatus();
    // Ranks of a previous controller of this run (it crashed, or was restarted) register here now.
    this.sayHello(s.hello);
  }

  /** @internal The environment of a rank `spawnRanks` starts to join here: the credentials it connects with (`natsAuth`, else this connection's). */
  rankEnv(natsAuth?: NatsAuthOptions): Record<string, string> {
    return rankAuthEnv(this.nc.nc, natsAuth);
  }

  /** A host agent's server: say hello on the host's subjects, so ranks that joined an earlier agent register with this one. */
  announce(): void {
    this.sayHello(subjects(this.runId, this.scope).hello);
  }

  /** Names of the ranks registered over NATS and expected at flush. */
  get rankNames(): string[] {
    return [...this.ranks.keys()].filter((name) => !this.silent.has(name));
  }

  /** Names of the ranks no longer expected at flush because they were silent (admitted again when they answer). */
  get silentRankNames(): string[] {
    return [...this.silent];
  }

  /** Bytes this connection sent and received so far (NATS protocol included). */
  get stats(): { inBytes: number; outBytes: number; inMsgs: number; outMsgs: number } {
    return this.nc.nc.stats();
  }

  waitForRank(rankName: string, deadlineMs: number, signal?: AbortSignal): Promise<RemoteRankHandle> {
    const found = this.ranks.get(rankName);
    if (found !== undefined) return Promise.resolve(found.handle);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `rank ${rankName} did not register over NATS (${this.url}, run ${this.runId}) within ${deadlineMs} ms`,
            ),
          ),
        deadlineMs,
      );
      const waiter = (handle: RemoteRankHandle): void => {
        clearTimeout(timer);
        resolve(handle);
      };
      const list = this.waiters.get(rankName) ?? [];
      list.push(waiter);
      this.waiters.set(rankName, list);
      signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          const waiting = this.waiters.get(rankName);
          if (waiting !== undefined) waiting.splice(waiting.indexOf(waiter), 1);
        },
        { once: true },
      );
    });
  }

  /** Unsubscribe and close the connection (after `logger.shutdown()` this happens by itself). */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    // Ranks no longer expected were not shut down with the logger's ranks: ask them too (briefly;
    // a rank that is unreachable cannot answer anyway), so a live one does not wait forever.
    const silent = [...this.silent].flatMap((name) => this.ranks.get(name)?.handle ?? []);
    await Promise.all(silent.map((handle) => handle.shutdown(1000).catch(() => undefined)));
    for (const [rankName, { handle }] of this.ranks) {
      this.logger.deregisterRank(rankName, handle);
      handle.close("was disconnected: the controller closed its NATS connection");
    }
    try {
      await this.nc.nc.drain();
    } catch {
      await this.nc.nc.close().catch(() => undefined);
    }
  }

  private async onRegister(msg: OpenedMessage): Promise<void> {
    const message = decodeProtocolMessage(this.runId, msg.data, `NATS subject ${msg.subject}`);
    if (message === undefined) return;
    if (message.t !== "register") {
      reportIgnored("malformed", `a "${message.t}" message arrived on ${msg.subject}, which takes only "register"`);
      return;
    }
    const identity = message.identity;
    const answer = (ok: boolean, error?: string): void => this.answerRegistration(msg, identity.rankName, ok, error);
    const known = this.ranks.get(identity.rankName);
    if (
      known !== undefined &&
      known.handle.closed === null &&
      known.pid === message.pid &&
      known.host === message.host
    ) {
      // The same process again (its connection came back, or it heard a hello): same handle.
      this.missed.set(identity.rankName, 0);
      try {
        // A registration being admitted (its rank tried again before the answer): answered when it is.
        await (this.admitting.get(identity.rankName) ?? this.readmit(identity.rankName, known.handle));
        answer(true);
      } catch (error) {
        answer(false, describeError(error));
      }
      return;
    }
    if (known === undefined && this.ranks.size >= MAX_REGISTERED_RANKS) {
      reportIgnored(
        "refused",
        `rank ${identity.rankName} asked to register while ${MAX_REGISTERED_RANKS} ranks are registered here, the most one server takes`,
      );
      answer(false, `this server already has ${MAX_REGISTERED_RANKS} ranks registered`);
      return;
    }
    let handle: RemoteRankHandle | undefined;
    try {
      assertSubjectToken("rankName", identity.rankName);
      handle = this.makeHandle(
        identity,
        `NATS rank ${identity.rankName} (pid ${message.pid} on ${message.host})`,
        message.host,
        message.pid,
      );
      const orphan = this.orphans.get(identity.rankName);
      if (orphan !== undefined) {
        this.orphans.delete(identity.rankName);
        handle.carry(orphan);
      }
      this.ranks.set(identity.rankName, { handle, pid: message.pid, host: message.host });
      // Its frames may continue a key table an earlier controller or agent held: it starts a new one.
      this.frames.joined(identity.rankName);
      this.silent.delete(identity.rankName);
      this.missed.set(identity.rankName, 0);
      known?.handle.close("registered again");
      const admitted = this.logger.registerRank(handle);
      this.admitting.set(identity.rankName, admitted);
      try {
        await admitted;
      } finally {
        if (this.admitting.get(identity.rankName) === admitted) this.admitting.delete(identity.rankName);
      }
      answer(true);
      for (const waiter of this.waiters.get(identity.rankName)?.splice(0) ?? []) waiter(handle);
    } catch (error) {
      if (handle !== undefined && this.ranks.get(identity.rankName)?.handle === handle)
        this.ranks.delete(identity.rankName);
      answer(false, describeError(error));
    }
  }

  /** Answer a registration (`registered`, with the refusal's reason when `ok` is false). */
  private answerRegistration(msg: OpenedMessage, rankName: string, ok: boolean, error?: string): void {
    if (msg.reply === undefined) return;
    const text = encodeProtocolMessage(this.runId, {
      t: "registered",
      rankName,
      ok,
      ...(error === undefined ? {} : { error }),
    });
    try {
      this.nc.respond(msg, text);
    } catch (err) {
      reportError("transport.nats.respond", `could not answer the registration of ${rankName}: ${describeError(err)}`);
    }
  }

  /**
   * Tell the ranks which of their answers were logged. The controller: one `ack` message per flush
   * on the run's flush subject, at once, so that a controller restarted soon after logging does
   * not take them again. A host agent: in its next flush request (`acks`), no message of its own —
   * the controller tells a replacement agent what it logged through this one (`hostFlush.logged`).
   */
  private queueAck(rankName: string, seqs: readonly number[]): void {
    if (this.pendingAcks === null) {
      this.pendingAcks = new Map();
      if (this.scope === undefined) queueMicrotask(() => this.sendAcks());
    }
    const list = this.pendingAcks.get(rankName) ?? [];
    list.push(...seqs);
    this.pendingAcks.set(rankName, list);
  }

  /** The acknowledgements queued since they were last sent, by rank (bounded); undefined when none. */
  private takeAcks(): Record<string, readonly number[]> | undefined {
    const pending = this.pendingAcks;
    this.pendingAcks = null;
    if (pending === null || pending.size === 0) return undefined;
    return Object.fromEntries([...pending].map(([rankName, seqs]) => [rankName, seqs.slice(-MAX_ACKED_PER_RANK)]));
  }

  private sendAcks(): void {
    const acks = this.takeAcks();
    if (acks === undefined || this.closing) return;
    try {
      this.nc.publish(subjects(this.runId, this.scope).flush, encodeProtocolMessage(this.runId, { t: "ack", acks }));
    } catch (error) {
      // Not a loss: the ranks keep those answers, and this controller will not take them twice.
      reportError(
        "transport.nats.ack",
        `the controller could not tell its ranks which answers it logged: ${describeError(error)}`,
      );
    }
  }

  /** Expect a silent rank at flush again (it answered, or registered again). */
  private async readmit(rankName: string, handle: RemoteRankHandle): Promise<void> {
    if (!this.silent.delete(rankName)) return;
    this.missed.set(rankName, 0);
    warn(
      `rank.back:${rankName}`,
      `NATS rank ${rankName} is back; it is expected at flush again, and what it recorded meanwhile goes into its next flush`,
    );
    this.logger.rankBack?.(handle.identity);
    await this.logger.registerRank(handle);
  }

  private onDeregister(msg: OpenedMessage): void {
    const message = decodeProtocolMessage(this.runId, msg.data, `NATS subject ${msg.subject}`);
    if (message === undefined) return;
    if (message.t !== "deregister") {
      reportIgnored("malformed", `a "${message.t}" message arrived on ${msg.subject}, which takes only "deregister"`);
      return;
    }
    const known = this.ranks.get(message.rankName);
    if (known === undefined) return;
    this.ranks.delete(message.rankName);
    this.silent.delete(message.rankName);
    this.frames.forget(message.rankName);
    this.logger.deregisterRank(message.rankName, known.handle);
    known.handle.close(`left the run (${message.reason})`);
  }

  private onReply(msg: OpenedMessage): void {
    const message = isWireFrame(msg.data)
      ? this.frames.reply(msg.data, `NATS subject ${msg.subject}`)
      : decodeProtocolMessage(this.runId, msg.data, `NATS subject ${msg.subject}`);
    if (message === undefined) return;
    if (message.t !== "reply") {
      reportIgnored(
        "malformed",
        `a "${message.t}" message arrived on the controller's inbox, which takes only replies`,
      );
      return;
    }
    const known = this.ranks.get(message.rankName);
    if (known === undefined) {
      this.keepOrphan(message);
      return;
    }
    if (message.ok && message.snapshot !== undefined) this.missed.set(message.rankName, 0);
    if (this.silent.has(message.rankName)) {
      void this.readmit(message.rankName, known.handle).catch((error: unknown) =>
        reportError(
          "transport.nats.readmit",
          `NATS rank ${message.rankName} answered again but could not be admitted again: ${describeError(error)}`,
        ),
      );
    }
    known.handle.receive(message);
  }

  /**
   * A reply from a rank not registered here: a rank of a previous controller of this run answering
   * this one's flush broadcast before it registered. Its values wait for its registration; it is
   * told hello so that it registers.
   */
  private keepOrphan(message: RankMessage & { t: "reply" }): void {
    const rankName = message.rankName;
    // An answer the rank sent again (`carried`) shares the flush's id with its new one: told apart by number.
    const carriedSeq = message.ok && message.carried === true ? `:${message.snapshot?.seq ?? ""}` : "";
    const answer = `${rankName}:${message.id}${carriedSeq}`;
    if (!this.recentFlushIds.has(message.id)) {
      // An answer to a request of a handle that is gone (a shutdown answered after its deadline).
      reportIgnored(
        "late",
        `a reply came from ${rankName}, not registered here, to request ${message.id}, which is not one of this server's recent flushes`,
      );
      return;
    }
    if (this.orphanAnswers.has(answer)) {
      reportIgnored(
        "replayed",
        `${rankName}'s answer to flush request ${message.id} came again; an answer is used once`,
      );
      return;
    }
    this.orphanAnswers.add(answer);
    if (this.orphanAnswers.size > MAX_ORPHAN_RANKS)
      this.orphanAnswers.delete(this.orphanAnswers.values().next().value ?? answer);
    if (
      message.ok &&
      message.snapshot !== undefined &&
      message.snapshot.rankName === rankName &&
      isHeldAnswer(message.snapshot)
    ) {
      // A rank registering with this server answers its flushes empty until it is registered (`RankAgent.holdFlushes`).
    } else if (message.ok && message.snapshot !== undefined && message.snapshot.rankName === rankName) {
      const kept = this.orphans.get(rankName);
      if (kept === undefined && this.orphans.size >= MAX_ORPHAN_RANKS) {
        const values = message.snapshot.states.reduce((n, s) => n + s.state.count, 0);
        reportError(
          "transport.nats.orphansFull",
          `flush answers of more than ${MAX_ORPHAN_RANKS} unregistered ranks are waiting; ${values} values of ${rankName} are dropped and counted`,
        );
      } else {
        this.orphans.set(rankName, carrySnapshot(kept ?? null, message.snapshot));
        reportIgnored(
          "late",
          `a flush answer came from ${rankName}, which is not registered with this controller yet; its values go into its first flush once it registers`,
        );
      }
    } else {
      reportIgnored("foreign", `a reply came from ${rankName}, which is not registered with this controller`);
    }
    assertSubjectTokenSafe(rankName, (name) => {
      const now = Date.now();
      if (now - (this.helloSent.get(name) ?? 0) < HELLO_EVERY_MS) return;
      if (this.helloSent.size > MAX_ORPHAN_RANKS) this.helloSent.clear();
      this.helloSent.set(name, now);
      this.sayHello(subjects(this.runId, this.scope).rank(name));
    });
  }

  /** Tell ranks (the whole run, or one rank's subject) that this controller is here. */
  private sayHello(subject: string): void {
    if (this.closing) return;
    try {
      this.nc.publish(subject, encodeProtocolMessage(this.runId, { t: "hello", controller: this.inbox }));
    } catch (error) {
      reportError(
        "transport.nats.hello",
        `the controller could not announce itself on ${subject}: ${describeError(error)}`,
      );
    }
  }

  private makeHandle(identity: RankIdentity, description: string, host: string, pid: number): RemoteRankHandle {
    const s = subjects(this.runId, this.scope);
    const carrier: RankCarrier = {
      description,
      host,
      pid,
      closesWithRank: false,
      post: (text) => this.nc.publish(s.rank(identity.rankName), text, this.inbox),
      broadcastFlush: (step) => this.broadcastFlush(step, identity.rankName),
      acknowledge: (seqs) => this.queueAck(identity.rankName, seqs),
    };
    const handle = new RemoteRankHandle(identity, this.runId, carrier);
    handle.onClose(() => {
      if (this.ranks.get(identity.rankName)?.handle !== handle) return;
      this.ranks.delete(identity.rankName);
      this.silent.delete(identity.rankName);
      this.frames.forget(identity.rankName);
    });
    return handle;
  }

  /**
   * One flush message per `MetricLogger.flush` call, whatever the number of ranks: the logger asks
   * every handle in one synchronous pass, so the first handle publishes and the rest share its id.
   * A rank that missed `maxMissedFlushes` in a row is no longer expected (it stays known, see above).
   */
  private broadcastFlush(step: number, rankName: string): number {
    const missed = (this.missed.get(rankName) ?? 0) + 1;
    this.missed.set(rankName, missed);
    if (missed > this.maxMissedFlushes && !this.silent.has(rankName)) {
      const known = this.ranks.get(rankName);
      if (known !== undefined && this.scope !== undefined && this.logger.deregisterRank(rankName, known.handle)) {
        this.forget(rankName, known.handle);
      } else if (known !== undefined && this.logger.deregisterRank(rankName, known.handle)) {
        this.silent.add(rankName);
        warn(
          `rank.silent:${rankName}`,
          `NATS rank ${rankName} missed ${this.maxMissedFlushes} flushes in a row; it is no longer expected at flush until it answers or registers again (what it records meanwhile is kept for its next flush; counted as lost meanwhile: rankscope/ranks_lost)`,
        );
        this.logger.rankLost?.(
          known.handle.identity,
          `silent: missed ${this.maxMissedFlushes} flushes in a row`,
          known.host,
        );
      }
    }
    if (this.currentFlush === null || this.currentFlush.step !== step) {
      const id = nextRequestId();
      this.currentFlush = { step, id };
      this.recentFlushIds.add(id);
      if (this.recentFlushIds.size > 64) this.recentFlushIds.delete(this.recentFlushIds.values().next().value ?? id);
      queueMicrotask(() => (this.currentFlush = null));
      // Answers as wire frames, naming the ranks that must start a new key table.
      const resync = this.frames.takeResync();
      const taken = this.takenSeqs();
      // A host agent's acknowledgements ride on its flush request (the controller sent its own at once).
      const acks = this.scope === undefined ? undefined : this.takeAcks();
      const frames = {
        wire: WIRE_VERSION,
        ...(resync.length > 0 ? { resync } : {}),
        ...(taken === undefined ? {} : { taken }),
        ...(acks === undefined ? {} : { acks }),
      };
      this.nc.publish(
        subjects(this.runId, this.scope).flush,
        encodeProtocolMessage(this.runId, { t: "flush", id, step, ...frames }),
        this.inbox,
      );
    }
    return this.currentFlush.id;
  }

  /** By rank, the answers taken late and not acknowledged yet (`RemoteRankHandle.takenSeqs`); undefined when none. */
  private takenSeqs(): Record<string, readonly number[]> | undefined {
    let taken: Record<string, readonly number[]> | undefined;
    for (const [rankName, { handle }] of this.ranks) {
      const held = this.logger.takenSeqs?.(rankName) ?? [];
      const seqs = held.length === 0 ? handle.takenSeqs : [...held, ...handle.takenSeqs];
      if (seqs.length > 0) (taken ??= {})[rankName] = seqs.slice(-MAX_ACKED_PER_RANK);
    }
    return taken;
  }

  /**
   * A host agent forgets a rank silent for `maxMissedFlushes` (its memory stays bounded whatever
   * ranks come and go): named in a warning, counted (`forgottenRanks`). If it was only stalled, its
   * late answer is kept as an orphan's (bounded) and it is told hello, so it registers again and
   * that answer goes into its next flush.
   */
  private forget(rankName: string, handle: RemoteRankHandle): void {
    this.ranks.delete(rankName);
    this.missed.delete(rankName);
    this.frames.forget(rankName);
    this.forgotten++;
    warn(
      `rank.forgotten:${rankName}`,
      `rank ${rankName} missed ${this.maxMissedFlushes} flushes of host agent ${this.scope ?? ""} in a row; the agent forgets it (if it answers again it is told to register again, and what it recorded goes into its next flush)`,
    );
    handle.close(`was forgotten after ${this.maxMissedFlushes} missed flushes`);
  }

  /** Ranks a host agent forgot because they were silent for `maxMissedFlushes` in a row. */
  get forgottenRanks(): number {
    return this.forgotten;
  }

  private async watchStatus(): Promise<void> {
    for await (const status of this.nc.nc.status()) {
      if (status.type === "disconnect") {
        warn(
          "transport.nats.disconnect",
          `the controller lost its NATS connection to ${this.url}; reconnecting (flushes meanwhile report the ranks they miss)`,
        );
      } else if (status.type === "reconnect") {
        if (this.scope === undefined) unrefSocket(this.nc.nc);
        warn("transport.nats.reconnect", `the controller reconnected to NATS at ${this.url}`);
        this.sayHello(subjects(this.runId, this.scope).hello);
      }
    }
  }
}

/** Run `use` with `rankName` if it can be part of a NATS subject (a reply's name is not trusted). */
function assertSubjectTokenSafe(rankName: string, use: (name: string) => void): void {
  try {
    assertSubjectToken("rankName", rankName);
  } catch {
    return;
  }
  use(rankName);
}

/**
 * Serve ranks over NATS for this controller: processes anywhere that call `joinRun({ natsUrl,
 * runId: logger.runId })` register with it. The connection closes at `logger.shutdown()`.
 * Throws an Error naming the URL when the server cannot be reached.
 */
export async function serveRanksOverNats(options: ServeRanksOverNatsOptions): Promise<NatsRankServer> {
  if (options === null || typeof options !== "object" || typeof options.url !== "string" || options.url.length === 0) {
    throw new TypeError(`serveRanksOverNats takes { url: "nats://host:port", logger? }`);
  }
  const logger = options.logger ?? (await defaultLogger());
  const maxMissed = options.maxMissedFlushes ?? 3;
  if (!Number.isInteger(maxMissed) || maxMissed < 1)
    throw new TypeError(`maxMissedFlushes must be a positive integer, got ${String(maxMissed)}`);
  const auth = resolveNatsAuth("serveRanksOverNats", options.url, options.auth);
  const nc = await connectTo(auth, {
    name: `rankscope-controller-${logger.runId}`,
    runId: logger.runId,
    role: "controller",
    timeoutMs: options.connectTimeoutMs ?? 5000,
  });
  const server = new NatsRankServer(
    auth.url,
    logger.runId,
    logger.runSecret,
    new SealedNats(nc, RunKey.derive(logger.runSecret, logger.runId)),
    logger,
    maxMissed,
  );
  logger.onShutdown(() => server.close());
  return server;
}
