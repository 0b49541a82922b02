/**
 * The controller's side of host agents: `serveHostsOverNats` registers one `HostHandle` per host
 * with the `MetricLogger`. A flush is one broadcast to every agent; each answers with one binary
 * frame holding the exact merge of its ranks' states, so the controller decodes and merges
 * hosts × keys states, not ranks × keys. The logger counts a host's ranks one by one and names the
 * missing ones: those the agent named, or every rank of a host whose agent did not answer.
 */
import { randomUUID } from "node:crypto";
import { nats } from "../protocol/nats-client.js";
import { describeError, reportError, warn } from "../../core/diagnostics.js";
import { defaultLogger, type RankController } from "../../pipeline/default-logger.js";
import { connectTo, unrefSocket, unrefWhileIdle } from "../controller/nats-connection.js";
import { resolveNatsAuth, type NatsAuthOptions } from "../protocol/nats-auth.js";
import { reportIgnored } from "../protocol/messages.js";
import { RunKey } from "../protocol/seal.js";
import { SealedNats, type OpenedMessage } from "../protocol/sealed-nats.js";
import { nextRequestId, RankDeadlineError } from "../controller/rank-carrier.js";
import { WireFormatError } from "../wire/codec.js";
import { checkedHostFrame } from "./frame-header.js";
import { loggedByHost, PendingHostAcks, takenByHost } from "./host-acks.js";
import { decodeHostMessage, encodeHostMessage, hostSubjects, type HostMessage } from "./messages.js";
import { HostHandle } from "./host-handle.js";
import type { HostServerStats, HostServing, ServedHost } from "./host-serving.js";

export { HostHandle, type HostServerStats };

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

/** Hosts one controller registers at most: a register beyond is refused and counted (`refused`). */
const MAX_HOSTS = 10_000;

/** Who counts the hosts served: the controller's logger, or a rack agent. */
export type HostRegistry = Pick<RankController, "registerRank" | "deregisterRank">;

/**
 * The serving end of the host protocol: the controller's (`serveHostsOverNats`), or a rack agent's
 * towards the hosts of its rack (`scope`: the rack id; docs/scale.md, "A deeper tree").
 */
export class HostServer implements HostServing {
  private readonly hosts = new Map<string, HostHandle>();
  private readonly inbox: string;
  /** This serving process, named in its flush requests: an agent registered with another one registers again. */
  readonly serverId = randomUUID();
  private readonly subjects: ReturnType<typeof hostSubjects>;
  /** "this controller" or "rack agent R", in messages. */
  readonly what: string;
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
    private readonly logger: HostRegistry,
    private readonly maxMissedFlushes = 10,
    readonly scope?: string,
  ) {
    const s = hostSubjects(runId, scope);
    this.subjects = s;
    this.what = scope === undefined ? "this controller" : `rack agent ${scope}`;
    this.inbox = nats.createInbox(s.inbox);
    // Like the rank server's: the connection alone does not keep the controller alive (a job that
    // forgets shutdown() reaches beforeExit); flushes in flight have referenced deadline timers.
    // A rack agent's connection keeps its process alive, as a host agent's does.
    if (scope === undefined) this.unrefConnection();
    nc.subscribe(s.register, (msg) => void this.onRegister(msg));
    nc.subscribe(s.deregister, (msg) => this.onDeregister(msg));
    nc.subscribe(this.inbox, (msg) => this.onFrame(msg));
  }

  private unrefConnection(): void {
    const nc = this.nc.nc;
    if (!unrefWhileIdle(nc))
      warn(
        "transport.nats.unref",
        "this NATS client version does not let rankscope unref its connection: a controller that forgets logger.shutdown() will not end by itself while hosts are served over NATS",
      );
    void (async () => {
      for await (const status of nc.status()) if (status.type === "reconnect") unrefSocket(nc);
    })();
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
  private readonly acks = new PendingHostAcks(() => this.sendAcks());

  /** @internal these answers of a host's agent were logged (or, at a rack, acknowledged from above): one `hostAck` per flush tells every agent. */
  queueAck(hostId: string, seqs: readonly number[], agent: string | undefined): void {
    this.acks.queue(hostId, seqs, agent);
  }

  /** @internal send the acknowledgements queued so far now (before a flush request, so the agents have them first). */
  sendAcks(): void {
    const message = this.acks.take();
    if (message === undefined || this.closing) return;
    try {
      this.nc.publish(this.subjects.flush, encodeHostMessage(this.runId, message));
    } catch (error) {
      // Not a loss: the agents keep those answers and send them again; this controller takes each once.
      reportError(
        "host.ack",
        `${this.what} could not tell its host agents which answers it logged: ${describeError(error)}`,
      );
    }
  }

  /** @internal a host's agent did not answer a flush by its deadline. */
  missedFlush(handle: ServedHost): void {
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
  answered(handle: ServedHost): void {
    this.missed.set(handle.hostId, 0);
    if (this.gone.has(handle.hostId)) void this.readmit(handle);
  }

  private async readmit(handle: ServedHost): Promise<void> {
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
      const taken = takenByHost(this.hosts);
      const logged = loggedByHost(this.hosts);
      this.nc.publish(
        this.subjects.flush,
        encodeHostMessage(this.runId, {
          t: "hostFlush",
          id,
          step,
          deadlineMs,
          server: this.serverId,
          resync,
          ...(taken === undefined ? {} : { taken }),
          ...(logged === undefined ? {} : { logged }),
        }),
        this.inbox,
      );
    }
    return this.currentFlush.id;
  }

  /** Tell the agents this serving process is here: those registered with another one (gone) register again. */
  announce(): void {
    try {
      this.nc.publish(this.subjects.flush, encodeHostMessage(this.runId, { t: "hostHello", server: this.serverId }));
    } catch (error) {
      reportError("host.hello", `${this.what} could not announce itself to its hosts: ${describeError(error)}`);
    }
  }

  /** @internal a request to one agent, answered by "hostReply" within `deadlineMs`. */
  async control(hostId: string, message: HostMessage, deadlineMs: number): Promise<void> {
    let answer: OpenedMessage;
    try {
      answer = await this.nc.request(this.subjects.control(hostId), encodeHostMessage(this.runId, message), deadlineMs);
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
  async close(drain = true): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const [hostId, handle] of this.hosts) {
      this.logger.deregisterRank(handle.rankName, handle);
      handle.close(`was disconnected: ${this.what} closed its NATS connection (host ${hostId})`);
    }
    if (!drain) return;
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
          server: this.serverId,
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
    const states = checkedHostFrame(this.runId, msg.data, from);
    if (states === undefined) return;
    const handle = this.hosts.get(states.host);
    if (handle === undefined) {
      reportIgnored("foreign", `a frame came from host ${states.host}, which is not registered with ${this.what}`);
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
