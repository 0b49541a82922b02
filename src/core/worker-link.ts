/**
 * Record from anywhere: metrics recorded in a worker thread the user started with `new Worker(...)`
 * reach the flush of that process's main thread, with nothing to call.
 *
 * Every thread has a collector of its own (a realm of its own). A worker thread that is not a
 * rank links its collector when it records its first key: it says `here` on the process's
 * `BroadcastChannel` and from then on answers the main thread's `collect` with its states (taken
 * and reset, like a rank's). The main thread's flush asks every linked worker, waits for the ones
 * it knows up to a deadline, and merges what they sent into its own states (exact: accumulator
 * states merge). A worker that misses the deadline is named and counted; what it sends later goes
 * into the next flush, never twice. A worker that exits sends what it recorded since the last flush
 * (`bye`); a worker killed with `terminate()` cannot, and loses at most that.
 *
 * Ranks in threads (`spawnRanks({ kind: "thread" })`, or any thread whose collector a
 * `RankRuntime` serves, e.g. one that called `joinRun`) are not linked: their controller flushes
 * them itself. Worker threads started by such a thread rank report to the process's main thread.
 * rankscope's own threads (stream writer, store writer) never record, so they never link. The
 * channels are unref'd: they never keep a thread alive.
 */
import { registerDrain } from "./lifecycle.js";
import { BroadcastChannel, isMainThread, threadId, workerData } from "node:worker_threads";
import type { KeyState } from "./key-state.js";
import { describeError, reportError, warn } from "./diagnostics.js";
import { processWide } from "./process-wide.js";

/** The process's channel between collectors (versioned: two rankscope copies of one version share it). */
const CHANNEL = "rankscope.collectors.v1";

/** A worker that missed this many collects in a row is no longer waited for (until it answers again). */
const MAX_MISSED = 3;
/** At most this many late answers wait for the next flush; older ones are dropped and counted. */
const MAX_CARRIED = 256;
/** A linked worker that no main thread welcomed within this long warns (nobody flushes its values). */
const WELCOME_WITHIN_MS = 5000;

type LinkMessage =
  | { readonly t: "who" }
  | { readonly t: "here"; readonly thread: number }
  | { readonly t: "welcome"; readonly thread: number }
  | { readonly t: "collect"; readonly id: number; readonly step: number }
  | {
      readonly t: "states";
      readonly id: number;
      readonly thread: number;
      readonly states: KeyState[];
      readonly droppedKeyRecords: number;
    }
  | { readonly t: "bye"; readonly thread: number; readonly states: KeyState[]; readonly droppedKeyRecords: number };

/**
 * The link message a channel event carries, or undefined for anything else. The channel is shared
 * by every rankscope copy of this state version in the process, so messages are ours; the check
 * covers the fields each kind is read by.
 */
function linkMessageOf(event: unknown): LinkMessage | undefined {
  if (event === null || typeof event !== "object" || !("data" in event)) return undefined;
  const message: unknown = event.data;
  return isLinkMessage(message) ? message : undefined;
}

function isLinkMessage(m: unknown): m is LinkMessage {
  if (m === null || typeof m !== "object" || !("t" in m)) return false;
  const thread = "thread" in m && typeof m.thread === "number";
  const id = "id" in m && typeof m.id === "number";
  const states =
    "states" in m && Array.isArray(m.states) && "droppedKeyRecords" in m && typeof m.droppedKeyRecords === "number";
  switch (m.t) {
    case "who":
      return true;
    case "here":
    case "welcome":
      return thread;
    case "collect":
      return id && "step" in m && typeof m.step === "number";
    case "states":
      return id && thread && states;
    case "bye":
      return thread && states;
    default:
      return false;
  }
}

/** What a thread's collector must offer to be linked. */
interface LinkableCollector {
  takeStates(): KeyState[];
  droppedKeyRecords: number;
  /** The step raw values recorded now belong to (the main thread's last flushed step + 1). */
  step: number;
}

type LinkListener = () => void;

function linkListeners(): Set<LinkListener> {
  return processWide("workerLinkListeners", () => new Set<LinkListener>());
}

/**
 * Be called when this worker thread's collector links to the main thread (at its first key, off
 * the hot path), or now if it already did: the stream links the worker's raw values then.
 */
export function onWorkerCollectorLinked(listener: LinkListener): void {
  if (linkState().linked) listener();
  else linkListeners().add(listener);
}

/** What the main thread's flush got from the worker threads. */
interface WorkerStates {
  /** States per answer (one per worker that answered in time, plus late answers carried over). */
  readonly states: readonly KeyState[][];
  /** Records dropped in workers because of their key bound, since they started (summed over workers). */
  readonly droppedKeyRecords: number;
  /** Thread ids of the workers that did not answer by the deadline. */
  readonly missing: readonly number[];
}

/** True in a worker thread that should report to the main thread: not a rank started by spawnRanks. */
export function isReportingWorker(): boolean {
  if (isMainThread) return false;
  return !(workerData !== null && typeof workerData === "object" && "rankscopeRank" in workerData);
}

/**
 * Link this worker thread's collector to the main thread (called by the collector when its first
 * key is created, in a reporting worker). Idempotent.
 */
export function linkWorkerCollector(collector: LinkableCollector): void {
  const state = linkState();
  if (state.linked || state.rank || !isReportingWorker()) return;
  state.linked = true;
  const channel = new BroadcastChannel(CHANNEL);
  state.unlink = () => {
    channel.postMessage({ t: "bye", thread: threadId, states: [], droppedKeyRecords: 0 } satisfies LinkMessage);
    channel.close();
    clearTimeout(unwelcome);
  };
  channel.unref();
  const post = (message: LinkMessage): void => channel.postMessage(message);
  const unwelcome = setTimeout(() => {
    warn(
      "collector.workerUnlinked",
      `metrics recorded in worker thread ${threadId} reach a flush only through the main thread of this process, and no rankscope collector answered there within ${WELCOME_WITHIN_MS} ms: ` +
        `import rankscope in the main thread and flush there (getOrCreateMetricLogger, logger.flush), or make this thread a rank of its own (joinRun)`,
    );
  }, WELCOME_WITHIN_MS);
  unwelcome.unref();
  channel.onmessage = (event: unknown) => {
    const message = linkMessageOf(event);
    if (message?.t === "welcome" && message.thread === threadId) {
      clearTimeout(unwelcome);
    } else if (message?.t === "collect") {
      clearTimeout(unwelcome);
      post({
        t: "states",
        id: message.id,
        thread: threadId,
        states: collector.takeStates(),
        droppedKeyRecords: collector.droppedKeyRecords,
      });
      // Raw values recorded from now on belong to the next step, as in the main thread.
      collector.step = message.step + 1;
    } else if (message?.t === "who") {
      post({ t: "here", thread: threadId });
    }
  };
  post({ t: "here", thread: threadId });
  for (const listener of linkListeners()) {
    try {
      listener();
    } catch (error) {
      reportError(
        "collector.linkListener",
        `worker thread ${threadId}: linking its stream failed: ${describeError(error)}`,
      );
    }
  }
  // What was recorded since the last flush leaves with the worker (not possible after terminate()):
  // a drain of the process lifecycle (src/core/lifecycle.ts), which owns `exit` in every thread.
  registerDrain({
    name: `worker thread ${threadId} link`,
    stage: "producer",
    exit: () => {
      if (state.rank) return;
      post({
        t: "bye",
        thread: threadId,
        states: collector.takeStates(),
        droppedKeyRecords: collector.droppedKeyRecords,
      });
    },
  });
}

interface LinkState {
  linked: boolean;
  /** This thread is a rank of its own: its collector is flushed by its controller, not the main thread. */
  rank: boolean;
  unlink: () => void;
}

function linkState(): LinkState {
  return processWide("workerLink", (): LinkState => ({ linked: false, rank: false, unlink: () => undefined }));
}

/**
 * This worker thread is a rank of its own (a `RankRuntime` serves its collector): it stops
 * reporting to the main thread, or never starts. No-op in the main thread.
 */
export function markThreadAsRank(): void {
  if (isMainThread) return;
  const state = linkState();
  if (state.rank) return;
  state.rank = true;
  if (state.linked) state.unlink();
}

interface Gather {
  readonly id: number;
  readonly waitingFor: Set<number>;
  readonly answers: KeyState[][];
  done: () => void;
}

/** The main thread's side: knows the linked workers, asks them at flush, keeps late answers. */
class WorkerGatherer {
  private readonly channel = new BroadcastChannel(CHANNEL);
  /** Linked workers by thread id, with how many collects in a row each missed. */
  private readonly workers = new Map<number, number>();
  private readonly carried: KeyState[][] = [];
  /** Keys dropped per worker (each worker's count is cumulative). */
  private readonly dropped = new Map<number, number>();
  private current: Gather | null = null;
  private lastId = 0;

  constructor() {
    this.channel.unref();
    this.channel.onmessage = (event: unknown) => {
      const message = linkMessageOf(event);
      if (message !== undefined) this.receive(message);
    };
    // Workers that linked before this thread listened say `here` again.
    this.channel.postMessage({ t: "who" } satisfies LinkMessage);
  }

  get knownWorkers(): number {
    return this.workers.size;
  }

  /** True when no worker thread is linked and no late answer of one waits: a flush has nothing to gather. */
  get quiet(): boolean {
    return this.workers.size === 0 && this.carried.length === 0;
  }

  /** Records the worker threads dropped past their key bound (each worker's count is cumulative). */
  get droppedKeyRecords(): number {
    let droppedKeyRecords = 0;
    for (const count of this.dropped.values()) droppedKeyRecords += count;
    return droppedKeyRecords;
  }

  /** Ask every linked worker for its states at `step`; resolves by `deadlineMs` with what arrived. */
  async collect(deadlineMs: number, step = 0): Promise<WorkerStates> {
    const expected = [...this.workers].filter(([, missed]) => missed < MAX_MISSED).map(([thread]) => thread);
    const gather: Gather = { id: ++this.lastId, waitingFor: new Set(expected), answers: [], done: () => undefined };
    this.current = gather;
    this.channel.postMessage({ t: "collect", id: gather.id, step } satisfies LinkMessage);
    if (gather.waitingFor.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadlineMs);
        gather.done = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.current = null;
    const missing = [...gather.waitingFor];
    for (const thread of missing) {
      const missed = (this.workers.get(thread) ?? 0) + 1;
      this.workers.set(thread, missed);
      warn(
        `collector.workerMissing:${thread}`,
        missed >= MAX_MISSED
          ? `worker thread ${thread} did not answer ${MAX_MISSED} flushes in a row within ${deadlineMs} ms; it is no longer waited for until it answers (what it sends later goes into a later flush)`
          : `worker thread ${thread} did not answer the flush within ${deadlineMs} ms (its event loop is busy?); what it recorded goes into a later flush`,
      );
    }
    const states = [...this.carried.splice(0), ...gather.answers];
    return { states, droppedKeyRecords: this.droppedKeyRecords, missing };
  }

  private receive(message: LinkMessage): void {
    switch (message.t) {
      case "here":
        if (!this.workers.has(message.thread)) this.workers.set(message.thread, 0);
        this.channel.postMessage({ t: "welcome", thread: message.thread } satisfies LinkMessage);
        return;
      case "states": {
        this.workers.set(message.thread, 0);
        this.dropped.set(message.thread, message.droppedKeyRecords);
        const gather = this.current;
        if (gather !== null && gather.id === message.id) {
          if (message.states.length > 0) gather.answers.push(message.states);
          gather.waitingFor.delete(message.thread);
          if (gather.waitingFor.size === 0) gather.done();
        } else {
          this.carry(message.states);
        }
        return;
      }
      case "bye":
        this.workers.delete(message.thread);
        this.dropped.set(message.thread, message.droppedKeyRecords);
        this.current?.waitingFor.delete(message.thread);
        this.carry(message.states);
        if (this.current !== null && this.current.waitingFor.size === 0) this.current.done();
        return;
      default:
        return;
    }
  }

  private carry(states: KeyState[]): void {
    if (states.length === 0) return;
    this.carried.push(states);
    if (this.carried.length > MAX_CARRIED) {
      const lost = this.carried.shift() ?? [];
      const values = lost.reduce((n, s) => n + s.state.count, 0);
      reportError(
        "collector.workerCarriedFull",
        `more than ${MAX_CARRIED} late answers of worker threads waited for a flush; ${values} values of the oldest are dropped and counted. Flush more often.`,
      );
    }
  }
}

/** The main thread's gatherer (created on first use; one per process). */
export function workerGatherer(): WorkerGatherer | undefined {
  if (!isMainThread) return undefined;
  return processWide("workerGatherer", () => new WorkerGatherer());
}
