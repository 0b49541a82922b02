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
import { endingBySignal, untilTheEnd } from "../../core/lifecycle.js";
import { randomUUID } from "node:crypto";
import { isAbsolute, resolve as resolvePath } from "node:path";
import { pathToFileURL } from "node:url";
import type { RankIdentity } from "../../core/rank-identity.js";
import { warn } from "../../core/diagnostics.js";
import { defaultLogger, type RankController } from "../../pipeline/default-logger.js";
import { rankNameFor, shortId, checkIdentity } from "../protocol/identity.js";
import type { RankAssignment } from "../protocol/assignment.js";
import type { NatsAuthOptions } from "../protocol/nats-auth.js";
import { RankClosedError, RemoteRankHandle, waitAtMost } from "./remote-rank.js";
import { childColorEnv } from "../../textlog/color.js";
import {
  entryUrl,
  needsTsx,
  registerExitDrain,
  startError,
  startProcess,
  startThread,
  type ChannelAnswers,
  type SpawnedRank,
  type Starting,
} from "./rank-start.js";

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

/**
 * One rank's outcome of `RankGroup.fanoutSettled`, as `Promise.allSettled` words it: `fulfilled`
 * with the value its function returned, or `rejected` with why (`lost`: the rank went away).
 */
export type RankCallResult<T = unknown> =
  | { readonly rank: number; readonly rankName: string; readonly status: "fulfilled"; readonly value: T }
  | {
      readonly rank: number;
      readonly rankName: string;
      readonly status: "rejected";
      /** What the call failed with: a `RankClosedError` for a rank that went away, else the rank's error or a `RankDeadlineError`. */
      readonly reason: unknown;
      /** True when the rank went away (its process or thread ended, its carrier closed) before it answered. */
      readonly lost: boolean;
    };

/** The ranks one `spawnRanks` call started. */
export class RankGroup {
  /** @internal */
  constructor(
    private readonly spawned: readonly SpawnedRank[],
    private readonly logger: RankController,
  ) {}

  /** Who the ranks are, in rank order. */
  get ranks(): readonly RankIdentity[] {
    return this.spawned.map((s) => s.identity);
  }

  get rankNames(): string[] {
    return this.spawned.map((s) => s.identity.rankName);
  }

  /** Ranks still running. */
  get liveRankNames(): string[] {
    return this.spawned.filter((s) => s.handle.closed === null).map((s) => s.identity.rankName);
  }

  /** The process id of a rank (child processes only). */
  pid(rankName: string): number | undefined {
    return this.find(rankName).child?.pid;
  }

  /**
   * Call an exported function of the rank module on every live rank, with JSON-serialisable
   * arguments (Forge's `fanout`). Resolves with the results of the ranks that answered, in rank
   * order. A rank that goes away before it answers (its process or thread ends, its carrier
   * closes: a `RankClosedError`) is left out of the results instead of failing the call, so a
   * training loop outlives a lost rank; the loss is never silent: it is warned about, counted at
   * every later flush (`FlushResult.lostRanks`, `rankscope/ranks_lost`), raised as a `rank_lost`
   * alert, and later calls go to the live ranks only. `fanoutSettled` says which rank gave what.
   * Rejects naming the rank when a call fails otherwise (the function threw, no answer by the
   * deadline), and with a `RankClosedError` when no rank of the group is left. Once the process
   * is ending by a signal rankscope drains, it never settles (the loop parks until the process
   * ends; docs/lifecycle.md).
   */
  async fanout<T = unknown>(fn: string, ...args: unknown[]): Promise<T[]> {
    if (endingBySignal()) return untilTheEnd();
    const settled = await quietWhileEnding(this.callEvery<T>(fn, args));
    const values: T[] = [];
    for (const result of settled) {
      if (result.status === "fulfilled") values.push(result.value);
      else if (!result.lost) throw result.reason;
    }
    if (values.length === 0 && settled.every((r) => r.status === "rejected"))
      throw new RankClosedError(
        `fanout("${fn}"): no rank of this group is left (${settled.map((r) => r.rankName).join(", ")} went away)`,
      );
    return values;
  }

  /**
   * `fanout` settled per rank, like `Promise.allSettled`: one result for every rank of the group,
   * in rank order (the same order as `ranks`), each `fulfilled` with the rank's `value` or
   * `rejected` with its `reason`. `lost` is true for a rank that went away (before or during the
   * call: a `RankClosedError`). Never rejects for one rank's failure. Once the process is ending by
   * a signal rankscope drains, it never settles (as `fanout`).
   */
  async fanoutSettled<T = unknown>(fn: string, ...args: unknown[]): Promise<RankCallResult<T>[]> {
    if (endingBySignal()) return untilTheEnd();
    return quietWhileEnding(this.callEvery<T>(fn, args));
  }

  /**
   * Call an exported function on one rank. Rejects with a `RankClosedError` when that rank went
   * away (before or during the call), naming it and why.
   */
  async call<T = unknown>(rankName: string, fn: string, ...args: unknown[]): Promise<T> {
    if (endingBySignal()) return untilTheEnd();
    return (await quietWhileEnding(this.find(rankName).handle.call(fn, args))) as T;
  }

  /** `fn` on every rank still running, settled per rank; ranks gone before the call are `lost` at once. */
  private callEvery<T>(fn: string, args: readonly unknown[]): Promise<RankCallResult<T>[]> {
    return Promise.all(
      this.spawned.map(async ({ identity: { rank, rankName }, handle }): Promise<RankCallResult<T>> => {
        try {
          return { rank, rankName, status: "fulfilled", value: (await handle.call(fn, args)) as T };
        } catch (reason) {
          return { rank, rankName, status: "rejected", reason, lost: reason instanceof RankClosedError };
        }
      }),
    );
  }

  /**
   * Wait until everything the live ranks wrote to stdout so far has been forwarded here. Their
   * per-rank console output is written by other processes; this makes it appear before what this
   * process prints next. With `output: "ordered"`, prints the held lines rank by rank.
   */
  async syncOutput(deadlineMs = 5000): Promise<void> {
    const live = this.spawned.filter((s) => s.handle.closed === null);
    await Promise.all(
      live.map(async (s) => {
        const { marker, arrived } = s.stdout.expect(randomUUID());
        try {
          await s.handle.sync(marker, deadlineMs);
          await waitAtMost(arrived, deadlineMs);
        } catch {
          // A rank that died meanwhile has nothing more to say.
        }
      }),
    );
    for (const s of this.spawned) s.stdout.release();
  }

  /** Stop these ranks (deregistering them), killing any that does not stop within the deadline. */
  async stop(deadlineMs = 5000): Promise<void> {
    await Promise.all(
      this.spawned.map(async (s) => {
        this.logger.deregisterRank(s.identity.rankName);
        await s.handle.shutdown(deadlineMs);
      }),
    );
  }

  private find(rankName: string): SpawnedRank {
    const found = this.spawned.find((s) => s.identity.rankName === rankName);
    if (found === undefined)
      throw new Error(`no rank named "${rankName}" in this group; ranks: ${this.rankNames.join(", ")}`);
    return found;
  }
}

/**
 * A call made before a signal that fails because the lifecycle is stopping the ranks never settles
 * either: the process is about to end by that signal, and the user's loop must not see a rejection
 * (it would become an uncaught exception and change how the process ends).
 */
function quietWhileEnding<T>(call: Promise<T>): Promise<T> {
  return call.catch((error: unknown) => {
    if (endingBySignal()) return untilTheEnd<T>();
    throw error;
  });
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
