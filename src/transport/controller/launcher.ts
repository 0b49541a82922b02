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
 * deregistered; `shutdown` kills any rank that does not stop by its deadline, and ranks are killed
 * when this process exits, so none is ever left running.
 */
import { endingReason, registerDrain } from "../../core/lifecycle.js";
import { fork, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { isAbsolute, resolve as resolvePath } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Worker } from "node:worker_threads";
import { isTypeScript, siblingModule, startModuleWorker, tsxUrl } from "../../core/module-worker.js";
import type { RankIdentity } from "../../core/rank-identity.js";
import { warn } from "../../core/diagnostics.js";
import { getOrCreateMetricLogger, type MetricLogger } from "../../controller/metric-logger.js";
import { rankNameFor, shortId, checkIdentity } from "../protocol/identity.js";
import { ASSIGNMENT_ENV, type RankAssignment } from "../protocol/assignment.js";
import { OutputForwarder } from "./output.js";
import { decodeProtocolMessage, reportIgnored, type RankMessage } from "../protocol/messages.js";
import { RemoteRankHandle, waitAtMost, type RankCarrier } from "./remote-rank.js";

/** A controller-side server ranks can join over (NATS: `serveRanksOverNats`). */
export interface RankServer {
  readonly runId: string;
  readonly url: string;
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
  logger?: MetricLogger;
  /** Carry messages over NATS instead of the parent channel (from `serveRanksOverNats`). */
  nats?: RankServer;
  /** How long a rank may take to start and register (default 30 s). */
  startDeadlineMs?: number;
  /**
   * `immediate` (default): ranks' stdout lines are forwarded to this process's stdout as they
   * arrive. `ordered`: they are held until `syncOutput()`, which prints them rank by rank (readable
   * per-rank tables; streams then appear at each sync).
   */
  output?: "immediate" | "ordered";
}

/** One started rank. */
interface SpawnedRank {
  readonly identity: RankIdentity;
  handle: RemoteRankHandle;
  readonly child?: ChildProcess;
  readonly worker?: Worker;
  readonly stdout: OutputForwarder;
  readonly stderr: OutputForwarder;
}

/** The ranks one `spawnRanks` call started. */
export class RankGroup {
  /** @internal */
  constructor(
    private readonly spawned: readonly SpawnedRank[],
    private readonly logger: MetricLogger,
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
   * arguments (Forge's `fanout`). Resolves with the results in rank order; rejects naming the rank
   * if any call fails.
   */
  async fanout<T = unknown>(fn: string, ...args: unknown[]): Promise<T[]> {
    const live = this.spawned.filter((s) => s.handle.closed === null);
    return (await quietWhileEnding(Promise.all(live.map((s) => s.handle.call(fn, args))))) as T[];
  }

  /** Call an exported function on one rank. */
  async call<T = unknown>(rankName: string, fn: string, ...args: unknown[]): Promise<T> {
    return (await quietWhileEnding(this.find(rankName).handle.call(fn, args))) as T;
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
    if (found === undefined) throw new Error(`no rank named "${rankName}" in this group; ranks: ${this.rankNames.join(", ")}`);
    return found;
  }
}

/**
 * A call that fails because the lifecycle is stopping the ranks at a signal never settles: the
 * process is about to end by that signal, and the user's loop must not see a rejection (it would
 * become an uncaught exception and change how the process ends).
 */
function quietWhileEnding<T>(call: Promise<T>): Promise<T> {
  return call.catch((error: unknown) => {
    const reason = endingReason();
    if (reason === "SIGINT" || reason === "SIGTERM") return new Promise<T>(() => undefined);
    throw error;
  });
}

/**
 * Reading a worker's piped stdout/stderr refs the worker's internal port until the stream ends
 * (Node's `ReadableWorkerStdio`), so an idle thread rank would keep the controller alive even
 * after `worker.unref()`, and a job that forgot `shutdown()` would never reach `beforeExit`. Node
 * has no public switch for it; the stream's own flag (`kIncrementsPortRef`) is turned off when
 * present. Where it is not (another Node version), thread ranks keep the process alive as before
 * and `shutdown()` ends them; child-process ranks are unaffected.
 */
function readWithoutKeepingAlive(stream: NodeJS.ReadableStream): void {
  const flag = Object.getOwnPropertySymbols(stream).find((s) => s.description === "kIncrementsPortRef");
  if (flag !== undefined) (stream as unknown as Record<symbol, unknown>)[flag] = false;
}

/** Replica indexes handed out per process name, so two groups of one name get distinct ids. */
const replicaCounters = new Map<string, number>();

/** Every child process started here, stopped if this process exits without shutting them down. */
const liveChildren = new Set<ChildProcess>();
let exitDrainRegistered = false;

/**
 * A drain of the process lifecycle (src/core/lifecycle.ts): at exit, children still alive (the
 * logger's shutdown did not stop them, or the process ended by `process.exit()` or an uncaught
 * exception) get SIGTERM — their own lifecycle writes what they hold, within their drain deadline,
 * and ends them; one that ignores it exits when its IPC channel closes (rank-entry).
 */
function registerExitDrain(): void {
  if (exitDrainRegistered) return;
  exitDrainRegistered = true;
  registerDrain({
    name: "rank processes",
    stage: "logger",
    exit: () => {
      for (const child of liveChildren) child.kill("SIGTERM");
    },
  });
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 1) throw new TypeError(`spawnRanks: ${name} must be a positive integer, got ${String(value)}`);
  return v;
}

/** Where the rank entry lives: the sibling `.js` in dist, `.ts` when running from source. */
function entryUrl(): URL {
  return siblingModule(import.meta.url, "../rank/rank-entry");
}

function needsTsx(entry: URL, module: string): boolean {
  return isTypeScript(entry) || /\.[cm]?tsx?$/.test(module);
}

const RANK_MODULE = "spawnRanks: the rank module";

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
  if (options === null || typeof options !== "object" || (typeof options.module !== "string" && !(options.module instanceof URL))) {
    throw new TypeError(`spawnRanks takes { module, replicas, ranksPerReplica, kind, processName }, with module a path or file URL`);
  }
  const replicas = positiveInteger("replicas", options.replicas, 1);
  const ranksPerReplica = positiveInteger("ranksPerReplica", options.ranksPerReplica, 1);
  const kind = options.kind ?? "process";
  if (kind !== "process" && kind !== "thread") throw new TypeError(`spawnRanks: kind must be "process" or "thread", got ${JSON.stringify(kind)}`);
  if (options.output !== undefined && options.output !== "immediate" && options.output !== "ordered") {
    throw new TypeError(`spawnRanks: output must be "immediate" or "ordered", got ${JSON.stringify(options.output)}`);
  }
  if (kind === "thread" && options.nats !== undefined) throw new TypeError(`spawnRanks: NATS carries ranks of other processes; use kind "process" with nats`);
  const processName = options.processName ?? "Rank";
  const logger = options.logger ?? (await getOrCreateMetricLogger());
  const startDeadlineMs = options.startDeadlineMs ?? 30_000;
  const module = moduleHref(options.module);
  const entry = entryUrl();
  const tsx = needsTsx(entry, module);
  registerExitDrain();

  const firstReplica = replicaCounters.get(processName) ?? 0;
  replicaCounters.set(processName, firstReplica + replicas);
  const identities: RankIdentity[] = [];
  for (let r = 0; r < replicas; r++) {
    const replicaId = shortId(`${processName}:${firstReplica + r}`);
    for (let local = 0; local < ranksPerReplica; local++) {
      identities.push(
        checkIdentity({
          rank: r * ranksPerReplica + local,
          rankName: rankNameFor(processName, replicaId, local),
          processName,
          localRank: local,
          localWorldSize: ranksPerReplica,
        }),
      );
    }
  }

  const runId = options.nats?.runId ?? logger.runId;
  const hold = options.output === "ordered";
  const starting = identities.map((identity) => {
    const assignment: RankAssignment = {
      identity,
      runId,
      module,
      carrier: options.nats !== undefined ? "nats" : kind === "thread" ? "worker" : "ipc",
      ...(options.nats !== undefined ? { natsUrl: options.nats.url } : {}),
    };
    return kind === "thread" ? startThread(assignment, entry, tsx, options.env ?? {}, hold) : startProcess(assignment, entry, tsx, options.env ?? {}, hold);
  });
  const started = starting.map((s) => s.spawned);
  let startedUp = false;
  // Rejects when a rank exits before the start is over (and never settles after that).
  const exitedEarly = starting.map((rank) =>
    rank.exited.then(async (reason) => (startedUp ? new Promise<never>(() => undefined) : Promise.reject(await startError(rank.spawned, reason)))),
  );
  /** `step` for every rank, failing fast when a rank exits meanwhile; settles every rank before rejecting. */
  const phase = async <T>(step: (rank: Starting) => Promise<T>): Promise<T[]> => {
    const results = await Promise.allSettled(starting.map((rank, i) => Promise.race([step(rank), exitedEarly[i] as Promise<never>])));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed !== undefined) throw failed.reason;
    return results.map((r) => (r as PromiseFulfilledResult<T>).value);
  };
  try {
    const handles = await phase((rank) =>
      options.nats !== undefined
        ? options.nats.waitForRank(rank.spawned.identity.rankName, startDeadlineMs, rank.gone.signal)
        : rank.registered(startDeadlineMs, rank.gone.signal),
    );
    if (options.nats !== undefined) {
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
    await Promise.all(started.map((s) => (logger.deregisterRank(s.identity.rankName), s.handle.shutdown(1000))));
    throw error;
  }
  for (const rank of starting) {
    const { identity, handle } = rank.spawned;
    void rank.exited.then((reason) => {
      if (logger.deregisterRank(identity.rankName, handle) && !handle.shutdownRequested) {
        warn(`rank.exited:${identity.rankName}`, `rank ${identity.rankName} ${reason}; it is no longer expected at flush`);
      }
    });
  }
  return new RankGroup(started, logger);
}

/** Why a rank failed to start, with the last lines it printed (read to the end of its stderr first). */
async function startError(rank: SpawnedRank, reason: string): Promise<Error> {
  await waitAtMost(rank.stderr.ended, 1000);
  const said = rank.stderr.lastLines();
  return new Error(`rank ${rank.identity.rankName} ${reason} before it started${said.length > 0 ? `; it printed:\n${said}` : ""}`);
}

interface Starting {
  readonly spawned: SpawnedRank;
  /** Resolves with the handle when the rank's `register` arrives over the parent channel. */
  registered(deadlineMs: number, signal?: AbortSignal): Promise<RemoteRankHandle>;
  /** Aborted when the rank exits, so that waits on it stop. */
  readonly gone: AbortController;
  /** Resolves with a description when the rank exits (never rejects). */
  readonly exited: Promise<string>;
}

/**
 * Route messages from a rank's parent channel: the first `register`, then replies and
 * `deregister`. Invalid messages are counted and ignored by the protocol layer.
 */
function portRouter(identity: RankIdentity, runId: string, handle: RemoteRankHandle, from: string) {
  let onRegister: ((handle: RemoteRankHandle) => void) | undefined;
  const registered = new Promise<RemoteRankHandle>((resolve) => (onRegister = resolve));
  const route = (data: unknown): void => {
    const message = decodeProtocolMessage(runId, data, from) as RankMessage | undefined;
    if (message === undefined) return;
    if (message.t === "register") {
      if (message.identity.rankName !== identity.rankName) {
        reportIgnored("foreign", `${from} registered as ${message.identity.rankName}, expected ${identity.rankName}`);
        return;
      }
      onRegister?.(handle);
    } else if (message.t === "reply") {
      handle.receive(message);
    } else if (message.t === "deregister") {
      handle.close(`left the run (${message.reason})`);
    }
  };
  const waitRegistered = async (deadlineMs: number, signal?: AbortSignal): Promise<RemoteRankHandle> => {
    const handle = await waitAtMost(registered, deadlineMs, signal);
    if (handle === undefined) throw new Error(`rank ${identity.rankName} did not register within ${deadlineMs} ms (${from})`);
    return handle;
  };
  return { route, waitRegistered };
}

function startProcess(assignment: RankAssignment, entry: URL, tsx: boolean, env: Readonly<Record<string, string>>, hold: boolean): Starting {
  const { identity } = assignment;
  const child = fork(fileURLToPath(entry), [], {
    env: { ...process.env, ...env, [ASSIGNMENT_ENV]: JSON.stringify(assignment) },
    execArgv: tsx ? ["--import", tsxUrl("tsx", RANK_MODULE)] : [],
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    serialization: "json",
  });
  liveChildren.add(child);
  // An idle rank does not keep the controller alive: every request to it has a referenced
  // deadline timer, so the loop waits for replies, but a job that forgot shutdown() reaches
  // beforeExit, where the lifecycle shuts the logger (and these ranks) down.
  child.unref();
  child.channel?.unref();
  (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
  (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  const from = `rank ${identity.rankName} (child process ${child.pid ?? "?"})`;
  const carrier: RankCarrier = {
    description: `child process ${child.pid ?? "?"}`,
    closesWithRank: true,
    post: (text) => {
      if (!child.connected) throw new Error("its IPC channel is closed");
      child.send(text);
    },
    terminate: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
  const handle = new RemoteRankHandle(identity, assignment.runId, carrier);
  const spawned: SpawnedRank = {
    identity,
    handle,
    child,
    stdout: new OutputForwarder(child.stdout as NonNullable<ChildProcess["stdout"]>, (t) => process.stdout.write(t), hold),
    stderr: new OutputForwarder(child.stderr as NonNullable<ChildProcess["stderr"]>, (t) => process.stderr.write(t)),
  };
  const router = portRouter(identity, assignment.runId, handle, from);
  child.on("message", router.route);
  // Sending to a child that just died raises EPIPE here; the exit handler below reports it.
  child.on("error", () => undefined);
  const gone = new AbortController();
  const exited = new Promise<string>((resolve) => {
    child.once("exit", (code, signal) => {
      liveChildren.delete(child);
      gone.abort();
      const reason = signal !== null ? `exited (killed by ${signal})` : `exited with code ${String(code)}`;
      spawned.handle.close(reason);
      resolve(reason);
    });
  });
  return { spawned, registered: router.waitRegistered, exited, gone };
}

function startThread(assignment: RankAssignment, entry: URL, tsx: boolean, env: Readonly<Record<string, string>>, hold: boolean): Starting {
  const { identity } = assignment;
  const workerData = { rankscopeRank: assignment };
  const worker = startModuleWorker(entry, { typeScript: tsx, what: RANK_MODULE, workerData, env: { ...process.env, ...env }, stdout: true, stderr: true });
  for (const stream of [worker.stdout, worker.stderr]) readWithoutKeepingAlive(stream);
  const from = `rank ${identity.rankName} (worker thread ${worker.threadId})`;
  let running = true;
  const carrier: RankCarrier = {
    description: `worker thread ${worker.threadId}`,
    closesWithRank: true,
    post: (text) => {
      if (!running) throw new Error("the worker has exited");
      worker.postMessage(text);
    },
    terminate: async () => {
      if (running) await worker.terminate();
    },
  };
  const handle = new RemoteRankHandle(identity, assignment.runId, carrier);
  const spawned: SpawnedRank = {
    identity,
    handle,
    worker,
    stdout: new OutputForwarder(worker.stdout, (t) => process.stdout.write(t), hold),
    stderr: new OutputForwarder(worker.stderr, (t) => process.stderr.write(t)),
  };
  const router = portRouter(identity, assignment.runId, handle, from);
  worker.on("message", router.route);
  let failure = "";
  worker.on("error", (error) => {
    failure = `: ${error.message}`;
  });
  const gone = new AbortController();
  const exited = new Promise<string>((resolve) => {
    worker.once("exit", (code) => {
      running = false;
      gone.abort();
      const reason = `exited with code ${code}${failure}`;
      spawned.handle.close(reason);
      resolve(reason);
    });
  });
  // As for child processes: an idle thread rank does not keep the controller alive. After the
  // listeners: adding a "message" listener refs the worker's port again.
  worker.unref();
  return { spawned, registered: router.waitRegistered, exited, gone };
}
