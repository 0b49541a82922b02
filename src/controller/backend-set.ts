/**
 * A set of running backends, called so that one failing backend never costs the others their
 * data: every call is isolated, a failure is reported with the backend's name (once per kind of
 * error, then counted) and the others go on.
 */
import type { Backend, BackendContext } from "../backends/backend.js";
import { describeError, reportError } from "../core/diagnostics.js";
import type { StreamRecord } from "../core/metric.js";
import type { ValidatedBackend } from "./config.js";
import type { ReducedFlush } from "./reduce-states.js";

interface LiveBackend {
  readonly name: string;
  readonly backend: Backend;
  readonly context: BackendContext;
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
          live.push({ name: v.name, backend, context });
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

  /** Hand one flush to every backend, each independently; resolves when all have finished or failed. */
  async logFlush(flush: ReducedFlush, step: number): Promise<void> {
    const hasSamples = Object.keys(flush.samples).length > 0;
    await Promise.all(
      this.live.map(async ({ name, backend }) => {
        await call(name, "logBatch", () => backend.logBatch(flush.metrics, step));
        if (flush.histograms.length > 0 && backend.logHistograms !== undefined) {
          await call(name, "logHistograms", () => backend.logHistograms?.(flush.histograms, step));
        }
        if (hasSamples && backend.logSamples !== undefined) {
          await call(name, "logSamples", () => backend.logSamples?.(flush.samples, step));
        }
        if (backend.flushed !== undefined) await call(name, "flushed", () => backend.flushed?.());
      }),
    );
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

  /** Finish every backend (each independently). */
  finish(): Promise<void> {
    return this.each("finish", (b) => b.finish?.());
  }

  private async each(method: string, fn: (backend: Backend) => unknown): Promise<void> {
    await Promise.all(this.live.map(({ name, backend }) => call(name, method, () => fn(backend))));
  }
}

async function call(name: string, method: string, fn: () => unknown): Promise<void> {
  try {
    await fn();
  } catch (error) {
    reportBackendError(name, method, error);
  }
}
