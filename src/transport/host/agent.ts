/**
 * The host agent: one per host (a machine, a container, a network namespace). The ranks of the
 * host join it instead of the controller (`joinRun({ hostId })` / `RANKSCOPE_HOST_ID`); it
 * registers with the controller once for all of them. At each flush it asks its ranks for their
 * states (one broadcast on the host's subjects, with a deadline shorter than the controller's),
 * merges them exactly (`mergeRankKeyStates`, the controller's own merge) and answers the controller
 * with one binary frame naming the ranks that did not answer. Per-rank backends keep running in
 * the ranks themselves: the agent forwards `init` and `shutdown` to them.
 *
 * The controller's work per flush is then O(hosts × keys) instead of O(ranks × keys). See
 * docs/scale.md for the topology, and how a deeper tree would stack agents.
 */
import { describeError, reportError } from "../../core/diagnostics.js";
import type { OpenedMessage, SealedNats } from "../protocol/sealed-nats.js";
import type { RankInit } from "../../pipeline/rank-handle.js";
import { NatsRankServer, type RankRegistry } from "../controller/nats.js";
import type { NatsAuthOptions } from "../protocol/nats-auth.js";
import { reportIgnored } from "../protocol/messages.js";
import type { RemoteRankHandle } from "../controller/remote-rank.js";
import { FrameMerger } from "../wire/codec.js";
import { roundMs } from "../../core/step-timing.js";
import { hostAnswer } from "./host-answer.js";
import { agentDeadlineMs, type HostMessage, type RankAnswers } from "./messages.js";
import type { HostFlushRequest } from "./upward.js";
import { connectAgent, startAgent, UpwardAgent, type AgentStats } from "./upward-agent.js";

/** Options of `startHostAgent`. */
export interface HostAgentOptions {
  /** The NATS server(s): one URL or several separated by commas (every node of a cluster); `user:password@` or `token@` carry credentials. */
  readonly url: string;
  /** How the agent authenticates (each setting also from its `RANKSCOPE_NATS_*` variable; docs/security.md). */
  readonly auth?: NatsAuthOptions;
  /** The controller's run id. */
  readonly runId: string;
  /** This host's id (letters, digits, `_`, `-`): its ranks join with the same `RANKSCOPE_HOST_ID`. */
  readonly hostId: string;
  /**
   * The rack agent this host's agent registers with (`startRackAgent`'s `rackId`, env
   * `RANKSCOPE_RACK_ID` for the process); default: the controller itself.
   */
  readonly rackId?: string;
  /**
   * The run secret (the controller's `runSecret`): every message is sealed with it. Default: env
   * `RANKSCOPE_RUN_SECRET`; required.
   */
  readonly runSecret?: string;
  /** How long to keep trying to register with the controller (default 30 s). */
  readonly joinDeadlineMs?: number;
  /**
   * A local rank that missed this many flushes in a row is forgotten (default 1,000): named in a
   * warning, counted (`HostAgent.forgottenRanks`), no longer named missing, so the agent's memory
   * stays bounded whatever ranks come and go. A forgotten rank that answers again (it was only
   * stalled) has that answer kept for it (bounded) and is told to register again: nothing lost.
   */
  readonly maxMissedFlushes?: number;
}

/** Flushes a rank may miss in a row before its host agent forgets it. */
const DEFAULT_AGENT_MAX_MISSED = 1000;

/** What one host agent did (for health pages and tests); `incompleteFlushes`: some of the host's ranks did not answer the agent in time. */
export type HostAgentStats = AgentStats;

/** A running host agent. */
export class HostAgent extends UpwardAgent implements RankRegistry {
  private readonly ranks = new Map<string, RemoteRankHandle>();
  private rankInit: RankInit | null = null;
  private readonly merger = new FrameMerger();
  private membersVersion = 1;
  private sentMembersVersion = 0;
  private server: NatsRankServer | undefined;

  /** @internal use `startHostAgent` */
  constructor(
    readonly options: HostAgentOptions,
    nc: SealedNats,
    private readonly runSecret: string,
  ) {
    super("host", nc, options, options.hostId, options.rackId);
  }

  get hostId(): string {
    return this.options.hostId;
  }

  /** Ranks this agent forgot because they missed `maxMissedFlushes` in a row. */
  get forgottenRanks(): number {
    return this.server?.forgottenRanks ?? 0;
  }

  /** Names of the ranks registered with this agent. */
  get rankNames(): string[] {
    return [...this.ranks.keys()];
  }

  /** @internal called by `startHostAgent` */
  async start(): Promise<void> {
    const { runId, hostId } = this.options;
    this.server = new NatsRankServer(
      this.options.url,
      runId,
      this.runSecret,
      this.nc,
      this,
      this.options.maxMissedFlushes ?? DEFAULT_AGENT_MAX_MISSED,
      hostId,
    );
    this.up.start({
      flush: (request, reply) => this.onFlush(request, reply),
      acknowledged: (released) => {
        for (const logged of released) this.acknowledgeRanks(logged.header.took);
      },
      resync: () => (this.sentMembersVersion = 0),
      control: (msg, request) => this.onControl(msg, request),
    });
    await this.up.register();
    // Ranks of this host that joined an earlier agent (this one replaces it) register again.
    this.server.announce();
  }

  async registerRank(handle: RemoteRankHandle): Promise<void> {
    this.ranks.set(handle.rankName, handle);
    this.membersVersion++;
    if (this.rankInit !== null) await handle.init(this.rankInit);
  }

  deregisterRank(rankName: string, handle?: RemoteRankHandle): boolean {
    const current = this.ranks.get(rankName);
    if (current === undefined || (handle !== undefined && current !== handle)) return false;
    this.ranks.delete(rankName);
    this.membersVersion++;
    return true;
  }

  /** After telling the controller (`close`): forget the ranks, close the connection. */
  protected async stop(): Promise<void> {
    await this.server?.close();
  }

  private async onFlush(request: HostFlushRequest, reply: string): Promise<void> {
    const { runId, hostId } = this.options;
    // What the controller took through an agent of this host that is gone: not taken again.
    this.acknowledgeRanks(request.logged?.[hostId], true);
    const deadline = agentDeadlineMs(request.deadlineMs);
    const handles = [...this.ranks.values()];
    // The rank list this answer names, and its version: a rank that joins or is forgotten during
    // the flush changes the version again, so the next answer sends the list again.
    const version = this.membersVersion;
    // No rank yet: perhaps they joined a previous agent and missed the announcement.
    if (handles.length === 0) this.server?.announce();
    const asked = performance.now();
    const answers = await Promise.all(
      handles.map(async (handle) => {
        const answer = await handle.flush(request.step, deadline).catch(() => undefined);
        return { handle, answer, arrivalMs: roundMs(performance.now() - asked) };
      }),
    );
    const sendMembers = this.sentMembersVersion !== version;
    const ours = hostAnswer(answers, {
      runId,
      hostId,
      id: request.id,
      step: request.step,
      seq: this.up.kept.next(),
      agent: this.up.agentId,
      membersVersion: version,
      members: sendMembers ? handles.map((h) => h.rankName) : undefined,
      merger: this.merger,
    });
    // Past the bound, an answer is no longer kept (counted lost): its ranks need not keep theirs.
    const sent = this.answerUp(reply, request, ours, (dropped) => {
      for (const { header } of dropped) this.acknowledgeRanks(header.took);
    });
    if (sent && sendMembers) this.sentMembersVersion = version;
    // The ranks keep their answers until the controller logged this one (`hostAck`); meanwhile the
    // next flush request names them `taken` (`takenSeqs`), so they are not sent again.
  }

  /** Answers of this rank that the agent's unacknowledged answers hold (named `taken` in its flush request). */
  takenSeqs(rankName: string): readonly number[] {
    return this.up.kept.rankSeqs(rankName, this.ranks.get(rankName)?.pid);
  }

  /**
   * The controller logged these answers of the ranks (`took` of a host answer it acknowledged, or
   * `logged` through a predecessor agent): each rank still served by the process that made them is
   * told with the next flush request (`flush.acks`), and takes none of them again (`markTaken`).
   */
  private acknowledgeRanks(took: RankAnswers | undefined, elsewhere = false): void {
    if (took === undefined) return;
    for (const [rankName, { p, s }] of Object.entries(took)) {
      const handle = this.ranks.get(rankName);
      if (handle === undefined || handle.pid !== p) continue;
      if (elsewhere) handle.markTaken(s);
      handle.acknowledgeSeqs(s);
    }
  }

  private async onControl(msg: OpenedMessage, request: HostMessage): Promise<void> {
    const { hostId } = this.options;
    const reply = (id: number, error?: string): void => this.up.reply(msg, id, error);
    if (request.t === "hostInit") {
      this.rankInit = request.init;
      const failed: string[] = [];
      await Promise.all(
        [...this.ranks.values()].map((h) =>
          h.init(request.init).catch((error: unknown) => {
            failed.push(h.rankName);
            reportError(
              `host.rankInit:${h.rankName}`,
              `host agent ${hostId}: rank ${h.rankName} did not start its per-rank backends: ${describeError(error)}`,
            );
          }),
        ),
      );
      reply(
        request.id,
        failed.length === 0 ? undefined : `ranks ${failed.join(", ")} did not start their per-rank backends`,
      );
    } else if (request.t === "hostShutdown") {
      const deadline = agentDeadlineMs(request.deadlineMs);
      await Promise.all([...this.ranks.values()].map((h) => h.shutdown(deadline).catch(() => undefined)));
      reply(request.id);
      await this.close("shut down by the controller");
    } else {
      reportIgnored(
        "malformed",
        `a "${request.t}" message arrived on ${msg.subject}, which takes only "hostInit" and "hostShutdown"`,
      );
    }
  }
}

/**
 * Start the agent of one host: connect to NATS (every cluster URL, so it fails over), serve the
 * host's ranks on the host's subjects, and register with the controller (retrying until it
 * answers or `joinDeadlineMs` passes, then throwing an Error naming the URL and run).
 */
export async function startHostAgent(options: HostAgentOptions): Promise<HostAgent> {
  const { url, nc, runSecret } = await connectAgent(options, {
    call: "startHostAgent",
    role: "host",
    id: "hostId",
    parent: "rackId",
    secretHint: " (its runSecret option or RANKSCOPE_RUN_SECRET)",
  });
  // The agent keeps the URL without credentials (its messages show it) and not the settings.
  const { auth: _settings, ...rest } = options;
  return startAgent(new HostAgent({ ...rest, url }, nc, runSecret));
}
