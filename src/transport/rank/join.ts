/**
 * `joinRun`: make this process (or worker thread) a rank of a running job.
 *
 * Ranks started by `spawnRanks` call it for you, over their parent's channel (a worker's
 * MessagePort or a child's IPC). A process started any other way — a process manager, a cluster
 * scheduler, another machine — calls it with the controller's NATS address and run id, given as
 * options or as environment variables (`RANKSCOPE_NATS_URL`, `RANKSCOPE_RUN_ID`), so a launcher
 * can pass them. On return the rank is registered and, if the controller already ran
 * `initBackends`, its per-rank backends are running.
 */
import { hostname } from "node:os";
import { isMainThread, parentPort } from "node:worker_threads";
import type { RankIdentity } from "../../core/rank-identity.js";
import "../../backends/builtin.js";
import { getCollector } from "../../core/collector.js";
import { describeError, reportError } from "../../core/diagnostics.js";
import { redactUrlCredentials } from "../../core/redact.js";
import { peekProcessWide, setProcessWide } from "../../core/process-wide.js";
import { integerKind, resolveSetting, textKind, type Setting } from "../../core/settings.js";
import { readAssignment } from "../protocol/assignment.js";
import type { NatsAuthOptions } from "../protocol/nats-auth.js";
import { assertSubjectToken, checkIdentity, rankNameFor, shortId } from "../protocol/identity.js";
import { RankAgent } from "./rank-agent.js";
import { moduleUrl, originOf, type RankPolicy } from "./policy.js";
import { runSecretSetting } from "../../core/run-secret.js";
import type { SettingKind } from "../../core/settings.js";
import { RankRuntime } from "../../pipeline/runtime.js";
import { setCurrentRank } from "../../pipeline/current-rank.js";

export { ASSIGNMENT_ENV, readAssignment, type RankAssignment } from "../protocol/assignment.js";

/** Options of `joinRun`. Every field has an environment-variable fallback. */
export interface JoinRunOptions {
  /** The NATS server the controller serves ranks on (env `RANKSCOPE_NATS_URL`); `user:password@` or `token@` carry credentials. */
  natsUrl?: string;
  /** How this rank authenticates to NATS (each setting also from its `RANKSCOPE_NATS_*` variable; docs/security.md). */
  natsAuth?: NatsAuthOptions;
  /** The controller's run id (env `RANKSCOPE_RUN_ID`). */
  runId?: string;
  /** This process's name, e.g. `Trainer` (env `RANKSCOPE_PROCESS_NAME`, default `Rank`). */
  processName?: string;
  /** Global rank (env `RANK`, default 0). */
  rank?: number;
  /** Rank within its replica (env `LOCAL_RANK`, default the rank) and ranks per replica (env `LOCAL_WORLD_SIZE`, default 1 more than the local rank). */
  localRank?: number;
  localWorldSize?: number;
  /** Short id of this replica (env `RANKSCOPE_REPLICA_ID`, default a hash of host name and rank). */
  replicaId?: string;
  /** Overrides `{processName}_{replicaId}_r{localRank}`. */
  rankName?: string;
  /** How long to keep trying to reach the controller (default 30 s, env `RANKSCOPE_JOIN_DEADLINE_MS`). */
  joinDeadlineMs?: number;
  /**
   * Join through the host agent of this host (env `RANKSCOPE_HOST_ID`): the agent gathers and
   * merges the states of its host's ranks and answers the controller once (see docs/scale.md).
   * Over NATS only.
   */
  hostId?: string;
  /**
   * The run secret (the controller's `runSecret`; env `RANKSCOPE_RUN_SECRET`): over NATS every
   * message is sealed with it (docs/security.md). Required over NATS; give it through the
   * environment, never on a command line.
   */
  runSecret?: string;
  /**
   * Modules (paths or file URLs) the controller may ask this rank to import with a `start`
   * request (`spawnRanks` gives its ranks theirs). Default none: no path from the wire is imported.
   */
  modules?: readonly (string | URL)[];
  /**
   * URL origins per-rank backends configured by the controller over NATS may send data to (a
   * wandb `baseUrl`, an otlp `url`), e.g. `["https://wandb.example.com"]` (env
   * `RANKSCOPE_ALLOWED_DESTINATIONS`, comma-separated). Default none: such an option from the
   * wire is refused, and the rank's own settings (`WANDB_BASE_URL`, …) or the defaults apply.
   */
  allowedDestinations?: readonly string[];
}

/** This process's membership in a run. */
export interface RankConnection {
  readonly identity: RankIdentity;
  readonly runId: string;
  /** What carries the messages. */
  readonly carrier: "worker" | "ipc" | "nats";
  /** Deregister from the controller and close the connection (per-rank backends are finished). */
  leave(reason?: string): Promise<void>;
  /** Resolves with the reason once this rank has left the run (it left, or the controller shut it down). */
  readonly closed: Promise<string>;
}

/** The process-wide slot of this process's (or thread's) membership. */
const JOINED = "rankConnection";

/** A text setting of `joinRun`: the option, else its environment variable (the one resolver). */
function joinText(option: string, env: string, given: string | undefined): string | undefined {
  const setting: Setting<string | undefined> = { owner: "joinRun", option, env, kind: textKind(), fallback: undefined };
  return resolveSetting(setting, given);
}

/** A rank-numbering setting: the option, else its torchrun-style environment variable (one resolver for both). */
function rankNumber(option: string, env: string, given: number | undefined): number | undefined {
  return resolveSetting<number | undefined>(
    { owner: "joinRun", option, env, kind: integerKind(0), fallback: undefined },
    given,
  );
}

function identityFrom(options: JoinRunOptions): RankIdentity {
  const processName = joinText("processName", "RANKSCOPE_PROCESS_NAME", options.processName) ?? "Rank";
  const rank = rankNumber("rank", "RANK", options.rank) ?? 0;
  const localRank = rankNumber("localRank", "LOCAL_RANK", options.localRank) ?? rank;
  const localWorldSize = rankNumber("localWorldSize", "LOCAL_WORLD_SIZE", options.localWorldSize) ?? localRank + 1;
  const replicaId =
    joinText("replicaId", "RANKSCOPE_REPLICA_ID", options.replicaId) ?? shortId(`${hostname()}:${rank - localRank}`);
  const rankName = options.rankName ?? rankNameFor(processName, replicaId, localRank);
  return checkIdentity({ rank, rankName, processName, localRank, localWorldSize });
}

/**
 * Join the run as a rank. Resolves once the controller has registered this rank (and sent it the
 * backend config when it has one). Throws an Error naming the address when the controller cannot
 * be reached within the join deadline, and a TypeError for invalid options.
 */
export function joinRun(options: JoinRunOptions = {}): Promise<RankConnection> {
  // One membership per process (or thread): a second call, even a concurrent one, gets the first.
  const existing = peekProcessWide<Promise<RankConnection>>(JOINED);
  if (existing !== undefined) return existing;
  const forget = (): void => {
    if (peekProcessWide(JOINED) === joining) setProcessWide(JOINED, undefined);
  };
  const joining = join(options, forget);
  setProcessWide(JOINED, joining);
  joining.catch(forget);
  return joining;
}

async function join(options: JoinRunOptions, forget: () => void): Promise<RankConnection> {
  const assigned = readAssignment();
  const identity = assigned !== undefined ? checkIdentity(assigned.identity) : identityFrom(options);
  const natsUrl =
    assigned !== undefined ? assigned.natsUrl : joinText("natsUrl", "RANKSCOPE_NATS_URL", options.natsUrl);
  const carrier = assigned?.carrier ?? (natsUrl !== undefined ? "nats" : undefined);
  if (carrier === undefined) {
    throw new Error(
      "joinRun(): no controller to join: pass { natsUrl, runId } (or set RANKSCOPE_NATS_URL and RANKSCOPE_RUN_ID), " +
        "or start this process with spawnRanks()",
    );
  }
  const runId = assigned?.runId ?? joinText("runId", "RANKSCOPE_RUN_ID", options.runId);
  if (runId === undefined)
    throw new Error(
      `joinRun(): a run id is needed with natsUrl ${redactUrlCredentials(natsUrl ?? "")}: pass { runId } or set RANKSCOPE_RUN_ID to the controller's runId`,
    );
  assertSubjectToken("runId", runId);
  const joinDeadlineMs = resolveSetting(
    {
      owner: "joinRun",
      option: "joinDeadlineMs",
      env: "RANKSCOPE_JOIN_DEADLINE_MS",
      kind: integerKind(1),
      fallback: 30_000,
    },
    options.joinDeadlineMs,
  );

  setCurrentRank(identity);
  const runtime = new RankRuntime(identity, getCollector());
  let leave: (reason: string) => Promise<void>;
  // Bound below, once the connection exists (the agent needs this callback first).
  const self: { connection?: RankConnection } = {};
  const onShutdown = (): void => {
    void self.connection?.leave("shut down by the controller").finally(() => exitSoon());
  };
  const agent = new RankAgent({ runId, runtime, onShutdown, policy: policyFor(carrier, assigned?.module, options) });

  if (carrier === "worker") leave = joinOverPort(agent);
  else if (carrier === "ipc") leave = joinOverIpc(agent);
  else leave = await joinNats(agent, natsUrl, runId, joinDeadlineMs, assigned?.runSecret, options);
  const connection = connectionOf(identity, runId, carrier, runtime, leave, forget);
  self.connection = connection;
  return connection;
}

/** Join over NATS: the rank's credentials and run secret, and its host agent's subjects when it has a host id. */
async function joinNats(
  agent: RankAgent,
  natsUrl: string | undefined,
  runId: string,
  joinDeadlineMs: number,
  assignedSecret: string | undefined,
  options: JoinRunOptions,
): Promise<(reason: string) => Promise<void>> {
  if (natsUrl === undefined) throw new Error("joinRun(): carrier nats needs a natsUrl");
  const [{ joinOverNats }, { resolveNatsAuth }] = await Promise.all([
    import("./nats.js"),
    import("../protocol/nats-auth.js"),
  ]);
  const auth = resolveNatsAuth("joinRun", natsUrl, options.natsAuth);
  // Scale edit: with a host id, the rank joins its host agent's subjects (docs/scale.md).
  const hostId = joinText("hostId", "RANKSCOPE_HOST_ID", options.hostId);
  if (hostId !== undefined && hostId !== "") assertSubjectToken("hostId", hostId);
  const runSecret = assignedSecret ?? resolveSetting(runSecretSetting("joinRun"), options.runSecret);
  if (runSecret === undefined) {
    throw new Error(
      `joinRun(): run ${runId}'s messages are sealed with its run secret: pass { runSecret } or set RANKSCOPE_RUN_SECRET to the controller's (its runSecret option or RANKSCOPE_RUN_SECRET)`,
    );
  }
  return joinOverNats(agent, {
    url: auth.url,
    auth,
    runId,
    joinDeadlineMs,
    runSecret,
    ...(hostId === undefined || hostId === "" ? {} : { scope: hostId }),
  });
}

/** The joined rank's connection: leaving (once) finishes its per-rank backends, then leaves the carrier. */
function connectionOf(
  identity: RankIdentity,
  runId: string,
  carrier: RankConnection["carrier"],
  runtime: RankRuntime,
  leave: (reason: string) => Promise<void>,
  forget: () => void,
): RankConnection {
  let left = false;
  let markClosed: (reason: string) => void = () => undefined;
  const closed = new Promise<string>((resolve) => (markClosed = resolve));
  return {
    identity,
    runId,
    carrier,
    closed,
    leave: async (reason = "left the run") => {
      if (left) return;
      left = true;
      forget();
      try {
        await runtime.shutdown();
      } catch (error) {
        reportError(
          "rank.shutdown",
          `rank ${identity.rankName}: finishing per-rank backends failed: ${describeError(error)}`,
        );
      }
      await leave(reason);
      markClosed(reason);
    },
  };
}

/** URL origins, comma-separated in the environment; every entry must be a URL. */
const originsKind: SettingKind<readonly string[]> = {
  valid: "URLs such as https://wandb.example.com (comma-separated in the environment)",
  fromOption: (v) => {
    if (!Array.isArray(v)) return undefined;
    const list: readonly unknown[] = v;
    const origins = list.map((u) => (typeof u === "string" ? originOf(u) : undefined));
    return origins.every((o): o is string => o !== undefined) ? origins : undefined;
  },
  fromEnv: (raw) => {
    const origins = raw.split(",").map((u) => originOf(u.trim()));
    return origins.every((o): o is string => o !== undefined) ? origins : undefined;
  },
};

/**
 * What this rank's own side allows the wire (never read from the wire): the module it was started
 * with and those of `options.modules`; over a worker's port or IPC (the channel of the process that
 * started it) per-rank configs are taken as sent, over NATS only to allowed destinations.
 */
function policyFor(
  carrier: RankConnection["carrier"],
  assignedModule: string | undefined,
  options: JoinRunOptions,
): RankPolicy {
  const modules = [
    ...(assignedModule === undefined ? [] : [moduleUrl(assignedModule)]),
    ...(options.modules ?? []).map((m) => moduleUrl(m)),
  ];
  const destinations = resolveSetting(
    {
      owner: "joinRun",
      option: "allowedDestinations",
      env: "RANKSCOPE_ALLOWED_DESTINATIONS",
      kind: originsKind,
      fallback: [],
    },
    options.allowedDestinations,
  );
  return { modules, trustInit: carrier !== "nats", destinations };
}

/** A spawned rank exits shortly after shutdown; a ref'd timer so leftover user timers cannot keep it. */
function exitSoon(): void {
  if (!isMainThread || readAssignment() !== undefined) setTimeout(() => process.exit(0), 50);
}

function joinOverPort(agent: RankAgent): (reason: string) => Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error("joinRun(): carrier worker needs to run in a worker thread started by spawnRanks");
  const send = (text: string): void => port.postMessage(text);
  // A frame is copied, not transferred: the rank keeps its last answers to send again.
  const sendFrame = (frame: Uint8Array): void => port.postMessage(frame);
  port.on("message", (data: unknown) => void agent.receive(data, send, "the controller (worker port)", sendFrame));
  send(agent.registerMessage());
  return async (reason) => {
    send(agent.deregisterMessage(reason));
    port.removeAllListeners("message");
    port.close();
  };
}

function joinOverIpc(agent: RankAgent): (reason: string) => Promise<void> {
  if (process.send === undefined)
    throw new Error("joinRun(): carrier ipc needs a process started by spawnRanks (it has no IPC channel)");
  const send = (text: string): void => {
    if (process.connected) process.send?.(text);
  };
  // Bytes cross IPC as they are with the "advanced" serialization spawnRanks starts ranks with
  // (under "json" a frame would arrive as an object: such a parent never asks for frames).
  const sendFrame = (frame: Uint8Array): void => {
    if (process.connected) process.send?.(frame);
  };
  process.on("message", (data: unknown) => void agent.receive(data, send, "the controller (IPC)", sendFrame));
  send(agent.registerMessage());
  return async (reason) => {
    send(agent.deregisterMessage(reason));
    process.removeAllListeners("message");
    if (process.connected) process.disconnect();
  };
}
