/**
 * A set of running backends, called so that one failing or hanging backend never costs the others
 * their data: every call is isolated and has a deadline, backends are called concurrently, a
 * failure or a missed deadline is reported with the backend's name (once per kind, then counted),
 * and what a backend did not get is counted per backend (`undelivered`) and logged as
 * `rankscope/backend_undelivered/{name}`.
 *
 * A backend that misses a deadline keeps its late call running (we cannot cancel it), but gets no
 * new calls until that call settles: they are skipped and counted, so nothing queues behind a hung
 * promise and memory stays bounded. One call into one backend is `backend-call.ts`.
 */
import type { Backend, BackendContext } from "../backends/backend.js";
import type { AlertEvent } from "../core/alert.js";
import type { KeyState } from "../core/key-state.js";
import { reportError } from "../core/diagnostics.js";
import type { RankLoss, StreamRecord } from "../core/metric.js";
import type { RankTimingRecord } from "../core/straggler-report.js";
import type { ValidatedBackend } from "./config.js";
import {
  mergeRankKeyStates,
  reduceStates,
  singleValueState,
  type ReducedFlush,
  type ReduceTarget,
} from "./reduce-states.js";
import {
  BACKEND_UNDELIVERED_KEY_PREFIX,
  STREAM_BACKEND_DROPPED_KEY_PREFIX,
  STREAM_BACKLOG_KEY_PREFIX,
} from "../core/internal-keys.js";
import { StreamQueue } from "./stream-queue.js";
import { call, deliver, reportBackendError, startCall, type LiveBackend } from "./backend-call.js";

/** Default deadline of one backend call (ms): `backendDeadlineMs` / `RANKSCOPE_BACKEND_DEADLINE_MS` override it. */
export const DEFAULT_BACKEND_DEADLINE_MS = 10_000;

/** Prefix of the keys that count, per backend, the calls it did not get (`{prefix}{name}`). */
export { BACKEND_UNDELIVERED_KEY_PREFIX };

/** What one backend did not get, since it started. */
export interface BackendDeliveryStats {
  /** Calls that did not settle within the deadline (the backend may or may not have got them). */
  readonly late: number;
  /** Calls not made because an earlier call of this backend was still running past its deadline. */
  readonly skipped: number;
  /** Calls that threw or rejected. */
  readonly failed: number;
  /** late + skipped + failed: the calls whose data this backend may not have. */
  readonly undelivered: number;
  /** A backend that takes `logStream`: raw stream records queued for it (or in its running call), not yet delivered. */
  readonly streamBacklog?: number;
  /** A backend that takes `logStream`: raw stream records dropped for it because its backlog was full. */
  readonly streamDropped?: number;
}

/** Backends of one place (the controller, or one rank), created from validated configs. */
export class BackendSet {
  private constructor(private readonly live: LiveBackend[]) {}

  /** An empty set. */
  static empty(): BackendSet {
    return new BackendSet([]);
  }

  /**
   * Create and `init` each backend, concurrently. A backend whose factory or `init` fails is
   * reported and left out; the others start. An `init` that misses its deadline (the backend's
   * `deadlineMs` option, else `defaultDeadlineMs`) is reported and the backend joins the set as
   * stuck: its calls are skipped and counted until `init` settles (and for good if it then fails).
   */
  static async start(
    backends: readonly ValidatedBackend[],
    contextFor: (backend: ValidatedBackend) => BackendContext,
    defaultDeadlineMs: number = DEFAULT_BACKEND_DEADLINE_MS,
  ): Promise<BackendSet> {
    const live: LiveBackend[] = [];
    await Promise.all(
      backends.map(async (v) => {
        let entry: LiveBackend;
        try {
          const backend = v.registration.factory(v.options);
          const context = contextFor(v);
          const every = typeof v.options.every === "number" ? v.options.every : 1;
          const deadlineMs = typeof v.options.deadlineMs === "number" ? v.options.deadlineMs : defaultDeadlineMs;
          entry = {
            name: v.name,
            backend,
            context,
            every,
            deadlineMs,
            stuck: null,
            dead: false,
            late: 0,
            skippedCalls: 0,
            failed: 0,
            undeliveredSinceTaken: 0,
            faulted: false,
            heldFlushes: 0,
            pending: [],
            pendingTarget: null,
            stream: null,
          };
          const live = entry;
          if (backend.logStream !== undefined)
            live.stream = new StreamQueue(v.name, (batch) =>
              startCall(live, "logStream", () => live.backend.logStream?.(batch)),
            );
        } catch (error) {
          reportBackendError(v.name, "init", error);
          return;
        }
        const outcome = await call(entry, "init", () => entry.backend.init?.(entry.context), {
          onLateFailure: () => (entry.dead = true),
        });
        if (outcome !== "failed") live.push(entry);
      }),
    );
    live.sort((a, b) => (a.name < b.name ? -1 : 1));
    return new BackendSet(live);
  }

  /** What each backend did not get since it started, by config name. */
  deliveryStats(): Record<string, BackendDeliveryStats> {
    const out: Record<string, BackendDeliveryStats> = {};
    for (const l of this.live) {
      const calls = {
        late: l.late,
        skipped: l.skippedCalls,
        failed: l.failed,
        undelivered: l.late + l.skippedCalls + l.failed,
      };
      out[l.name] =
        l.stream === null ? calls : { ...calls, streamBacklog: l.stream.backlog, streamDropped: l.stream.dropped };
    }
    return out;
  }

  /**
   * One `sum` state per backend that has ever missed a call: how many calls it missed since the
   * last time this was taken (`rankscope/backend_undelivered/{name}`), so a chart shows when and
   * how much, and summing over ranks or held flushes (`every`) stays exact. Resets the per-flush counts.
   */
  takeUndeliveredStates(): KeyState[] {
    const states: KeyState[] = [];
    for (const l of this.live) {
      if (l.faulted) {
        states.push({
          key: `${BACKEND_UNDELIVERED_KEY_PREFIX}${l.name}`,
          reduce: "sum",
          state: singleValueState(l.undeliveredSinceTaken),
        });
        l.undeliveredSinceTaken = 0;
      }
      states.push(...streamQueueStates(l));
    }
    return states;
  }

  /** Names of the running backends. */
  get names(): string[] {
    return this.live.map((l) => l.name);
  }

  get size(): number {
    return this.live.length;
  }

  /** True if any backend takes raw stream records. */
  get wantsStream(): boolean {
    return this.live.some((l) => l.backend.logStream !== undefined);
  }

  /**
   * Reduce the (already merged) states of one flush and hand them to every backend, each
   * independently. A backend with `every: N` logs only every N-th flush: the states of the flushes
   * it skips are kept and merged into the one it logs, so its values cover everything recorded
   * (a SUM is the sum over the N steps, a MEAN the mean of every value). Returns the flush as
   * reduced for the backends that log every flush.
   */
  async logStates(states: readonly KeyState[], target: ReduceTarget): Promise<ReducedFlush> {
    const reduced = reduceStates(states, target);
    // Backends with the same `every` keep the same flushes (they start together and skip in step):
    // their kept states are merged and reduced once, and the result handed to each.
    const kept = new PendingByEvery();
    await Promise.all(
      this.live.map(async (live) => {
        if (live.every <= 1) return deliver(live, reduced, target.step);
        live.pending.push(states);
        live.pendingTarget = target;
        live.heldFlushes++;
        if (live.heldFlushes < live.every) return undefined;
        return deliver(live, kept.take(live, target), target.step);
      }),
    );
    return reduced;
  }

  /**
   * Hand an already reduced flush to every backend, each independently, bypassing `every` (for
   * one-off logs: the facade's histograms, the system monitor on its own axis).
   */
  async logFlush(flush: ReducedFlush, step: number): Promise<void> {
    await Promise.all(this.live.map((live) => deliver(live, flush, step)));
  }

  /**
   * Queue raw records for every backend that takes them (each its own queue: in order, one call at
   * a time, bounded; stream-queue.ts). A synchronous backend gets them now. Never throws, never waits.
   */
  logStream(batch: readonly StreamRecord[]): void {
    for (const l of this.live) l.stream?.push(batch);
  }

  /**
   * Wait until every stream backend has been handed the records queued so far (not those queued
   * meanwhile), at most `waitMs`; a backend still behind then keeps its backlog, counted.
   */
  async settleStream(waitMs: number): Promise<void> {
    await Promise.all(this.live.flatMap((l) => (l.stream === null ? [] : [l.stream.settled(waitMs)])));
  }

  /** Hand one flush's per-rank timings and straggler report to every backend that takes them (the store). */
  async logRankTiming(record: RankTimingRecord): Promise<void> {
    await Promise.all(
      this.live
        .filter((l) => l.backend.logRankTiming !== undefined)
        .map((live) => call(live, "logRankTiming", () => live.backend.logRankTiming?.(record))),
    );
  }

  /** Hand the run's hyperparameters to every backend that takes them. */
  logHyperparams(params: Readonly<Record<string, unknown>>): Promise<void> {
    return this.each("logHyperparams", (b) => b.logHyperparams?.(params));
  }

  /**
   * Hand an alert event to every backend that records alerts (each call isolated, with its
   * deadline, like every other call). Not awaited by a flush: the caller may `void` it.
   */
  logAlert(alert: AlertEvent): Promise<void> {
    return this.each("logAlert", (b) => b.logAlert?.(alert));
  }

  /** Tell the backends that keep rank losses (the store) that a rank was lost or came back. */
  logRankLoss(loss: RankLoss): Promise<void> {
    return this.each("logRankLoss", (b) => b.logRankLoss?.(loss));
  }

  /** Whether a backend of this set keeps this kind of run event (the store: alerts and rank losses). */
  takes(method: "logAlert" | "logRankLoss"): boolean {
    return this.live.some((l) => l.backend[method] !== undefined);
  }

  /** What each backend hands to its per-rank instances, by config name. */
  metadataForRanks(): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    for (const { name, backend } of this.live) {
      // Synchronous by contract: no deadline can apply, a throw is isolated.
      try {
        const metadata = backend.metadataForRanks?.();
        if (metadata !== undefined) out[name] = { ...metadata };
      } catch (error) {
        reportBackendError(name, "metadataForRanks", error);
      }
    }
    return out;
  }

  /**
   * Finish every backend (each independently). A backend with `every: N` first logs the flushes it
   * held since its last log, at the last of their steps, so nothing recorded is lost.
   */
  async finish(): Promise<void> {
    const kept = new PendingByEvery();
    await Promise.all(
      this.live.map(async (live) => {
        const target = live.pendingTarget;
        if (live.pending.length > 0 && target !== null) await deliver(live, kept.take(live, target), target.step);
        // Its stream backlog first, within its deadline; what is still queued after it is counted.
        if (live.stream !== null && !(await live.stream.settled(live.deadlineMs))) {
          reportError(
            `backend.streamBacklog:${live.name}`,
            `backend "${live.name}" still had ${live.stream.backlog} stream record(s) to take when it was finished (its deadline is ${live.deadlineMs} ms); they are not delivered to it`,
          );
        }
      }),
    );
    return this.each("finish", (b) => b.finish?.());
  }

  private async each(method: string, fn: (backend: Backend) => unknown): Promise<void> {
    await Promise.all(this.live.map((live) => call(live, method, () => fn(live.backend))));
  }
}

/**
 * A stream backend's counts at a flush, once it was ever behind or dropped: its backlog now
 * (`rankscope/stream_backlog/{name}`) and what it dropped since the last flush
 * (`rankscope/stream_backend_dropped/{name}`), both summed over ranks.
 */
function streamQueueStates(live: LiveBackend): KeyState[] {
  const queue = live.stream;
  if (queue === null) return [];
  const backlog = queue.backlog;
  if (backlog > 0) queue.seen = true;
  if (!queue.seen) return [];
  return [
    { key: `${STREAM_BACKLOG_KEY_PREFIX}${live.name}`, reduce: "sum", state: singleValueState(backlog) },
    {
      key: `${STREAM_BACKEND_DROPPED_KEY_PREFIX}${live.name}`,
      reduce: "sum",
      state: singleValueState(queue.takeDropped()),
    },
  ];
}

/**
 * The kept states of the backends with `every: N` at one flush, merged and reduced once per
 * distinct kept list: backends that kept the same flushes (the same states, in the same order: all
 * those with the same `every`) get the same reduced flush, which backends only read.
 */
class PendingByEvery {
  private readonly taken: { pending: readonly (readonly KeyState[])[]; target: ReduceTarget; flush: ReducedFlush }[] =
    [];

  /** `live`'s kept states reduced (by an earlier backend with the same ones, or now), and forgotten. */
  take(live: LiveBackend, target: ReduceTarget): ReducedFlush {
    const same = this.taken.find((t) => t.target === target && samePending(t.pending, live.pending));
    if (same === undefined) {
      const pending = live.pending;
      const flush = takePending(live, target);
      this.taken.push({ pending, target, flush });
      return flush;
    }
    live.pending = [];
    live.pendingTarget = null;
    live.heldFlushes = 0;
    return same.flush;
  }
}

/** True when two backends kept the very same flushes' states (the same arrays, in the same order). */
function samePending(a: readonly (readonly KeyState[])[], b: readonly (readonly KeyState[])[]): boolean {
  return a.length === b.length && a.every((states, i) => states === b[i]);
}

/** Merge and reduce the states a backend kept for its `every: N`, and forget them. */
function takePending(live: LiveBackend, target: ReduceTarget): ReducedFlush {
  const merged = mergeRankKeyStates(
    live.pending.map((states) => ({ rankName: live.name, states })),
    target.step,
  );
  live.pending = [];
  live.pendingTarget = null;
  live.heldFlushes = 0;
  return reduceStates(merged, target);
}
