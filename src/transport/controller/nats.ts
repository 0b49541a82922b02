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
import { connect, type Msg, type NatsConnection } from "@nats-io/transport-node";
import type { RankIdentity } from "../../core/rank-identity.js";
import { describeError, reportError, warn } from "../../core/diagnostics.js";
import { getOrCreateMetricLogger, type MetricLogger } from "../../controller/metric-logger.js";
import { assertSubjectToken } from "../protocol/identity.js";
import { checkReplyFrameHeader, decodeProtocolMessage, encodeProtocolMessage, reportIgnored, transportStats, type RankMessage } from "../protocol/messages.js";
import { isWireFrame, readFrameHeader, StateDecoder, WIRE_VERSION, WireFormatError } from "../wire/codec.js";
import { natsServers, RECONNECT, subjects } from "../protocol/nats.js";
import type { RankServer } from "./launcher.js";
import type { RankSnapshot } from "../protocol/types.js";
import { carrySnapshot, nextRequestId, RemoteRankHandle, type RankCarrier } from "./remote-rank.js";

/** Options of `serveRanksOverNats`. */
export interface ServeRanksOverNatsOptions {
  /** The NATS server, e.g. `nats://127.0.0.1:4222`. */
  url: string;
  /** The controller (default `getOrCreateMetricLogger()`); its `runId` names the run. */
  logger?: MetricLogger;
  /** How long to try the first connection (default 5 s). */
  connectTimeoutMs?: number;
  /**
   * A rank that missed this many flushes in a row is no longer expected at flush (a NATS rank that
   * died without leaving has no process to watch); it is admitted again as soon as it answers or
   * registers. Default 3.
   */
  maxMissedFlushes?: number;
}

/** Connect with the transport's reconnect policy; `url` may list every node of a cluster, comma-separated. */
export async function connectTo(url: string, name: string, timeoutMs: number): Promise<NatsConnection> {
  try {
    return await connect({ servers: natsServers(url), name, timeout: timeoutMs, ...RECONNECT });
  } catch (error) {
    throw new Error(`cannot reach the NATS server at ${url}: ${describeError(error)}. Start nats-server there, or pass the right URL (RANKSCOPE_NATS_URL)`, { cause: error });
  }
}


/** What `unrefWhileIdle` reaches inside the NATS client (`@nats-io/nats-core`'s ProtocolHandler). */
interface NatsInternals {
  protocol?: {
    transport?: { socket?: { unref?: () => unknown } };
    heartbeats?: { timer?: { unref?: () => unknown }; _schedule?: () => void };
  };
}

/**
 * Let the controller's NATS connection not keep the process alive by itself, the way idle child
 * ranks do not (launcher.ts): its socket and its heartbeat timer are unref'd, after the first
 * connection and after every reconnect. Work in flight still keeps the process alive — every
 * request to a rank has a referenced deadline timer, and so does the lifecycle's drain — so a job
 * that forgets `shutdown()` reaches `beforeExit` and is shut down there instead of hanging.
 *
 * The client exposes no unref option; this uses its socket (`protocol.transport.socket`, a Node
 * `net.Socket`) and its heartbeat (`protocol.heartbeats`). Returns false, and the caller warns,
 * when a client version lacks them (the connection then keeps the process alive until `shutdown()`).
 */
export function unrefWhileIdle(nc: NatsConnection): boolean {
  const protocol = (nc as unknown as NatsInternals).protocol;
  const heartbeats = protocol?.heartbeats;
  const schedule = heartbeats?._schedule;
  if (protocol === undefined || heartbeats === undefined || typeof schedule !== "function" || typeof protocol.transport?.socket?.unref !== "function") return false;
  // The heartbeat re-arms its timer on every beat (the beat's callback calls `this._schedule()`).
  heartbeats._schedule = () => {
    schedule.call(heartbeats);
    heartbeats.timer?.unref?.();
  };
  heartbeats.timer?.unref?.();
  unrefSocket(nc);
  return true;
}

/** Unref the connection's current socket (a reconnect makes a new one). */
export function unrefSocket(nc: NatsConnection): void {
  (nc as unknown as NatsInternals).protocol?.transport?.socket?.unref?.();
}

/** What a rank server registers its ranks with: the controller's `MetricLogger`, or a host agent (docs/scale.md). */
export interface RankRegistry {
  registerRank(handle: RemoteRankHandle): Promise<void>;
  deregisterRank(rankName: string, handle?: RemoteRankHandle): boolean;
}

/** A rank registered over NATS: its handle and the process behind it. */
interface Registration {
  readonly handle: RemoteRankHandle;
  readonly pid: number;
  readonly host: string;
}

/** Ranks this controller does not know whose flush answers are kept for them (beyond: dropped, counted). */
const MAX_ORPHAN_RANKS = 4096;
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
  private readonly helloSent = new Map<string, number>();
  private readonly waiters = new Map<string, Array<(handle: RemoteRankHandle) => void>>();
  private readonly inbox: string;
  /**
   * A host agent (scope) asks its ranks for binary flush answers (wire frames): the key table of
   * each rank's frames, by rank name. The controller itself keeps JSON with ranks joined directly.
   */
  private readonly decoders = new Map<string, StateDecoder>();
  /** Ranks whose key table this server does not hold (new here, or a frame was lost): told at the next flush. */
  private readonly resync = new Set<string>();
  private currentFlush: { step: number; id: number } | null = null;
  private closing = false;

  /** @internal use `serveRanksOverNats` */
  constructor(
    readonly url: string,
    readonly runId: string,
    private readonly nc: NatsConnection,
    private readonly logger: RankRegistry,
    private readonly maxMissedFlushes: number,
    /** A host agent's scope (its host id): serve that host's subjects (docs/scale.md). */
    private readonly scope?: string,
  ) {
    const s = subjects(runId, scope);
    this.inbox = s.inbox();
    // A host agent (scope) is a daemon: its connection is what keeps it alive.
    if (scope === undefined && !unrefWhileIdle(nc)) {
      warn("transport.nats.unref", "this NATS client version does not let rankscope unref its connection: a controller that forgets logger.shutdown() will not end by itself while ranks are served over NATS");
    }
    nc.subscribe(s.register, { callback: (err, msg) => void (err === null && this.onRegister(msg)) });
    nc.subscribe(s.deregister, { callback: (err, msg) => void (err === null && this.onDeregister(msg)) });
    nc.subscribe(this.inbox, { callback: (err, msg) => void (err === null && this.onReply(msg)) });
    void this.watchStatus();
    // Ranks of a previous controller of this run (it crashed, or was restarted) register here now.
    this.sayHello(s.hello);
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
    return this.nc.stats();
  }

  waitForRank(rankName: string, deadlineMs: number, signal?: AbortSignal): Promise<RemoteRankHandle> {
    const found = this.ranks.get(rankName);
    if (found !== undefined) return Promise.resolve(found.handle);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`rank ${rankName} did not register over NATS (${this.url}, run ${this.runId}) within ${deadlineMs} ms`)), deadlineMs);
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
      await this.nc.drain();
    } catch {
      await this.nc.close().catch(() => undefined);
    }
  }

  private async onRegister(msg: Msg): Promise<void> {
    const message = decodeProtocolMessage(this.runId, msg.data, `NATS subject ${msg.subject}`) as RankMessage | undefined;
    if (message === undefined) return;
    if (message.t !== "register") {
      reportIgnored("malformed", `a "${message.t}" message arrived on ${msg.subject}, which takes only "register"`);
      return;
    }
    const identity = message.identity;
    const answer = (ok: boolean, error?: string): void => {
      if (msg.reply === undefined) return;
      const text = encodeProtocolMessage(this.runId, { t: "registered", rankName: identity.rankName, ok, ...(error === undefined ? {} : { error }) });
      try {
        msg.respond(text);
      } catch (err) {
        reportError("transport.nats.respond", `could not answer the registration of ${identity.rankName}: ${describeError(err)}`);
      }
    };
    const known = this.ranks.get(identity.rankName);
    if (known !== undefined && known.handle.closed === null && known.pid === message.pid && known.host === message.host) {
      // The same process again (its connection came back, or it heard a hello): same handle.
      this.missed.set(identity.rankName, 0);
      try {
        await this.readmit(identity.rankName, known.handle);
        answer(true);
      } catch (error) {
        answer(false, describeError(error));
      }
      return;
    }
    let handle: RemoteRankHandle | undefined;
    try {
      assertSubjectToken("rankName", identity.rankName);
      handle = this.makeHandle(identity, `NATS rank ${identity.rankName} (pid ${message.pid} on ${message.host})`);
      const orphan = this.orphans.get(identity.rankName);
      if (orphan !== undefined) {
        this.orphans.delete(identity.rankName);
        handle.carry(orphan);
      }
      this.ranks.set(identity.rankName, { handle, pid: message.pid, host: message.host });
      // Its frames may continue a key table an earlier agent held: it starts a new one.
      if (this.scope !== undefined && !this.decoders.has(identity.rankName)) this.resync.add(identity.rankName);
      this.silent.delete(identity.rankName);
      this.missed.set(identity.rankName, 0);
      known?.handle.close("registered again");
      await this.logger.registerRank(handle);
      answer(true);
      for (const waiter of this.waiters.get(identity.rankName)?.splice(0) ?? []) waiter(handle);
    } catch (error) {
      if (handle !== undefined && this.ranks.get(identity.rankName)?.handle === handle) this.ranks.delete(identity.rankName);
      answer(false, describeError(error));
    }
  }

  /** Expect a silent rank at flush again (it answered, or registered again). */
  private async readmit(rankName: string, handle: RemoteRankHandle): Promise<void> {
    if (!this.silent.delete(rankName)) return;
    this.missed.set(rankName, 0);
    warn(`rank.back:${rankName}`, `NATS rank ${rankName} is back; it is expected at flush again, and what it recorded meanwhile goes into its next flush`);
    await this.logger.registerRank(handle);
  }

  private onDeregister(msg: Msg): void {
    const message = decodeProtocolMessage(this.runId, msg.data, `NATS subject ${msg.subject}`) as RankMessage | undefined;
    if (message === undefined) return;
    if (message.t !== "deregister") {
      reportIgnored("malformed", `a "${message.t}" message arrived on ${msg.subject}, which takes only "deregister"`);
      return;
    }
    const known = this.ranks.get(message.rankName);
    if (known === undefined) return;
    this.ranks.delete(message.rankName);
    this.silent.delete(message.rankName);
    this.decoders.delete(message.rankName);
    this.logger.deregisterRank(message.rankName, known.handle);
    known.handle.close(`left the run (${message.reason})`);
  }

  private onReply(msg: Msg): void {
    const message = isWireFrame(msg.data) ? this.replyOfFrame(msg.data, `NATS subject ${msg.subject}`) : (decodeProtocolMessage(this.runId, msg.data, `NATS subject ${msg.subject}`) as RankMessage | undefined);
    if (message === undefined) return;
    if (message.t !== "reply") {
      reportIgnored("malformed", `a "${message.t}" message arrived on the controller's inbox, which takes only replies`);
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
        reportError("transport.nats.readmit", `NATS rank ${message.rankName} answered again but could not be admitted again: ${describeError(error)}`),
      );
    }
    known.handle.receive(message);
  }

  /**
   * A rank's flush answer sent as a wire frame, as the reply it stands for; undefined when it is
   * malformed or foreign (counted and reported). A frame naming keys whose definitions this server
   * does not hold (a frame of the rank's session was lost, or this agent is new to it) is not used:
   * the rank is asked to send that answer again in JSON under the same request id (so it still
   * answers the flush it was for, or arrives late and goes into the rank's next flush), and to
   * start a new key table at the next flush — nothing is lost.
   */
  private replyOfFrame(data: Uint8Array, from: string): RankMessage | undefined {
    const stats = transportStats();
    stats.messagesIn++;
    stats.bytesIn += data.length;
    try {
      const header = checkReplyFrameHeader(this.runId, readFrameHeader(data), from);
      if (header === undefined) return undefined;
      const rankName = header.rankName;
      let decoder = this.decoders.get(rankName);
      if (decoder === undefined) {
        if (!this.ranks.has(rankName) && this.decoders.size >= this.ranks.size + MAX_ORPHAN_RANKS) {
          reportIgnored("foreign", `a flush-answer frame came from ${rankName}, which is not registered here, while the key tables of ${MAX_ORPHAN_RANKS} unregistered ranks are already held`);
          return undefined;
        }
        decoder = new StateDecoder();
        this.decoders.set(rankName, decoder);
      }
      const frame = decoder.decode(data);
      if (frame.tableGap) this.resync.add(rankName);
      if (frame.unknownKeys > 0) {
        reportIgnored("late", `rank ${rankName}'s answer to flush(${header.step}) names ${frame.unknownKeys} keys whose definitions were lost with an earlier frame; it is asked to send that answer again, in JSON`);
        assertSubjectTokenSafe(rankName, (name) => this.nc.publish(subjects(this.runId, this.scope).rank(name), encodeProtocolMessage(this.runId, { t: "resend", id: header.id, seq: header.seq }), { reply: this.inbox }));
        return undefined;
      }
      const states = decoder.toKeyStates(frame, false);
      return { t: "reply", id: header.id, rankName, ok: true, snapshot: { rankName, step: header.step, seq: header.seq, states, droppedKeyRecords: header.dropped } };
    } catch (error) {
      if (!(error instanceof WireFormatError)) throw error;
      reportIgnored("malformed", `a flush-answer frame from ${from} cannot be read (${error.message})`);
      return undefined;
    }
  }

  /**
   * A reply from a rank not registered here: a rank of a previous controller of this run answering
   * this one's flush broadcast before it registered. Its values wait for its registration; it is
   * told hello so that it registers.
   */
  private keepOrphan(message: RankMessage & { t: "reply" }): void {
    const rankName = message.rankName;
    if (message.ok && message.snapshot !== undefined && message.snapshot.rankName === rankName) {
      const kept = this.orphans.get(rankName);
      if (kept === undefined && this.orphans.size >= MAX_ORPHAN_RANKS) {
        const values = message.snapshot.states.reduce((n, s) => n + s.state.count, 0);
        reportError("transport.nats.orphansFull", `flush answers of more than ${MAX_ORPHAN_RANKS} unregistered ranks are waiting; ${values} values of ${rankName} are dropped and counted`);
      } else {
        this.orphans.set(rankName, carrySnapshot(kept ?? null, message.snapshot));
        reportIgnored("late", `a flush answer came from ${rankName}, which is not registered with this controller yet; its values go into its first flush once it registers`);
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
      reportError("transport.nats.hello", `the controller could not announce itself on ${subject}: ${describeError(error)}`);
    }
  }

  private makeHandle(identity: RankIdentity, description: string): RemoteRankHandle {
    const s = subjects(this.runId, this.scope);
    const carrier: RankCarrier = {
      description,
      closesWithRank: false,
      post: (text) => this.nc.publish(s.rank(identity.rankName), text, { reply: this.inbox }),
      broadcastFlush: (step) => this.broadcastFlush(step, identity.rankName),
    };
    const handle = new RemoteRankHandle(identity, this.runId, carrier);
    handle.onClose(() => {
      if (this.ranks.get(identity.rankName)?.handle !== handle) return;
      this.ranks.delete(identity.rankName);
      this.silent.delete(identity.rankName);
      this.decoders.delete(identity.rankName);
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
      if (known !== undefined && this.logger.deregisterRank(rankName, known.handle)) {
        this.silent.add(rankName);
        warn(
          `rank.silent:${rankName}`,
          `NATS rank ${rankName} missed ${this.maxMissedFlushes} flushes in a row; it is no longer expected at flush until it answers or registers again (what it records meanwhile is kept for its next flush)`,
        );
      }
    }
    if (this.currentFlush === null || this.currentFlush.step !== step) {
      const id = nextRequestId();
      this.currentFlush = { step, id };
      queueMicrotask(() => (this.currentFlush = null));
      // A host agent asks for wire frames, naming the ranks that must start a new key table.
      const frames = this.scope === undefined ? {} : { wire: WIRE_VERSION, ...(this.resync.size > 0 ? { resync: [...this.resync] } : {}) };
      this.resync.clear();
      this.nc.publish(subjects(this.runId, this.scope).flush, encodeProtocolMessage(this.runId, { t: "flush", id, step, ...frames }), { reply: this.inbox });
    }
    return this.currentFlush.id;
  }

  private async watchStatus(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === "disconnect") {
        warn("transport.nats.disconnect", `the controller lost its NATS connection to ${this.url}; reconnecting (flushes meanwhile report the ranks they miss)`);
      } else if (status.type === "reconnect") {
        if (this.scope === undefined) unrefSocket(this.nc);
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
  const logger = options.logger ?? (await getOrCreateMetricLogger());
  const maxMissed = options.maxMissedFlushes ?? 3;
  if (!Number.isInteger(maxMissed) || maxMissed < 1) throw new TypeError(`maxMissedFlushes must be a positive integer, got ${String(maxMissed)}`);
  const nc = await connectTo(options.url, `rankscope-controller-${logger.runId}`, options.connectTimeoutMs ?? 5000);
  const server = new NatsRankServer(options.url, logger.runId, nc, logger, maxMissed);
  logger.onShutdown(() => server.close());
  return server;
}
