/**
 * The rack agent: a second (or deeper) level of the tree of docs/scale.md, "A deeper tree". It
 * serves the host agents of its rack the way the controller serves host agents — the same host
 * protocol on its rack's subjects (`rankscope.{run}.rack.{rack}.…`, a `HostServer` with one
 * `StateDecoder` per host) — and answers upwards as a host agent does (`UpwardLink`, one
 * `StateEncoder`): to the controller, or to the rack agent above it (`parentRackId`), so the
 * launcher chooses the depth. At each flush it asks its hosts with a shorter deadline of its own,
 * merges their answers exactly and answers with one frame naming every missing rank with its host.
 *
 * Exactly once, end to end: a host's answer is acknowledged to its agent only once the rack's
 * answer holding it was acknowledged from above; a replacement rack agent is told which host
 * answers the controller took through its predecessor (`hostFlush.logged`) and acknowledges them.
 */
import { describeError, reportError } from "../../core/diagnostics.js";
import type { RankHandle, RankInit, RankSnapshot } from "../../pipeline/rank-handle.js";
import type { NatsAuthOptions } from "../protocol/nats-auth.js";
import type { OpenedMessage, SealedNats } from "../protocol/sealed-nats.js";
import { HostHandle } from "../host/host-handle.js";
import type { KeptHostAnswer } from "../host/kept-host-answers.js";
import { agentDeadlineMs, type HostMessage, type RankAnswers } from "../host/messages.js";
import { HostServer } from "../host/server.js";
import type { HostFlushRequest } from "../host/upward.js";
import { connectAgent, startAgent, UpwardAgent, type AgentStats } from "../host/upward-agent.js";
import { agentNumber, rackAnswer, rackMembers } from "./rack-answer.js";

/** Options of `startRackAgent`. */
export interface RackAgentOptions {
  /** The NATS server(s): one URL or several separated by commas (every node of a cluster); `user:password@` or `token@` carry credentials. */
  readonly url: string;
  /** How the agent authenticates (each setting also from its `RANKSCOPE_NATS_*` variable; docs/security.md, role `rack`). */
  readonly auth?: NatsAuthOptions;
  /** The controller's run id. */
  readonly runId: string;
  /** This rack's id (letters, digits, `_`, `-`; not a host id of the run): its host agents start with the same `RANKSCOPE_RACK_ID`. */
  readonly rackId: string;
  /** The rack agent above this one (a deeper tree); default: this rack answers the controller. */
  readonly parentRackId?: string;
  /** The run secret (the controller's `runSecret`). Default: env `RANKSCOPE_RUN_SECRET`; required. */
  readonly runSecret?: string;
  /** How long to keep trying to register upwards (default 30 s). */
  readonly joinDeadlineMs?: number;
  /**
   * A host whose agent missed this many of the rack's flushes in a row is gone for good (no longer
   * expected; asked again once it registers or answers), as at the controller. Default 10.
   */
  readonly maxMissedFlushes?: number;
}

/** What one rack agent did (for health pages and tests); `incompleteFlushes`: some of the rack's ranks (or whole hosts) did not answer in time. */
export type RackAgentStats = AgentStats;

/** A running rack agent. */
export class RackAgent extends UpwardAgent {
  private readonly handles = new Map<string, HostHandle>();
  private rankInit: RankInit | null = null;
  private server: HostServer | undefined;
  /** By answer number, the host answers it holds: acknowledged to their agents once it is acknowledged from above. */
  private readonly held = new Map<number, Array<[HostHandle, RankSnapshot]>>();
  private membersKey = "";
  private membersVersion = 0;
  private sentMembersVersion = -1;

  /** @internal use `startRackAgent` */
  constructor(
    readonly options: RackAgentOptions,
    nc: SealedNats,
  ) {
    super("rack", nc, options, options.rackId, options.parentRackId);
  }

  get rackId(): string {
    return this.options.rackId;
  }

  /** Ids of the hosts (or racks below) registered with this agent. */
  get hostIds(): string[] {
    return [...this.handles.keys()];
  }

  /** The serving end towards the hosts (their handles, stats). */
  get hosts(): HostServer | undefined {
    return this.server;
  }

  /** @internal called by `startRackAgent` */
  async start(): Promise<void> {
    const { url, runId, rackId, maxMissedFlushes } = this.options;
    this.server = new HostServer(url, runId, this.nc, this, maxMissedFlushes ?? 10, rackId);
    this.up.start({
      flush: (request, reply) => this.onFlush(request, reply),
      acknowledged: (released) => this.release(released),
      resync: () => (this.sentMembersVersion = -1),
      control: (msg, request) => this.onControl(msg, request),
    });
    await this.up.register();
    // Host agents that registered with an earlier agent of this rack (this one replaces it) register again.
    this.server.announce();
  }

  async registerRank(handle: RankHandle): Promise<void> {
    if (!(handle instanceof HostHandle)) throw new TypeError(`rack agent ${this.rackId} serves host agents only`);
    this.handles.set(handle.hostId, handle);
    if (this.rankInit !== null) await handle.init(this.rankInit);
  }

  deregisterRank(_rankName: string, handle?: RankHandle): boolean {
    if (!(handle instanceof HostHandle) || this.handles.get(handle.hostId) !== handle) return false;
    this.handles.delete(handle.hostId);
    return true;
  }

  /** After telling the level above (`close`): stop serving the hosts, close the connection. */
  protected async stop(): Promise<void> {
    await this.server?.close(false);
    try {
      await this.nc.nc.drain();
    } catch {
      await this.nc.nc.close().catch(() => undefined);
    }
  }

  private async onFlush(request: HostFlushRequest, reply: string): Promise<void> {
    const { runId, rackId } = this.options;
    const server = this.server;
    if (server === undefined) return;
    // What was taken above through an earlier agent of this rack: its hosts need not keep it.
    this.acknowledgeLogged(request.logged?.[rackId]);
    server.sendAcks(); // before this flush's request, so the hosts drop those answers first
    const deadline = agentDeadlineMs(request.deadlineMs);
    const handles = [...this.handles.values()].sort((a, b) => (a.hostId < b.hostId ? -1 : a.hostId > b.hostId ? 1 : 0));
    if (handles.length === 0) {
      // No host yet (a replacement whose hosts have not registered again): not answered, so the
      // level above names the rack's ranks missing rather than learning an empty rank list.
      server.announce();
      return;
    }
    const answers = await Promise.all(
      handles.map(async (handle) => ({
        handle,
        answer: await handle.flush(request.step, deadline).catch(() => undefined),
      })),
    );
    const members = rackMembers(handles, rackId);
    const runs = (list: Array<[string, number]>): string => list.map(([name, n]) => `${name}:${n}`).join(",");
    const key = `${runs(members.hosts)}|${runs(members.racks)}|${members.ranks.join(",")}`;
    if (key !== this.membersKey) {
      this.membersKey = key;
      this.membersVersion++;
    }
    const version = this.membersVersion;
    const sendMembers = this.sentMembersVersion !== version;
    const seq = this.up.kept.next();
    const ours = rackAnswer(answers, {
      runId,
      rackId,
      id: request.id,
      step: request.step,
      seq,
      agent: this.up.agentId,
      members,
      membersVersion: version,
      sendMembers,
    });
    this.held.set(
      seq,
      answers.flatMap(({ handle, answer }): Array<[HostHandle, RankSnapshot]> =>
        answer === undefined ? [] : [[handle, answer]],
      ),
    );
    // Past the bound, an answer is no longer kept (counted lost): its hosts need not keep theirs.
    const sent = this.answerUp(reply, request, ours, (dropped) => this.release(dropped));
    if (sent && sendMembers) this.sentMembersVersion = version;
  }

  /** These answers were acknowledged from above (or dropped at the bound): the host answers they hold are acknowledged to their agents. */
  private release(released: readonly KeptHostAnswer[]): void {
    for (const { header } of released) {
      for (const [handle, snapshot] of this.held.get(header.seq) ?? []) handle.acknowledge(snapshot);
      this.held.delete(header.seq);
    }
  }

  /** Host answers taken above through an earlier agent of this rack: acknowledged to the host agents that sent them. */
  private acknowledgeLogged(logged: RankAnswers | undefined): void {
    if (logged === undefined) return;
    for (const [hostId, { p, s }] of Object.entries(logged)) {
      const handle = this.handles.get(hostId);
      const agent = handle?.currentAgent;
      if (agent !== undefined && agentNumber(agent) === p) this.server?.queueAck(hostId, s, agent);
    }
  }

  private async onControl(msg: OpenedMessage, request: HostMessage): Promise<void> {
    const handles = [...this.handles.values()];
    if (request.t === "hostInit") {
      this.rankInit = request.init;
      const failed: string[] = [];
      await Promise.all(
        handles.map((h) =>
          h.init(request.init).catch((error: unknown) => {
            failed.push(h.hostId);
            reportError(
              `rack.hostInit:${h.hostId}`,
              `rack agent ${this.rackId}: host ${h.hostId} did not pass on the backends' config: ${describeError(error)}`,
            );
          }),
        ),
      );
      this.up.reply(
        msg,
        request.id,
        failed.length === 0 ? undefined : `hosts ${failed.join(", ")} did not start their ranks' per-rank backends`,
      );
    } else if (request.t === "hostShutdown") {
      const deadline = agentDeadlineMs(request.deadlineMs);
      await Promise.all(handles.map((h) => h.shutdown(deadline).catch(() => undefined)));
      this.up.reply(msg, request.id);
      await this.close("shut down from above");
    }
  }
}

/**
 * Start the agent of one rack: connect to NATS (every cluster URL, so it fails over), serve its
 * hosts' agents on the rack's subjects, register upwards (the controller, or `parentRackId`'s
 * agent; retrying until it answers or `joinDeadlineMs` passes, then throwing an Error naming the
 * URL and run), and announce itself so host agents of an earlier agent of this rack register again.
 */
export async function startRackAgent(options: RackAgentOptions): Promise<RackAgent> {
  const { url, nc } = await connectAgent(options, {
    call: "startRackAgent",
    role: "rack",
    id: "rackId",
    parent: "parentRackId",
  });
  const { auth: _settings, runSecret: _secret, ...rest } = options;
  return startAgent(new RackAgent({ ...rest, url }, nc));
}
