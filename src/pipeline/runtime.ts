/**
 * The rank side of the pipeline: what runs in every process that records metrics.
 *
 * A `RankRuntime` owns this process's collector and its per-rank backends. The controller talks to
 * it through a `RankHandle` — directly in-process, or over a transport — with three requests:
 * init (the per-rank backend configs and the primary backends' metadata), flush(step) → states,
 * and shutdown.
 */
import { hostname } from "node:os";
import { hasQueuedAlerts, takeQueuedAlerts } from "../alerts/user-alert.js";
import { registerDrain } from "../core/lifecycle.js";
import type { BackendContext } from "../backends/backend.js";
import { roleOf, type RankIdentity } from "../core/rank-identity.js";
import { getCollector, type Collector, type MetricEntry, type StreamProducer } from "../core/collector.js";
import type { KeyState } from "../core/key-state.js";
import type { StreamRecord } from "../core/metric.js";
import type { RankTiming } from "../core/step-timing.js";
import { markThreadAsRank, workerGatherer } from "../core/worker-link.js";
import { mergeRankKeyStates } from "./reduce-states.js";
import { currentRun, setCurrentRun } from "../run/current.js";
import { offCycleQueue } from "./off-cycle.js";
import {
  attachStreamBackends,
  detachStreamBackends,
  handStreamToBackends,
  recordStreamDropped,
} from "../stream/stream.js";
import { BackendSet } from "./backend-set.js";
import { validateBackendsConfig, type ValidatedBackend } from "./config.js";
import type { FramedFlush, FrameWriter, RankHandle, RankInit, RankSnapshot } from "./rank-handle.js";
import { takeRejectionsSinceLastFlush } from "../core/ignored.js";
import { REJECTED_KEY_PREFIX } from "../core/internal-keys.js";

export type {
  FramedFlush,
  FrameWriter,
  OffCycleLog,
  RankHandle,
  RankInit,
  RankSnapshot,
  RunInfo,
} from "./rank-handle.js";

/**
 * The messages this process rejected since its last flush, into its own collector as
 * `rankscope/rejected/{kind}` (a `sum`): they reach the controller with the rank's other values.
 */
export function recordRejections(collector: Collector): void {
  for (const [kind, count] of takeRejectionsSinceLastFlush())
    collector.numericEntryFor(`${REJECTED_KEY_PREFIX}${kind}`, "sum", "recordRejections")?.accumulator.append(count);
}

/**
 * How long a flush waits for raw values already recorded to be written and queued for the stream
 * backends (the stream's own writer thread; the backends' calls are not waited for).
 */
const STREAM_FLUSH_WAIT_MS = 1000;
/**
 * How long a flush waits for the process's worker threads' states (at most half the flush
 * deadline when the controller gives one): a worker that misses it is named, and what it sends
 * later goes into the next flush.
 */
export const WORKER_FLUSH_DEADLINE_MS = 1000;

/** This machine's name, as a rank's step timings name its host (read once). */
const HOST = hostname();

/** Raw values straight to the backends, for an extra rank hosted in a thread whose ring is taken. */
class DirectStreamProducer implements StreamProducer {
  constructor(
    private readonly backends: BackendSet,
    private readonly identity: RankIdentity,
  ) {}
  record(entry: MetricEntry, value: number, step: number): void {
    const record: StreamRecord = {
      key: entry.key,
      value,
      step,
      timestamp: Date.now(),
      rank: this.identity.rank,
      rankName: this.identity.rankName,
      role: roleOf(this.identity),
      thread: 0,
    };
    this.backends.logStream([record]);
  }
}

/** This process's rank: its collector, its per-rank backends, and the answers to the controller. */
export class RankRuntime {
  private reduceBackends = BackendSet.empty();
  private streamBackends = BackendSet.empty();
  /** True while this runtime's per_rank_no_reduce backends are fed by this thread's stream ring. */
  private usesStreamRing = false;
  /** A rank's runtime (not the controller's own) finishes its per-rank backends at a signal. */
  private unregisterDrain: (() => void) | null = null;
  /** The backends' stop in progress: a second stop (a signal and the controller's shutdown at once) waits for it. */
  private stopping: Promise<void> | null = null;

  constructor(
    readonly identity: RankIdentity,
    readonly collector: Collector = getCollector(),
  ) {
    // A worker thread serving as a rank is flushed by its controller, not by the main thread.
    if (collector === getCollector()) markThreadAsRank();
    // Its values are logged: no "recorded with no logger" warning for this collector.
    collector.hasFlusher = true;
  }

  /** Its per-rank backends that keep run events (the controller's own, when no global one does: `MetricLogger.eventBackends`). */
  eventBackends(method: "logAlert" | "logRankLoss"): BackendSet | undefined {
    return [this.reduceBackends, this.streamBackends].find((set) => set.takes(method));
  }

  /**
   * Start the per-rank backends this rank was sent (replacing any it had). `accept` sees the
   * validated configs first and may throw to refuse them (the rank's policy for configs from the
   * wire): the rank then keeps the backends it had.
   */
  async init(message: RankInit, accept?: (validated: readonly ValidatedBackend[]) => void): Promise<void> {
    const validated = await validateBackendsConfig(message.backends);
    accept?.(validated);
    await this.stopBackends();
    if (currentRun()?.role !== "controller") {
      setCurrentRun({
        runDir: message.run.runDir,
        experiment: message.run.experiment,
        trial: message.run.trial,
        identity: this.identity,
        role: "rank",
      });
    }
    if (message.run.resumeStep > 0) this.collector.step = message.run.resumeStep;
    if (currentRun()?.role === "rank" && this.unregisterDrain === null) {
      // The controller's logger finishes its own runtime; a rank's runtime is its process's logger.
      this.unregisterDrain = registerDrain({
        name: `rank ${this.identity.rankName} per-rank backends`,
        stage: "logger",
        drain: ({ reason }) => (reason === "SIGINT" || reason === "SIGTERM" ? this.shutdown() : undefined),
      });
    }
    const context = (v: ValidatedBackend): BackendContext => this.contextFor(v, message);
    this.reduceBackends = await BackendSet.start(
      validated.filter((v) => v.loggingMode === "per_rank_reduce"),
      context,
    );
    this.streamBackends = await BackendSet.start(
      validated.filter((v) => v.loggingMode === "per_rank_no_reduce"),
      context,
    );
    if (this.streamBackends.wantsStream) {
      const backends = this.streamBackends;
      if (this.collector === getCollector()) {
        // Raw values go through this thread's stream ring; the writer hands decoded batches back to these backends.
        this.collector.stream = attachStreamBackends(
          { deliver: (batch) => backends.logStream(batch), settle: (waitMs) => backends.settleStream(waitMs) },
          this.identity,
          message.run.runDir,
        );
        this.usesStreamRing = true;
      } else {
        // A second rank hosted in the same thread (its own collector): the thread's ring belongs to
        // the thread's rank, so this one hands its raw values to its backends directly.
        this.collector.stream = new DirectStreamProducer(backends, this.identity);
      }
    }
    const hyperparams = message.hyperparams;
    if (hyperparams !== undefined)
      await Promise.all([
        this.reduceBackends.logHyperparams(hyperparams),
        this.streamBackends.logHyperparams(hyperparams),
      ]);
  }

  /**
   * Take this rank's states (synchronously, so recording goes on into the next step), log them to
   * the per-rank backends, and return them for the controller.
   */
  async flush(step: number, deadlineMs?: number): Promise<RankSnapshot> {
    this.collector.held.appendHeld(); // before the stream drains: held values' raw copies go with this flush
    const draining = this.drainStream();
    if (draining !== undefined) await draining;
    recordStreamDropped(this.collector);
    if (this.collector === getCollector()) recordRejections(this.collector);
    return this.flushTaken(step, deadlineMs, this.collector.takeStates(), this.takeUndelivered(), this.takeTiming());
  }

  /**
   * A flush answered as one wire frame. When the answer is this collector's values alone — no
   * per-rank reduce backend to log them, no worker thread to gather, no backend's undelivered
   * count, no off-cycle log — `write` takes them straight from the accumulators into the frame
   * (`StateEncoder.encodeTaking`: no state object per key) and this returns the frame. Otherwise,
   * or when `write` throws (it must take nothing then), it flushes as `flush` does and returns the
   * snapshot.
   */
  async flushFrame(
    step: number,
    deadlineMs: number | undefined,
    write: FrameWriter,
  ): Promise<RankSnapshot | FramedFlush> {
    this.collector.held.appendHeld();
    const draining = this.drainStream();
    if (draining !== undefined) await draining;
    recordStreamDropped(this.collector);
    if (this.collector === getCollector()) recordRejections(this.collector);
    const undelivered = this.takeUndelivered();
    const own = this.collector === getCollector();
    const gatherer = own ? workerGatherer() : undefined;
    if (
      undelivered.length === 0 &&
      this.reduceBackends.size === 0 &&
      (gatherer === undefined || gatherer.quiet) &&
      (!own || (offCycleQueue().length === 0 && !hasQueuedAlerts()))
    ) {
      const droppedKeyRecords = this.collector.droppedKeyRecords + (gatherer?.droppedKeyRecords ?? 0);
      const timing = this.takeTiming();
      let frame: Uint8Array | undefined;
      try {
        this.collector.held.appendHeld();
        frame = write(this.collector.entriesInKeyOrder(), droppedKeyRecords, timing);
      } catch {
        // Nothing was taken (a key too long for the frame): the states go as objects below.
      }
      if (frame !== undefined) {
        this.collector.step = step + 1;
        return {
          rankName: this.identity.rankName,
          step,
          droppedKeyRecords,
          bytes: frame,
          ...(timing === undefined ? {} : { timing }),
        };
      }
      return this.flushTaken(step, deadlineMs, this.collector.takeStates(), undelivered, timing);
    }
    return this.flushTaken(step, deadlineMs, this.collector.takeStates(), undelivered, this.takeTiming());
  }

  /**
   * This rank's Tracer step timings since the last flush (taken with its states, in the same
   * synchronous turn), or undefined when it traced nothing.
   */
  private takeTiming(): RankTiming | undefined {
    if (this.collector.timings.empty) return undefined;
    const tracers = this.collector.timings.take();
    return tracers.length === 0 ? undefined : { rank: this.identity.rank, host: HOST, tracers };
  }

  /**
   * Raw values recorded before this flush are queued for the per_rank_no_reduce backends first, in
   * order, so a step's stream lines come before the next step's (a synchronous backend has them
   * when the flush answers; an asynchronous one gets them behind its running call, and what it has
   * not taken yet is its backlog, counted: `rankscope/stream_backlog/{name}`). Bounded by
   * STREAM_FLUSH_WAIT_MS. Undefined when there is no stream to wait for: the caller then takes its
   * states without yielding, so a value recorded after `flush()` was called belongs to the next step.
   */
  private drainStream(): Promise<void> | undefined {
    return this.usesStreamRing ? handStreamToBackends(STREAM_FLUSH_WAIT_MS) : undefined;
  }

  /** What this rank's backends missed since the last flush (rankscope/backend_undelivered/{name}), summed over ranks. */
  private takeUndelivered(): KeyState[] {
    return [...this.reduceBackends.takeUndeliveredStates(), ...this.streamBackends.takeUndeliveredStates()];
  }

  private async flushTaken(
    step: number,
    deadlineMs: number | undefined,
    taken: KeyState[],
    undelivered: readonly KeyState[],
    timing: RankTiming | undefined,
  ): Promise<RankSnapshot> {
    let states = taken;
    if (undelivered.length > 0) {
      states.push(...undelivered);
      states.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    }
    this.collector.step = step + 1;
    let droppedKeyRecords = this.collector.droppedKeyRecords;
    // The process's own collector also speaks for the user's worker threads (record from anywhere).
    const gatherer = this.collector === getCollector() ? workerGatherer() : undefined;
    if (gatherer !== undefined) {
      const wait = Math.min(
        WORKER_FLUSH_DEADLINE_MS,
        deadlineMs === undefined ? WORKER_FLUSH_DEADLINE_MS : Math.max(1, Math.floor(deadlineMs / 2)),
      );
      const workers = await gatherer.collect(wait, step);
      droppedKeyRecords += workers.droppedKeyRecords;
      if (workers.states.length > 0) {
        const rankName = this.identity.rankName;
        states = mergeRankKeyStates(
          [
            { rankName, states },
            ...workers.states.map((s) => ({ rankName: `${rankName} (worker thread)`, states: s })),
          ],
          step,
        );
      }
    }
    if (this.reduceBackends.size > 0 && states.length > 0) {
      await this.reduceBackends.logStates(states, { step, timestamp: Date.now(), rankName: this.identity.rankName });
    }
    const snapshot: RankSnapshot = {
      rankName: this.identity.rankName,
      step,
      states,
      droppedKeyRecords,
      ...(timing === undefined ? {} : { timing }),
    };
    // Off-cycle logs and the user's alert() calls belong to the process: only its own collector's runtime carries them.
    if (this.collector !== getCollector()) return snapshot;
    const queue = offCycleQueue();
    const rankName = this.identity.rankName;
    const alerts = takeQueuedAlerts().map((call) => ({ ...call, rankName }));
    return {
      ...snapshot,
      ...(queue.length === 0 ? {} : { offCycle: queue.splice(0, queue.length) }),
      ...(alerts.length === 0 ? {} : { alerts }),
    };
  }

  /** Finish the per-rank backends. */
  async shutdown(): Promise<void> {
    this.unregisterDrain?.();
    this.unregisterDrain = null;
    await this.stopBackends();
  }

  /**
   * Stop the per-rank backends once, however many ask at the same time: a Ctrl-C reaches a spawned
   * rank as its own signal (its drain) and as its controller's shutdown, and finishing a backend
   * twice at once would finish it under the other's feet (issue 24 case 5).
   */
  private stopBackends(): Promise<void> {
    this.stopping ??= this.stopBackendsOnce().finally(() => (this.stopping = null));
    return this.stopping;
  }

  private async stopBackendsOnce(): Promise<void> {
    // Taken out of use first: a flush answered meanwhile logs to none of them, never to a finished one.
    const reduce = this.reduceBackends;
    const stream = this.streamBackends;
    this.reduceBackends = BackendSet.empty();
    this.streamBackends = BackendSet.empty();
    this.usesStreamRing = false;
    if (this.collector.stream !== null) {
      this.collector.stream = null;
      if (this.collector === getCollector()) await detachStreamBackends();
    }
    await Promise.all([reduce.finish(), stream.finish()]);
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
  /** In this process: this host. */
  readonly host = hostname();
  constructor(readonly runtime: RankRuntime) {}
  get identity(): RankIdentity {
    return this.runtime.identity;
  }
  get rankName(): string {
    return this.runtime.identity.rankName;
  }
  init(message: RankInit): Promise<void> {
    return this.runtime.init(message);
  }
  flush(step: number, deadlineMs?: number): Promise<RankSnapshot> {
    return this.runtime.flush(step, deadlineMs);
  }
  shutdown(): Promise<void> {
    return this.runtime.shutdown();
  }
}
