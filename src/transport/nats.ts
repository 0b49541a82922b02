/**
 * Ranks on other machines: the controller and its ranks meet on a NATS server.
 *
 * Subjects are namespaced by the run id, so two runs on one server never see each other:
 *
 * ```
 * rankscope.{runId}.register        rank → controller (request; answered once the rank is initialised)
 * rankscope.{runId}.deregister      rank → controller
 * rankscope.{runId}.flush           controller → every rank at once (scatter); replies gather on the inbox
 * rankscope.{runId}.rank.{rankName} controller → one rank (init, shutdown, start, call, sync)
 * rankscope.{runId}.ctl.{nuid}      the controller's inbox for every reply
 * ```
 *
 * Both sides reconnect on their own (the client retries forever, every 250 ms); while the server
 * is away a flush returns by its deadline naming the ranks that did not answer, and the flushes
 * after the reconnect are complete again. Loaded only by `serveRanksOverNats` and by `joinRun`
 * with a NATS URL, so `import { recordMetric } from "rankscope"` never loads the NATS client.
 */
import { connect, createInbox, type Msg, type NatsConnection } from "@nats-io/transport-node";
import type { RankIdentity } from "../backends/backend.js";
import { describeError, reportError, warn } from "../core/diagnostics.js";
import { backoffDelay, sleep } from "../core/retry.js";
import { getOrCreateMetricLogger, type MetricLogger } from "../controller/metric-logger.js";
import { assertSubjectToken } from "./identity.js";
import type { RankServer } from "./launcher.js";
import { decodeProtocolMessage, encodeProtocolMessage, reportIgnored, type RankMessage } from "./protocol.js";
import type { RankAgent } from "./rank-agent.js";
import { nextRequestId, RemoteRankHandle, type RankCarrier } from "./remote-rank.js";

/** Options of `serveRanksOverNats`. */
export interface ServeRanksOverNatsOptions {
  /** The NATS server, e.g. `nats://127.0.0.1:4222`. */
  url: string;
  /** The controller (default `getOrCreateMetricLogger()`); its `runId` names the run. */
  logger?: MetricLogger;
  /** How long to try the first connection (default 5 s). */
  connectTimeoutMs?: number;
  /**
   * A rank that missed this many flushes in a row is deregistered (a NATS rank that died without
   * leaving has no process to watch). Default 3.
   */
  maxMissedFlushes?: number;
}

/** Subjects of one run. */
function subjects(runId: string) {
  const base = `rankscope.${runId}`;
  return {
    register: `${base}.register`,
    deregister: `${base}.deregister`,
    flush: `${base}.flush`,
    rank: (rankName: string) => `${base}.rank.${rankName}`,
    inbox: () => createInbox(`${base}.ctl`),
  };
}

const RECONNECT = { maxReconnectAttempts: -1, reconnectTimeWait: 250, reconnectJitter: 50, pingInterval: 5000 } as const;

async function connectTo(url: string, name: string, timeoutMs: number): Promise<NatsConnection> {
  try {
    return await connect({ servers: url, name, timeout: timeoutMs, ...RECONNECT });
  } catch (error) {
    throw new Error(`cannot reach the NATS server at ${url}: ${describeError(error)}. Start nats-server there, or pass the right URL (RANKSCOPE_NATS_URL)`, { cause: error });
  }
}

/** The controller's side: ranks register here and are flushed by one broadcast per step. */
export class NatsRankServer implements RankServer {
  private readonly handles = new Map<string, RemoteRankHandle>();
  private readonly missed = new Map<string, number>();
  private readonly waiters = new Map<string, Array<(handle: RemoteRankHandle) => void>>();
  private readonly inbox: string;
  private currentFlush: { step: number; id: number } | null = null;
  private closing = false;

  /** @internal use `serveRanksOverNats` */
  constructor(
    readonly url: string,
    readonly runId: string,
    private readonly nc: NatsConnection,
    private readonly logger: MetricLogger,
    private readonly maxMissedFlushes: number,
  ) {
    const s = subjects(runId);
    this.inbox = s.inbox();
    nc.subscribe(s.register, { callback: (err, msg) => void (err === null && this.onRegister(msg)) });
    nc.subscribe(s.deregister, { callback: (err, msg) => void (err === null && this.onDeregister(msg)) });
    nc.subscribe(this.inbox, { callback: (err, msg) => void (err === null && this.onReply(msg)) });
    void this.watchStatus();
  }

  /** Names of the ranks registered over NATS. */
  get rankNames(): string[] {
    return [...this.handles.keys()];
  }

  /** Bytes this connection sent and received so far (NATS protocol included). */
  get stats(): { inBytes: number; outBytes: number; inMsgs: number; outMsgs: number } {
    return this.nc.stats();
  }

  waitForRank(rankName: string, deadlineMs: number, signal?: AbortSignal): Promise<RemoteRankHandle> {
    const found = this.handles.get(rankName);
    if (found !== undefined) return Promise.resolve(found);
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
    for (const [rankName, handle] of this.handles) {
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
    try {
      assertSubjectToken("rankName", identity.rankName);
      const handle = this.makeHandle(identity, `NATS rank ${identity.rankName} (pid ${message.pid} on ${message.host})`);
      const previous = this.handles.get(identity.rankName);
      this.handles.set(identity.rankName, handle);
      this.missed.set(identity.rankName, 0);
      previous?.close("registered again");
      await this.logger.registerRank(handle);
      answer(true);
      for (const waiter of this.waiters.get(identity.rankName)?.splice(0) ?? []) waiter(handle);
    } catch (error) {
      this.handles.delete(identity.rankName);
      answer(false, describeError(error));
    }
  }

  private onDeregister(msg: Msg): void {
    const message = decodeProtocolMessage(this.runId, msg.data, `NATS subject ${msg.subject}`) as RankMessage | undefined;
    if (message === undefined) return;
    if (message.t !== "deregister") {
      reportIgnored("malformed", `a "${message.t}" message arrived on ${msg.subject}, which takes only "deregister"`);
      return;
    }
    const handle = this.handles.get(message.rankName);
    if (handle === undefined) return;
    this.handles.delete(message.rankName);
    this.logger.deregisterRank(message.rankName, handle);
    handle.close(`left the run (${message.reason})`);
  }

  private onReply(msg: Msg): void {
    const message = decodeProtocolMessage(this.runId, msg.data, `NATS subject ${msg.subject}`) as RankMessage | undefined;
    if (message === undefined) return;
    if (message.t !== "reply") {
      reportIgnored("malformed", `a "${message.t}" message arrived on the controller's inbox, which takes only replies`);
      return;
    }
    const handle = this.handles.get(message.rankName);
    if (handle === undefined) {
      reportIgnored("foreign", `a reply came from ${message.rankName}, which is not registered with this controller`);
      return;
    }
    if (message.ok && message.snapshot !== undefined) this.missed.set(message.rankName, 0);
    handle.receive(message);
  }

  private makeHandle(identity: RankIdentity, description: string): RemoteRankHandle {
    const s = subjects(this.runId);
    const carrier: RankCarrier = {
      description,
      closesWithRank: false,
      post: (text) => this.nc.publish(s.rank(identity.rankName), text, { reply: this.inbox }),
      broadcastFlush: (step) => this.broadcastFlush(step, identity.rankName),
    };
    const handle = new RemoteRankHandle(identity, this.runId, carrier);
    handle.onClose(() => {
      if (this.handles.get(identity.rankName) === handle) this.handles.delete(identity.rankName);
    });
    return handle;
  }

  /**
   * One flush message per `MetricLogger.flush` call, whatever the number of ranks: the logger asks
   * every handle in one synchronous pass, so the first handle publishes and the rest share its id.
   */
  private broadcastFlush(step: number, rankName: string): number {
    const missed = (this.missed.get(rankName) ?? 0) + 1;
    this.missed.set(rankName, missed);
    if (missed > this.maxMissedFlushes) {
      const handle = this.handles.get(rankName);
      if (handle !== undefined && this.logger.deregisterRank(rankName, handle)) {
        warn(`rank.silent:${rankName}`, `NATS rank ${rankName} missed ${this.maxMissedFlushes} flushes in a row; it is deregistered and no longer expected`);
        queueMicrotask(() => handle.close(`missed ${this.maxMissedFlushes} flushes in a row`));
      }
    }
    if (this.currentFlush === null || this.currentFlush.step !== step) {
      const id = nextRequestId();
      this.currentFlush = { step, id };
      queueMicrotask(() => (this.currentFlush = null));
      this.nc.publish(subjects(this.runId).flush, encodeProtocolMessage(this.runId, { t: "flush", id, step }), { reply: this.inbox });
    }
    return this.currentFlush.id;
  }

  private async watchStatus(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === "disconnect") {
        warn("transport.nats.disconnect", `the controller lost its NATS connection to ${this.url}; reconnecting (flushes meanwhile report the ranks they miss)`);
      } else if (status.type === "reconnect") {
        warn("transport.nats.reconnect", `the controller reconnected to NATS at ${this.url}`);
      }
    }
  }
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

/** Waits between a joining rank's tries (jittered, so ranks started together spread out). */
const JOIN_BACKOFF = { initialMs: 100, maxMs: 1000 };

/** Options of the rank side. */
export interface NatsJoinOptions {
  readonly url: string;
  readonly runId: string;
  readonly joinDeadlineMs: number;
}

/**
 * The rank's side: connect, listen on this rank's subject and the run's flush subject, register
 * (retrying until the controller answers or the deadline passes). Returns the function that leaves.
 */
export async function joinOverNats(agent: RankAgent, options: NatsJoinOptions): Promise<(reason: string) => Promise<void>> {
  const { url, runId, joinDeadlineMs } = options;
  const deadline = Date.now() + joinDeadlineMs;
  const s = subjects(runId);
  let nc: NatsConnection | undefined;
  let lastError: unknown;
  // Waits between tries use the one backoff (jittered: ranks started together spread out); the sleep is ref'd, so
  // a retrying rank's process stays alive. The loops are bounded by the join deadline.
  const pause = (attempt: number): Promise<void> => sleep(Math.min(backoffDelay(attempt, JOIN_BACKOFF), Math.max(0, deadline - Date.now())));
  let attempt = 0;
  while (nc === undefined) {
    try {
      nc = await connect({ servers: url, name: `rankscope-${runId}-${agent.rankName}`, timeout: Math.max(100, Math.min(2000, deadline - Date.now())), ...RECONNECT });
    } catch (error) {
      lastError = error;
      if (Date.now() >= deadline) {
        throw new Error(`joinRun(): cannot reach the NATS server at ${url} within ${joinDeadlineMs} ms: ${describeError(lastError)}. Start nats-server there, or pass the right URL (RANKSCOPE_NATS_URL)`, {
          cause: error,
        });
      }
      await pause(attempt++);
    }
  }
  const conn = nc;
  const onRequest = (err: Error | null, msg: Msg): void => {
    if (err !== null) return;
    const reply = (text: string): void => {
      if (msg.reply !== undefined) conn.publish(msg.reply, text);
    };
    void agent.receive(msg.data, reply, `NATS subject ${msg.subject}`);
  };
  conn.subscribe(s.rank(agent.rankName), { callback: onRequest });
  conn.subscribe(s.flush, { callback: onRequest });

  const register = agent.registerMessage();
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) {
      await conn.close();
      throw new Error(`joinRun(): no controller of run ${runId} answered on NATS at ${url} within ${joinDeadlineMs} ms (${describeError(lastError)}); is the controller serving ranks (serveRanksOverNats) with this run id?`);
    }
    try {
      const answer = await conn.request(s.register, register, { timeout: left });
      const message = decodeProtocolMessage(runId, answer.data, `NATS subject ${s.register}`);
      if (message === undefined || message.t !== "registered" || message.rankName !== agent.rankName) {
        await pause(attempt++);
        continue;
      }
      if (!message.ok) {
        await conn.close();
        throw new Error(`joinRun(): the controller refused rank ${agent.rankName}: ${message.error ?? "no reason given"}`);
      }
      break;
    } catch (error) {
      if (error instanceof Error && error.message.startsWith("joinRun():")) throw error;
      // No controller yet (no responders) or a timeout: try again until the deadline.
      lastError = error;
      await pause(attempt++);
    }
  }
  return async (reason) => {
    try {
      conn.publish(s.deregister, agent.deregisterMessage(reason));
      await conn.drain();
    } catch {
      await conn.close().catch(() => undefined);
    }
  };
}

