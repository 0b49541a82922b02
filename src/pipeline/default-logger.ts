/**
 * The controller's logger as the carriers use it, and the one lookup of this process's default
 * logger. `spawnRanks`, `serveRanksOverNats` and `serveHostsOverNats` register ranks with the
 * logger they are given, else with `getOrCreateMetricLogger()`'s. They live in `src/transport/`,
 * which does not import `src/controller/` (docs/DESIGN.md, "Layout"), so the controller provides
 * its lookup here when `controller/metric-logger.ts` loads, and every entry point that exports a
 * carrier loads it first (`src/index.ts`, `src/nats.ts`, `src/host.ts`).
 *
 * The lookup is this copy of the package's (a module variable, not `processWide`): two copies
 * loaded in one process each provide their own, and both find the one process-wide logger.
 */
import type { RankIdentity } from "../core/rank-identity.js";
import type { RankHandle } from "./rank-handle.js";

/** What a carrier needs of the controller's logger: a `MetricLogger` is one. */
export interface RankController {
  /** The run's id (names the run on NATS). */
  readonly runId: string;
  /** The run's secret, from which the run's NATS messages are sealed. */
  readonly runSecret: string;
  /** Count the rank in every later flush (and send it the backends' config if they started). */
  registerRank(handle: RankHandle): Promise<void>;
  /** Stop asking the rank (only that handle's registration when `handle` is given); false when it was not registered. */
  deregisterRank(rankName: string, handle?: RankHandle): boolean;
  /** A rank fell silent or died: it is counted as lost (and its `rank_lost` alert names `host`) until it answers again. */
  rankLost(identity: RankIdentity, reason: string, host?: string): void;
  /** A lost rank answered or registered again. */
  rankBack(identity: RankIdentity): void;
  /** Run `hook` when the logger shuts down (after its ranks). */
  onShutdown(hook: () => Promise<void> | void): void;
}

let lookup: (() => Promise<RankController>) | undefined;

/** Called by `controller/metric-logger.ts` as it loads, with `getOrCreateMetricLogger`. */
export function provideDefaultLogger(get: () => Promise<RankController>): void {
  lookup = get;
}

/**
 * This process's default logger, `getOrCreateMetricLogger()`: what a carrier registers ranks with
 * when it was given no logger. An Error when the controller was never loaded (an entry point that
 * exports a carrier loads it, so only a deep import of a carrier's module can meet it).
 */
export async function defaultLogger(): Promise<RankController> {
  if (lookup === undefined) {
    throw new Error(
      'rankscope: no MetricLogger in this process to register ranks with: pass { logger } (from getOrCreateMetricLogger() of "rankscope"), or import the carrier from "rankscope", "rankscope/nats" or "rankscope/host"',
    );
  }
  return lookup();
}
