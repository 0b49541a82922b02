/**
 * `spawnRanks`: start N ranks of a module as worker threads or child processes, in replicas, and
 * register each with the controller.
 *
 * ```ts
 * const logger = await getOrCreateMetricLogger({ processName: "Controller" });
 * await logger.initBackends({ console: { loggingMode: "per_rank_reduce" } });
 * const actors = await spawnRanks({ module: "./my-actor.ts", replicas: 2, ranksPerReplica: 2, processName: "MyActor" });
 * await actors.fanout("myFn");       // call an exported function on every rank
 * await logger.flush(0);
 * await logger.shutdown();           // stops the ranks too
 * ```
 *
 * Each rank is named `{processName}_{replicaId}_r{localRank}`. It talks to the controller over its
 * parent's channel (MessagePort / IPC), or over NATS when `nats` is given. A rank that exits is
 * deregistered and counted as lost, and `fanout` goes on with the live ranks; `shutdown` kills any rank that does not stop by its deadline, and ranks are killed
 * when this process exits, so none is ever left running.
 */
import { isAbsolute, resolve as resolvePath } from "node:path";
import { pathToFileURL } from "node:url";
import type { RankIdentity } from "../../core/rank-identity.js";
import { warn } from "../../core/diagnostics.js";
import { defaultLogger, type RankController } from "../../pipeline/default-logger.js";
import { rankNameFor, shortId, checkIdentity } from "../protocol/identity.js";
import type { RankAssignment } from "../protocol/assignment.js";
import type { NatsAuthOptions } from "../protocol/nats-auth.js";
import { RemoteRankHandle } from "./remote-rank.js";
import { RankGroup } from "./rank-group.js";
import { childColorEnv } from "../../textlog/color.js";
import {
  entryUrl,
  needsTsx,
  registerExitDrain,
  startError,
  startProcess,
  startThread,
  type ChannelAnswers,
  type Starting,
} from "./rank-start.js";

export { RankGroup, type RankCallResult } from "./rank-group.js";

/** A controller-side server ranks can join over (NATS: `serveRanksOverNats`). */
export interface RankServer {
  readonly runId: string;
  /** The server's URL, without credentials. */
  readonly url: string;
  /** The run secret messages are sealed with: `spawnRanks` hands it to the ranks it starts (in their environment). */
  readonly runSecret: string;
  /** The environment a spawned rank needs to connect (credentials, TLS files): `natsAuth`'s, else the server's own. */
  rankEnv(natsAuth?: NatsAuthOptions): Readonly<Record<string, string>>;
  /** The handle of a rank once it registered through this server. */
  /** `signal` aborts the wait (its timer is cleared; the promise then never settles). */
  waitForRank(rankName: string, deadlineMs: number, signal?: AbortSignal): Promise<RemoteRankHandle>;
}

/** Options of `spawnRanks`. */
export interface SpawnRanksOptions {
  /** The rank module (path or file URL; relative paths resolve from the current directory). Its top level runs in every rank at start; its exported functions can be called with `fanout`/`call`. */
  module: string | URL;
  /** Replicas (default 1) and ranks per replica (default 1). */
  replicas?: number;
  ranksPerReplica?: number;
  /** `process` (default): child processes; `thread`: worker threads of this process. */
  kind?: "process" | "thread";
  /** Name of the ranks' process (actor), e.g. `Trainer` (default `Rank`). */
  processName?: string;
  /** Extra environment variables of the ranks (a thread gets its own copy of this process's environment plus these). */
  env?: Readonly<Record<string, string>>;
  /** The controller (default: `getOrCreateMetricLogger()`). */
  logger?: RankController;
  /** Carry messages over NATS instead of the parent channel (from `serveRanksOverNats`). */
  nats?: RankServer;
  /**
   * With `nats`: how the spawned ranks authenticate to NATS, e.g. a user with the rank role's
   * permissions (docs/security.md). Default: the controller's own settings. TLS settings not named
   * here are the controller's. Handed to each rank in its environment, never on its command line.
   */
  natsAuth?: NatsAuthOptions;
  /** How long a rank may take to start and register (default 30 s). */
  startDeadlineMs?: number;
  /**
   * `immediate` (default): ranks' stdout lines are forwarded to this process's stdout as they
   * arrive. `ordered`: they are held until `syncOutput()`, which prints them rank by rank (readable
   * per-rank tables; streams then appear at each sync).
   */
  output?: "immediate" | "ordered";
  /**
   * How ranks over their parent's channel (without `nats`) answer flushes: `frames` (default),
   * binary wire frames the controller merges from their columns (docs/ranks.md, "Flush answers");
   * `json`, JSON snapshots, as before frames — to compare the two.
   */
  answers?: ChannelAnswers;
}

/** Replica indexes handed out per process name, so two groups of one name get distinct ids. */
const replicaCounters = new Map<string, number>();

/**
 * Rank numbers handed out per controller: a job's ranks are numbered across its spawnRanks calls
 * (a group of trainers 0–3, then a group of rollout workers 4–7), so every rank of a job has a
 * number of its own in every per-rank sink (docs/DESIGN.md, "Identity").
 */
const nextRanks = new WeakMap<RankController, number>();

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 1)
    throw new TypeError(`spawnRanks: ${name} must be a positive integer, got ${String(value)}`);
  return v;
}

function moduleHref(module: string | URL): string {
  if (module instanceof URL) return module.href;
  if (module.startsWith("file:")) return module;
  return pathToFileURL(isAbsolute(module) ? module : resolvePath(process.cwd(), module)).href;
}

/**
 * Start `replicas × ranksPerReplica` ranks of `module` and register each with the controller.
 * Resolves when every rank has registered, received the backend config (if `initBackends` ran)
 * and imported the module. If any rank fails to start, every rank of the call is stopped and the
 * error names the rank and what it printed.
 */
export async function spawnRanks(options: SpawnRanksOptions): Promise<RankGroup> {
  const { replicas, ranksPerReplica, kind, answers } = checkSpawnOptions(options);
  const processName = options.processName ?? "Rank";
  const logger = options.logger ?? (await defaultLogger());
  const startDeadlineMs = options.startDeadlineMs ?? 30_000;
  // Credentials reach a rank in its environment (readable by its user only), never its command line.
  // A rank's output is forwarded to this process's stdout: it colours its text logs when this process does.
  const env = { ...childColorEnv(), ...(options.nats?.rankEnv(options.natsAuth) ?? {}), ...options.env };
  const module = moduleHref(options.module);
  const entry = entryUrl();
  const tsx = needsTsx(entry, module);
  registerExitDrain();

  const identities = nextIdentities(processName, replicas, ranksPerReplica, logger);
  const runId = options.nats?.runId ?? logger.runId;
  const hold = options.output === "ordered";
  const starting = identities.map((identity) => {
    const assignment: RankAssignment = {
      identity,
      runId,
      module,
      carrier: options.nats !== undefined ? "nats" : kind === "thread" ? "worker" : "ipc",
      ...(options.nats !== undefined ? { natsUrl: options.nats.url, runSecret: options.nats.runSecret } : {}),
    };
    return kind === "thread"
      ? startThread(assignment, entry, tsx, env, hold, answers)
      : startProcess(assignment, entry, tsx, env, hold, answers);
  });
  await startUp(starting, options.nats, logger, module, startDeadlineMs);
  for (const rank of starting) {
    const { identity, handle } = rank.spawned;
    void rank.exited.then((reason) => {
      if (logger.deregisterRank(identity.rankName, handle) && !handle.shutdownRequested) {
        warn(
          `rank.exited:${identity.rankName}`,
          `rank ${identity.rankName} ${reason}; it is no longer expected at flush (counted as lost: rankscope/ranks_lost)`,
        );
        logger.rankLost(identity, reason, handle.host);
      }
    });
  }
  return new RankGroup(
    starting.map((s) => s.spawned),
    logger,
  );
}

/** `spawnRanks`'s options checked, with their defaults: a TypeError says which is wrong and what is valid. */
function checkSpawnOptions(options: SpawnRanksOptions): {
  replicas: number;
  ranksPerReplica: number;
  kind: "process" | "thread";
  answers: ChannelAnswers;
} {
  if (
    options === null ||
    typeof options !== "object" ||
    (typeof options.module !== "string" && !(options.module instanceof URL))
  ) {
    throw new TypeError(
      `spawnRanks takes { module, replicas, ranksPerReplica, kind, processName }, with module a path or file URL`,
    );
  }
  const replicas = positiveInteger("replicas", options.replicas, 1);
  const ranksPerReplica = positiveInteger("ranksPerReplica", options.ranksPerReplica, 1);
  const kind = options.kind ?? "process";
  if (kind !== "process" && kind !== "thread")
    throw new TypeError(`spawnRanks: kind must be "process" or "thread", got ${JSON.stringify(kind)}`);
  if (options.output !== undefined && options.output !== "immediate" && options.output !== "ordered") {
    throw new TypeError(`spawnRanks: output must be "immediate" or "ordered", got ${JSON.stringify(options.output)}`);
  }
  if (kind === "thread" && options.nats !== undefined)
    throw new TypeError(`spawnRanks: NATS carries ranks of other processes; use kind "process" with nats`);
  const answers = options.answers ?? "frames";
  if (answers !== "frames" && answers !== "json")
    throw new TypeError(`spawnRanks: answers must be "frames" or "json", got ${JSON.stringify(answers)}`);
  if (options.natsAuth !== undefined && options.nats === undefined)
    throw new TypeError("spawnRanks: natsAuth goes with nats (the ranks' NATS credentials)");
  return { replicas, ranksPerReplica, kind, answers };
}

/** The identities of the next `replicas × ranksPerReplica` ranks of `processName` under `logger` (replica and rank numbers continue from earlier calls). */
function nextIdentities(
  processName: string,
  replicas: number,
  ranksPerReplica: number,
  logger: RankController,
): RankIdentity[] {
  const firstReplica = replicaCounters.get(processName) ?? 0;
  replicaCounters.set(processName, firstReplica + replicas);
  const firstRank = nextRanks.get(logger) ?? 0;
  nextRanks.set(logger, firstRank + replicas * ranksPerReplica);
  const identities: RankIdentity[] = [];
  for (let r = 0; r < replicas; r++) {
    const replicaId = shortId(`${processName}:${firstReplica + r}`);
    for (let local = 0; local < ranksPerReplica; local++) {
      identities.push(
        checkIdentity({
          rank: firstRank + r * ranksPerReplica + local,
          rankName: rankNameFor(processName, replicaId, local),
          processName,
          localRank: local,
          localWorldSize: ranksPerReplica,
        }),
      );
    }
  }
  return identities;
}

/**
 * Take the started ranks through registration (with the controller, or the NATS server's handles)
 * and the module's import, every rank one phase at a time. A rank that exits meanwhile fails the
 * start: then every rank of the call is deregistered and shut down, and the error is thrown.
 */
async function startUp(
  starting: readonly Starting[],
  nats: SpawnRanksOptions["nats"],
  logger: RankController,
  module: string,
  startDeadlineMs: number,
): Promise<void> {
  let startedUp = false;
  // Rejects when a rank exits before the start is over (and never settles after that).
  const exitedEarly = starting.map((rank) =>
    rank.exited.then(async (reason) =>
      startedUp ? new Promise<never>(() => undefined) : Promise.reject(await startError(rank.spawned, reason)),
    ),
  );
  /** `step` for every rank, failing fast when a rank exits meanwhile; settles every rank before rejecting. */
  const phase = async <T>(step: (rank: Starting) => Promise<T>): Promise<T[]> => {
    const results = await Promise.allSettled(
      starting.map((rank, i) => Promise.race([step(rank), exitedEarly[i] as Promise<never>])),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed !== undefined) throw failed.reason;
    return results.map((r) => (r as PromiseFulfilledResult<T>).value);
  };
  try {
    const handles = await phase((rank) =>
      nats !== undefined
        ? nats.waitForRank(rank.spawned.identity.rankName, startDeadlineMs, rank.gone.signal)
        : rank.registered(startDeadlineMs, rank.gone.signal),
    );
    if (nats !== undefined) {
      // The NATS server made and registered the handles; liveness still comes from the child process.
      starting.forEach((rank, i) => {
        const handle = handles[i] as RemoteRankHandle;
        rank.spawned.handle = handle;
        void rank.exited.then((reason) => handle.close(reason));
      });
    } else {
      // Registered in rank order, so the controller lists (and merges) ranks in a stable order.
      await phase((rank) => logger.registerRank(rank.spawned.handle));
    }
    await phase((rank) => rank.spawned.handle.start(module, startDeadlineMs));
    startedUp = true;
  } catch (error) {
    await Promise.all(
      starting.map(({ spawned: s }) => (logger.deregisterRank(s.identity.rankName), s.handle.shutdown(1000))),
    );
    throw error;
  }
}
