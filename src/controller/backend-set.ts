/**
 * A set of running backends, called so that one failing backend never costs the others their
 * data: every call is isolated, a failure is reported with the backend's name (once per kind of
 * error, then counted) and the others go on.
 */
import type { Backend, BackendContext } from "../backends/backend.js";
import type { KeyState } from "../core/collector.js";
import { describeError, reportError } from "../core/diagnostics.js";
import type { StreamRecord } from "../core/metric.js";
import type { ValidatedBackend } from "./config.js";
import { mergeRankKeyStates, reduceStates, type ReducedFlush, type ReduceTarget } from "./reduce-states.js";

interface LiveBackend {
  readonly name: string;
  readonly backend: Backend;
  readonly context: BackendContext;
  /** Log every N-th flush (the `every` option; 1 = every flush). */
  readonly every: number;
  /** Flushes seen since the last one logged. */
  skipped: number;
  /** States of the skipped flushes, merged into the next one logged. */
  pending: KeyState[][];
  /** Where the last skipped flush was going (for a final log at finish). */
  pendingTarget: ReduceTarget | null;
}

function errorKind(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/** Report a backend failure: once per backend, method and kind of error; always counted. */
export function reportBackendError(name: string, method: string, error: unknown): void {
  reportError(`backend.${method}:${name}:${errorKind(error)}`, `backend "${name}" failed in ${method}: ${describeError(error)}; the other backends still get their data`);
}

/** Backends of one place (the controller, or one rank), created from validated configs. */
export class BackendSet {
  private constructor(private readonly live: LiveBackend[]) {}

  /** An empty set. */
  static empty(): BackendSet {
    return new BackendSet([]);
  }

  /**
   * Create and `init` each backend. A backend whose factory or `init` fails is reported and left
   * out; the others start.
   */
  static async start(backends: readonly ValidatedBackend[], contextFor: (backend: ValidatedBackend) => BackendContext): Promise<BackendSet> {
    const live: LiveBackend[] = [];
    await Promise.all(
      backends.map(async (v) => {
        try {
          const backend = v.registration.factory(v.options);
          const context = contextFor(v);
          await backend.init?.(context);
          const every = typeof v.options.every === "number" ? v.options.every : 1;
          live.push({ name: v.name, backend, context, every, skipped: 0, pending: [], pendingTarget: null });
        } catch (error) {
          reportBackendError(v.name, "init", error);
        }
      }),
    );
    live.sort((a, b) => (a.name < b.name ? -1 : 1));
    return new BackendSet(live);
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
    await Promise.all(
      this.live.map(async (live) => {
        if (live.every <= 1) return deliver(live, reduced, target.step);
        live.pending.push(states as KeyState[]);
        live.pendingTarget = target;
        live.skipped++;
        if (live.skipped < live.every) return undefined;
        return deliver(live, takePending(live, target), target.step);
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

  /** Hand raw records to every backend that takes them. Never throws. */
  logStream(batch: readonly StreamRecord[]): Promise<void> {
    return this.each("logStream", (b) => b.logStream?.(batch));
  }

  /** Hand the run's hyperparameters to every backend that takes them. */
  logHyperparams(params: Readonly<Record<string, unknown>>): Promise<void> {
    return this.each("logHyperparams", (b) => b.logHyperparams?.(params));
  }

  /** What each backend hands to its per-rank instances, by config name. */
  metadataForRanks(): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    for (const { name, backend } of this.live) {
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
   * skipped since its last log, at the last of their steps, so nothing recorded is lost.
   */
  async finish(): Promise<void> {
    await Promise.all(
      this.live.map(async (live) => {
        const target = live.pendingTarget;
        if (live.pending.length > 0 && target !== null) await deliver(live, takePending(live, target), target.step);
      }),
    );
    return this.each("finish", (b) => b.finish?.());
  }

  private async each(method: string, fn: (backend: Backend) => unknown): Promise<void> {
    await Promise.all(this.live.map(({ name, backend }) => call(name, method, () => fn(backend))));
  }
}

/** Merge and reduce the states a backend kept for its `every: N`, and forget them. */
function takePending(live: LiveBackend, target: ReduceTarget): ReducedFlush {
  const merged = mergeRankKeyStates(
    live.pending.map((states) => ({ rankName: live.name, states })),
    target.step,
  );
  live.pending = [];
  live.pendingTarget = null;
  live.skipped = 0;
  return reduceStates(merged, target);
}

/** Hand one reduced flush to one backend; every call isolated and reported on failure. */
async function deliver({ name, backend }: LiveBackend, flush: ReducedFlush, step: number): Promise<void> {
  await call(name, "logBatch", () => backend.logBatch(flush.metrics, step));
  if (flush.histograms.length > 0 && backend.logHistograms !== undefined) {
    await call(name, "logHistograms", () => backend.logHistograms?.(flush.histograms, step));
  }
  if (Object.keys(flush.samples).length > 0 && backend.logSamples !== undefined) {
    await call(name, "logSamples", () => backend.logSamples?.(flush.samples, step));
  }
  if (backend.flushed !== undefined) await call(name, "flushed", () => backend.flushed?.());
}

async function call(name: string, method: string, fn: () => unknown): Promise<void> {
  try {
    await fn();
  } catch (error) {
    reportBackendError(name, method, error);
  }
}
