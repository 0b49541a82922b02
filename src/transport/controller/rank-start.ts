/**
 * Starting one rank of `spawnRanks` (launcher.ts): a child process (IPC) or a worker thread
 * (MessagePort), its carrier and handle, its output forwarded, its exit watched; and the drain
 * that stops child processes still alive when this process exits.
 */
import { registerDrain } from "../../core/lifecycle.js";
import { fork, type ChildProcess } from "node:child_process";
import { Socket } from "node:net";
import { hostname } from "node:os";
import { fileURLToPath } from "node:url";
import type { Worker } from "node:worker_threads";
import { isTypeScript, packageModule, startModuleWorker, tsxUrl } from "../../core/module-worker.js";
import type { RankIdentity } from "../../core/rank-identity.js";
import { ASSIGNMENT_ENV, type RankAssignment } from "../protocol/assignment.js";
import { OutputForwarder } from "./output.js";
import {
  decodeProtocolMessage,
  encodeProtocolMessage,
  reportIgnored,
  type ControllerRequest,
} from "../protocol/messages.js";
import { RemoteRankHandle, waitAtMost } from "./remote-rank.js";
import type { RankCarrier } from "./rank-carrier.js";
import { ChannelRankFrames } from "./rank-frames.js";
import { isWireFrame } from "../wire/codec.js";

/** One started rank. */
export interface SpawnedRank {
  readonly identity: RankIdentity;
  handle: RemoteRankHandle;
  readonly child?: ChildProcess;
  readonly worker?: Worker;
  readonly stdout: OutputForwarder;
  readonly stderr: OutputForwarder;
}

const RANK_MODULE = "spawnRanks: the rank module";

/** Where the rank entry lives: `dist/transport/rank/rank-entry.js`, the `.ts` under `src/` when running from source. */
export function entryUrl(): URL {
  return packageModule("transport/rank/rank-entry");
}

export function needsTsx(entry: URL, module: string): boolean {
  return isTypeScript(entry) || /\.[cm]?tsx?$/.test(module);
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

/** Every child process started here, stopped if this process exits without shutting them down. */
const liveChildren = new Set<ChildProcess>();
let exitDrainRegistered = false;

/**
 * A drain of the process lifecycle (src/core/lifecycle.ts): at exit, children still alive (the
 * logger's shutdown did not stop them, or the process ended by `process.exit()` or an uncaught
 * exception) get SIGTERM — their own lifecycle writes what they hold, within their drain deadline,
 * and ends them; one that ignores it exits when its IPC channel closes (rank-entry).
 */
export function registerExitDrain(): void {
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

/** Why a rank failed to start, with the last lines it printed (read to the end of its stderr first). */
export async function startError(rank: SpawnedRank, reason: string): Promise<Error> {
  await waitAtMost(rank.stderr.ended, 1000);
  const said = rank.stderr.lastLines();
  return new Error(
    `rank ${rank.identity.rankName} ${reason} before it started${said.length > 0 ? `; it printed:\n${said}` : ""}`,
  );
}

export interface Starting {
  readonly spawned: SpawnedRank;
  /** Resolves with the handle when the rank's `register` arrives over the parent channel. */
  registered(deadlineMs: number, signal?: AbortSignal): Promise<RemoteRankHandle>;
  /** Aborted when the rank exits, so that waits on it stop. */
  readonly gone: AbortController;
  /** Resolves with a description when the rank exits (never rejects). */
  readonly exited: Promise<string>;
}

/**
 * How a rank over its parent's channel answers flushes: `frames` (default), binary wire frames
 * merged from their columns; `json`, JSON snapshots as every carrier takes (the format before
 * frames; kept to compare the two, e.g. in `npm run bench -- ranks`).
 */
export type ChannelAnswers = "frames" | "json";

/**
 * The frames of a rank over its parent's channel; none when it answers in JSON. Definitions of its
 * key table that were lost are made good by asking for that answer again, in JSON (`post`).
 */
function channelFrames(
  answers: ChannelAnswers,
  runId: string,
  identity: RankIdentity,
  post: () => RankCarrier["post"],
): ChannelRankFrames | undefined {
  if (answers === "json") return undefined;
  return new ChannelRankFrames(runId, identity.rankName, (id, seq) => {
    const request: ControllerRequest = { t: "resend", id, seq };
    try {
      post()(encodeProtocolMessage(runId, request), request);
    } catch {
      // The rank is gone: its pending flush fails when its channel closes.
    }
  });
}

/**
 * Route messages from a rank's parent channel: the first `register`, then replies (flush answers
 * as wire frames when `frames` reads them) and `deregister`. Invalid messages are counted and
 * ignored by the protocol layer.
 */
function portRouter(
  identity: RankIdentity,
  runId: string,
  handle: RemoteRankHandle,
  from: string,
  frames: ChannelRankFrames | undefined,
) {
  let onRegister: ((handle: RemoteRankHandle) => void) | undefined;
  const registered = new Promise<RemoteRankHandle>((resolve) => (onRegister = resolve));
  const route = (data: unknown): void => {
    if (isWireFrame(data)) {
      const reply = frames?.reply(data, from);
      if (frames === undefined)
        reportIgnored("malformed", `${from} sent a wire frame, which this rank's flushes did not ask for`);
      else if (reply !== undefined) handle.receive(reply);
      return;
    }
    const message = decodeProtocolMessage(runId, data, from);
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
    if (handle === undefined)
      throw new Error(`rank ${identity.rankName} did not register within ${deadlineMs} ms (${from})`);
    return handle;
  };
  return { route, waitRegistered };
}

export function startProcess(
  assignment: RankAssignment,
  entry: URL,
  tsx: boolean,
  env: Readonly<Record<string, string>>,
  hold: boolean,
  answers: ChannelAnswers,
): Starting {
  const { identity } = assignment;
  const child = fork(fileURLToPath(entry), [], {
    env: { ...process.env, ...env, [ASSIGNMENT_ENV]: JSON.stringify(assignment) },
    execArgv: tsx ? ["--import", tsxUrl("tsx", RANK_MODULE)] : [],
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    // Structured clone (V8's serializer): flush answers travel as bytes (wire frames), requests as text.
    serialization: "advanced",
  });
  liveChildren.add(child);
  // An idle rank does not keep the controller alive: every request to it has a referenced
  // deadline timer, so the loop waits for replies, but a job that forgot shutdown() reaches
  // beforeExit, where the lifecycle shuts the logger (and these ranks) down.
  child.unref();
  child.channel?.unref();
  for (const stream of [child.stdout, child.stderr]) if (stream instanceof Socket) stream.unref();
  const { stdout, stderr } = child;
  if (stdout === null || stderr === null)
    throw new Error(`rank ${identity.rankName}: its child process has no stdout/stderr pipe`);
  const from = `rank ${identity.rankName} (child process ${child.pid ?? "?"})`;
  const frames = channelFrames(answers, assignment.runId, identity, () => carrier.post);
  const carrier: RankCarrier = {
    description: `child process ${child.pid ?? "?"}`,
    closesWithRank: true,
    host: hostname(),
    ...(frames !== undefined ? { flushFields: () => frames.flushFields() } : {}),
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
    stdout: new OutputForwarder(stdout, (t) => process.stdout.write(t), hold),
    stderr: new OutputForwarder(stderr, (t) => process.stderr.write(t)),
  };
  const router = portRouter(identity, assignment.runId, handle, from, frames);
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

export function startThread(
  assignment: RankAssignment,
  entry: URL,
  tsx: boolean,
  env: Readonly<Record<string, string>>,
  hold: boolean,
  answers: ChannelAnswers,
): Starting {
  const { identity } = assignment;
  const workerData = { rankscopeRank: assignment };
  const worker = startModuleWorker(entry, {
    typeScript: tsx,
    what: RANK_MODULE,
    workerData,
    env: { ...process.env, ...env },
    stdout: true,
    stderr: true,
  });
  for (const stream of [worker.stdout, worker.stderr]) readWithoutKeepingAlive(stream);
  const from = `rank ${identity.rankName} (worker thread ${worker.threadId})`;
  let running = true;
  const frames = channelFrames(answers, assignment.runId, identity, () => carrier.post);
  const carrier: RankCarrier = {
    description: `worker thread ${worker.threadId}`,
    closesWithRank: true,
    host: hostname(),
    ...(frames !== undefined ? { flushFields: () => frames.flushFields() } : {}),
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
  const router = portRouter(identity, assignment.runId, handle, from, frames);
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
