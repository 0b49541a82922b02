/**
 * One call into one running backend, so that a failing or hanging backend costs only itself: the
 * call is isolated (a throw or rejection is reported with the backend's name, once per kind, and
 * counted), has the backend's deadline (a call that misses it is reported and counted, and the
 * caller goes on), and is skipped and counted while an earlier call of the backend is still running
 * past its deadline. `BackendSet` (`backend-set.ts`) makes these calls for every backend of a place.
 */
import type { Backend, BackendContext } from "../backends/backend.js";
import type { KeyState } from "../core/key-state.js";
import { DEADLINE, isPromiseLike, withDeadline } from "../core/deadline.js";
import { describeError, reportError } from "../core/diagnostics.js";
import type { ReducedFlush, ReduceTarget } from "./reduce-states.js";
import type { StreamQueue } from "./stream-queue.js";

/** One running backend: how it is called, and what it missed. */
export interface LiveBackend {
  readonly name: string;
  readonly backend: Backend;
  readonly context: BackendContext;
  /** How long one call may take before it is reported and the caller goes on. */
  readonly deadlineMs: number;
  /** A call still running past its deadline (no new calls until it settles), or null. */
  stuck: { readonly method: string; readonly since: number } | null;
  /** An `init` that failed after its deadline: the backend never started, every call is skipped. */
  dead: boolean;
  late: number;
  skippedCalls: number;
  failed: number;
  /** Undelivered calls since the last `takeUndeliveredStates` (logged as a per-flush count). */
  undeliveredSinceTaken: number;
  /** True once the backend missed anything: its counter key is logged from then on. */
  faulted: boolean;
  /** Log every N-th flush (the `every` option; 1 = every flush). */
  readonly every: number;
  /**
   * Flushes held back by `every` since the last one logged (not `BackendDeliveryStats.skipped`,
   * which counts calls not made to a hung backend).
   */
  heldFlushes: number;
  /** States of the held flushes, merged into the next one logged. */
  pending: (readonly KeyState[])[];
  /** Where the last held flush was going (for a final log at finish). */
  pendingTarget: ReduceTarget | null;
  /** Its queue of raw stream records, when it takes `logStream` (stream-queue.ts). */
  stream: StreamQueue | null;
}

function errorKind(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/** Report a backend failure: once per backend, method and kind of error; always counted. */
export function reportBackendError(name: string, method: string, error: unknown): void {
  reportError(
    `backend.${method}:${name}:${errorKind(error)}`,
    `backend "${name}" failed in ${method}: ${describeError(error)}; the other backends still get their data`,
  );
}

/** Hand one reduced flush to one backend; every call isolated, with a deadline, reported on failure. */
export async function deliver(live: LiveBackend, flush: ReducedFlush, step: number): Promise<void> {
  const { backend } = live;
  await call(live, "logBatch", () => backend.logBatch(flush.metrics, step));
  if (flush.histograms.length > 0 && backend.logHistograms !== undefined) {
    await call(live, "logHistograms", () => backend.logHistograms?.(flush.histograms, step));
  }
  if (Object.keys(flush.samples).length > 0 && backend.logSamples !== undefined) {
    await call(live, "logSamples", () => backend.logSamples?.(flush.samples, step));
  }
  if (backend.flushed !== undefined) await call(live, "flushed", () => backend.flushed?.());
}

function missed(live: LiveBackend): void {
  live.undeliveredSinceTaken++;
  live.faulted = true;
}

/**
 * One call into a backend: skipped (and counted) while an earlier call is still running past its
 * deadline; a throw or rejection is reported and counted; a call that does not settle within the
 * backend's deadline is reported by name and counted, and the caller goes on. A synchronous
 * backend costs no timer. `finish` is always attempted (it may be what unblocks a hung backend).
 */
export function call(
  live: LiveBackend,
  method: string,
  fn: () => unknown,
  hooks: CallHooks = {},
): Promise<CallOutcome> {
  return Promise.resolve(startCall(live, method, fn, hooks));
}

export type CallOutcome = "ok" | "failed" | "late" | "skipped";

/** What a call does when the backend answers after its deadline. */
export interface CallHooks {
  onLateFailure?: () => void;
}

/**
 * `call`, with the outcome of a synchronous backend (or a skipped call) returned synchronously, so
 * a stream queue hands a synchronous backend its batches without yielding.
 */
export function startCall(
  live: LiveBackend,
  method: string,
  fn: () => unknown,
  hooks: CallHooks = {},
): CallOutcome | Promise<CallOutcome> {
  const { name } = live;
  if (live.dead || (live.stuck !== null && method !== "finish")) {
    live.skippedCalls++;
    missed(live);
    const why = live.dead
      ? "its init failed after its deadline"
      : `its ${live.stuck?.method} call has not answered for ${Date.now() - (live.stuck?.since ?? 0)} ms`;
    reportError(
      `backend.skipped:${name}`,
      `backend "${name}" did not get a ${method} call: ${why}; its calls are skipped and counted (rankscope/backend_undelivered/${name}) until it answers`,
    );
    return "skipped";
  }
  let result: unknown;
  try {
    result = fn();
  } catch (error) {
    live.failed++;
    missed(live);
    reportBackendError(name, method, error);
    return "failed";
  }
  if (!isPromiseLike(result)) return "ok";
  return settleCall(live, method, result, hooks);
}

/** The asynchronous end of `startCall`: the backend's promise, within its deadline. */
async function settleCall(
  live: LiveBackend,
  method: string,
  result: PromiseLike<unknown>,
  hooks: CallHooks,
): Promise<CallOutcome> {
  const { name } = live;
  let failed = false;
  const settled = Promise.resolve(result).then(
    () => undefined,
    (error: unknown) => {
      failed = true;
      reportBackendError(name, method, error);
    },
  );
  const outcome = await withDeadline(settled, live.deadlineMs);
  if (outcome !== DEADLINE) {
    if (!failed) return "ok";
    live.failed++;
    missed(live);
    return "failed";
  }
  live.late++;
  missed(live);
  const stuck = { method, since: Date.now() - live.deadlineMs };
  live.stuck = stuck;
  void settled.then(() => {
    if (live.stuck === stuck) live.stuck = null;
    if (failed) hooks.onLateFailure?.();
  });
  reportError(
    `backend.deadline:${name}:${method}`,
    `backend "${name}" did not answer ${method} within ${live.deadlineMs} ms; the other backends and the caller went on, and its calls are skipped and counted (rankscope/backend_undelivered/${name}) until it answers. Set its deadlineMs option (or backendDeadlineMs) if it is only slow.`,
  );
  return "late";
}
