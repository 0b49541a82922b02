/**
 * Values recorded where no logger ever flushes them (a script that records and never creates one)
 * are never logged: said once, off the hot path — some seconds after the first key if there is
 * still no logger (values may wait for one), and at exit with what was never logged.
 */
import { warn } from "./diagnostics.js";
import { registerDrain } from "./lifecycle.js";

/**
 * What this file reads of a collector (the `Collector` is one). Declared here, not imported: the
 * collector imports this file, and the two would otherwise import each other.
 */
export interface WatchedCollector {
  readonly entries: ReadonlyMap<string, { readonly accumulator: { readonly count: number } }>;
  /** Set once a logger or a rank flushes this collector. */
  readonly hasFlusher: boolean;
  /** Values the process ended with and no logger ever took. */
  neverLogged: number;
}

/** How long after the first key a process with no logger is told (once) that nothing is logged. */
export const NO_LOGGER_WARN_MS = 10_000;

/** Values (and keys) recorded in `collector` and not yet taken by a flush. */
export function pendingValues(collector: WatchedCollector): { keys: number; values: number } {
  let keys = 0;
  let values = 0;
  for (const e of collector.entries.values()) {
    if (e.accumulator.count > 0) {
      keys++;
      values += e.accumulator.count;
    }
  }
  return { keys, values };
}

const NO_LOGGER_HINT =
  "create one in the controller (getOrCreateMetricLogger, then initBackends and flush), or make this process a rank (joinRun, spawnRanks)";

/** Watch `collector` from its first key: warn if no logger flushes it (counted in `neverLogged` at exit). */
export function watchForNoLogger(collector: WatchedCollector): void {
  const timer = setTimeout(() => {
    if (collector.hasFlusher) return;
    const { keys, values } = pendingValues(collector);
    if (values === 0) return;
    warn(
      "collector.noLogger",
      `${values} value(s) in ${keys} key(s) were recorded in this process and no logger exists to flush them; they are kept until one is: ${NO_LOGGER_HINT}`,
    );
  }, NO_LOGGER_WARN_MS);
  timer.unref();
  registerDrain({
    name: "values recorded without a logger",
    stage: "producer",
    exit: () => {
      clearTimeout(timer);
      if (collector.hasFlusher) return;
      const { keys, values } = pendingValues(collector);
      if (values === 0) return;
      collector.neverLogged += values;
      warn(
        "collector.noLoggerAtExit",
        `the process ended with ${values} value(s) in ${keys} key(s) recorded and no logger: they were never logged; ${NO_LOGGER_HINT}`,
      );
    },
  });
}
