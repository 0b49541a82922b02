/**
 * The rank side of the pipeline: what runs in every process that records metrics.
 *
 * A `RankRuntime` owns this process's collector and its per-rank backends. The controller talks to
 * it through a `RankHandle` — directly in-process, or over a transport — with three requests:
 * init (the per-rank backend configs and the primary backends' metadata), flush(step) → states,
 * and shutdown.
 */
import type { BackendContext, RankIdentity } from "../backends/backend.js";
import { getCollector, type Collector, type KeyState, type MetricEntry, type StreamProducer } from "../core/collector.js";
import type { StreamRecord } from "../core/metric.js";
import { reportError } from "../core/diagnostics.js";
import { peekProcessWide, processWide, setProcessWide } from "../core/process-wide.js";
import { currentRun, setCurrentRun } from "../run/current.js";
import { attachStreamBackends, detachStreamBackends, flushStream, recordStreamDropped } from "../stream/stream.js";
import { BackendSet } from "./backend-set.js";
import { validateBackendsConfig, type BackendsConfig, type ValidatedBackend } from "./config.js";

/** Where a run's files go and where it starts. */
export interface RunInfo {
  readonly runDir: string;
  readonly experiment: string;
  readonly trial: string;
  /** The step the run resumes from (0 for a fresh run). */
  readonly resumeStep: number;
}

/** What the controller sends a rank at `initBackends` (or when the rank registers late). */
export interface RankInit {
  /** Only the per-rank backends (`per_rank_reduce`, `per_rank_no_reduce`). */
  readonly backends: BackendsConfig;
  /** Per backend name: what the controller-side instance handed to ranks (e.g. a shared run id). */
  readonly primaryMetadata: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  readonly run: RunInfo;
}

/** A rank's answer to flush(step). */
export interface RankSnapshot {
  readonly rankName: string;
  /** The step this snapshot answers (a late reply to an older flush is discarded). */
  readonly step: number;
  readonly states: readonly KeyState[];
  /** Records dropped because their key was new past the key bound, since the rank started. */
  readonly droppedKeyRecords: number;
  /** Values logged on this rank since the last flush on axes of their own (see `OffCycleLog`). */
  readonly offCycle?: readonly OffCycleLog[];
}

/**
 * Values a rank logged outside the flush cycle, on an axis of their own (the system monitor's
 * `system/step`). A rank has no global backends, so they ride along with the next flush's
 * snapshot and the controller logs them on their own axis, never at the training step.
 */
export interface OffCycleLog {
  readonly axis: string;
  /** The value on `axis`. */
  readonly step: number;
  /** Milliseconds since the epoch, when they were logged. */
  readonly timestamp: number;
  readonly states: readonly KeyState[];
}

/** At most this many off-cycle logs wait for the next flush; older ones are dropped and counted. */
export const MAX_PENDING_OFF_CYCLE = 1000;

function offCycleQueue(): OffCycleLog[] {
  return processWide("offCycleLogs", (): OffCycleLog[] => []);
}

/** Queue values logged on a rank outside the flush cycle, for the controller (bounded). */
export function queueOffCycleLog(log: OffCycleLog): void {
  const queue = offCycleQueue();
  if (queue.length >= MAX_PENDING_OFF_CYCLE) {
    queue.shift();
    reportError("rank.offCycleFull", `more than ${MAX_PENDING_OFF_CYCLE} off-cycle logs (system monitor) waited for a flush; the oldest are dropped and counted. Flush more often, or log less often.`);
  }
  queue.push(log);
}

/** How the controller reaches one rank, whatever carries the messages. */
export interface RankHandle {
  readonly rankName: string;
  init(message: RankInit): Promise<void>;
  /**
   * The rank's states at `step`. `deadlineMs` is how long the controller will wait: a remote
   * handle stops waiting then (and treats a later answer as late), so nothing piles up.
   */
  flush(step: number, deadlineMs?: number): Promise<RankSnapshot>;
  /** Stop the rank within `deadlineMs`; a remote rank that does not finish by then is killed. */
  shutdown(deadlineMs?: number): Promise<void>;
}

/** How long a flush waits for raw values already recorded to reach the stream backends. */
const STREAM_FLUSH_WAIT_MS = 1000;

/** The identity of a process that nobody told who it is: rank 0 of one. */
export function standaloneIdentity(processName: string): RankIdentity {
  return { rank: 0, rankName: processName, processName, localRank: 0, localWorldSize: 1 };
}

/**
 * Who this process (or worker thread) is in the job: its rank, rank name, and place in its replica
 * (Forge's `current_rank()`). Set when the process joins a run as a rank; otherwise the identity of
 * the run's controller, or rank 0 of one.
 */
export function currentRank(): RankIdentity {
  return peekProcessWide<RankIdentity>("rankIdentity") ?? currentRun()?.identity ?? standaloneIdentity("Controller");
}

/** Record who this process is (the transports call this when a rank joins a run). */
export function setCurrentRank(identity: RankIdentity): void {
  setProcessWide("rankIdentity", identity);
}

/** Raw values straight to the backends, for an extra rank hosted in a thread whose ring is taken. */
class DirectStreamProducer implements StreamProducer {
  constructor(
    private readonly backends: BackendSet,
    private readonly identity: RankIdentity,
  ) {}
  record(entry: MetricEntry, value: number, step: number): void {
    const record: StreamRecord = { key: entry.key, value, step, timestamp: Date.now(), rank: this.identity.rank, rankName: this.identity.rankName };
    void this.backends.logStream([record]);
  }
}

/** This process's rank: its collector, its per-rank backends, and the answers to the controller. */
export class RankRuntime {
  private reduceBackends = BackendSet.empty();
  private streamBackends = BackendSet.empty();
  /** True while this runtime's per_rank_no_reduce backends are fed by this thread's stream ring. */
  private usesStreamRing = false;

  constructor(
    readonly identity: RankIdentity,
    readonly collector: Collector = getCollector(),
  ) {}

  /** Start the per-rank backends this rank was sent (replacing any it had). */
  async init(message: RankInit): Promise<void> {
    await this.stopBackends();
    if (currentRun()?.role !== "controller") {
      setCurrentRun({ runDir: message.run.runDir, experiment: message.run.experiment, trial: message.run.trial, identity: this.identity, role: "rank" });
    }
    if (message.run.resumeStep > 0) this.collector.step = message.run.resumeStep;
    const validated = await validateBackendsConfig(message.backends);
    const context = (v: ValidatedBackend): BackendContext => this.contextFor(v, message);
    this.reduceBackends = await BackendSet.start(validated.filter((v) => v.loggingMode === "per_rank_reduce"), context);
    this.streamBackends = await BackendSet.start(validated.filter((v) => v.loggingMode === "per_rank_no_reduce"), context);
    if (this.streamBackends.wantsStream) {
      const backends = this.streamBackends;
      if (this.collector === getCollector()) {
        // Raw values go through this thread's stream ring; the writer hands decoded batches back to these backends.
        this.collector.stream = attachStreamBackends((batch) => backends.logStream(batch), this.identity, message.run.runDir);
        this.usesStreamRing = true;
      } else {
        // A second rank hosted in the same thread (its own collector): the thread's ring belongs to
        // the thread's rank, so this one hands its raw values to its backends directly.
        this.collector.stream = new DirectStreamProducer(backends, this.identity);
      }
    }
  }

  /**
   * Take this rank's states (synchronously, so recording goes on into the next step), log them to
   * the per-rank backends, and return them for the controller.
   */
  async flush(step: number): Promise<RankSnapshot> {
    if (this.usesStreamRing) {
      // Raw values recorded before this flush reach the per_rank_no_reduce backends first, so a
      // step's stream lines come before the next step's (bounded: the flush has a deadline).
      await flushStream(STREAM_FLUSH_WAIT_MS);
    }
    recordStreamDropped(this.collector);
    const states = this.collector.takeStates();
    // What this rank's backends missed since the last flush (rankscope/backend_undelivered/{name}), summed over ranks.
    const undelivered = [...this.reduceBackends.takeUndeliveredStates(), ...this.streamBackends.takeUndeliveredStates()];
    if (undelivered.length > 0) {
      states.push(...undelivered);
      states.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    }
    this.collector.step = step + 1;
    if (this.reduceBackends.size > 0 && states.length > 0) {
      await this.reduceBackends.logStates(states, { step, timestamp: Date.now(), rankName: this.identity.rankName });
    }
    const snapshot: RankSnapshot = { rankName: this.identity.rankName, step, states, droppedKeyRecords: this.collector.droppedKeyRecords };
    // Off-cycle logs belong to the process: only its own collector's runtime carries them.
    const queue = offCycleQueue();
    if (queue.length === 0 || this.collector !== getCollector()) return snapshot;
    return { ...snapshot, offCycle: queue.splice(0, queue.length) };
  }

  /** Finish the per-rank backends. */
  async shutdown(): Promise<void> {
    await this.stopBackends();
  }

  private async stopBackends(): Promise<void> {
    this.usesStreamRing = false;
    if (this.collector.stream !== null) {
      this.collector.stream = null;
      if (this.collector === getCollector()) await detachStreamBackends();
    }
    await Promise.all([this.reduceBackends.finish(), this.streamBackends.finish()]);
    this.reduceBackends = BackendSet.empty();
    this.streamBackends = BackendSet.empty();
  }

  private contextFor(v: ValidatedBackend, message: RankInit): BackendContext {
    return {
      backendName: v.type,
      displayName: this.identity.rankName,
      loggingMode: v.loggingMode,
      role: "rank",
      identity: this.identity,
      runDir: message.run.runDir,
      experiment: message.run.experiment,
      trial: message.run.trial,
      resumeStep: message.run.resumeStep,
      // By config name, else from the global backend of the same type (a `wandb` global_reduce
      // backend hands its run id to a `{ type: "wandb" }` per-rank one).
      primaryMetadata: message.primaryMetadata[v.name] ?? message.primaryMetadata[v.type] ?? {},
    };
  }
}

/** A rank in the controller's own process: requests are plain calls. */
export class LocalRankHandle implements RankHandle {
  constructor(readonly runtime: RankRuntime) {}
  get rankName(): string {
    return this.runtime.identity.rankName;
  }
  init(message: RankInit): Promise<void> {
    return this.runtime.init(message);
  }
  flush(step: number): Promise<RankSnapshot> {
    return this.runtime.flush(step);
  }
  shutdown(): Promise<void> {
    return this.runtime.shutdown();
  }
}
