/**
 * What `spawnRanks` hands a rank it starts, and how the rank reads it back (shared by the
 * launcher on the controller side and `joinRun` on the rank side).
 */
import { isMainThread, workerData } from "node:worker_threads";
import type { RankIdentity } from "../../backends/backend.js";

/** What `spawnRanks` hands a rank it starts (in `workerData` or `RANKSCOPE_RANK_ASSIGNMENT`). */
export interface RankAssignment {
  readonly identity: RankIdentity;
  readonly runId: string;
  readonly carrier: "worker" | "ipc" | "nats";
  readonly natsUrl?: string;
  /** The rank module (file URL), imported before the rank registers. */
  readonly module?: string;
}

/** Environment variable carrying a spawned child's assignment (JSON). */
export const ASSIGNMENT_ENV = "RANKSCOPE_RANK_ASSIGNMENT";

/** The assignment of a rank started by `spawnRanks`, or undefined in any other process. */
export function readAssignment(): RankAssignment | undefined {
  if (!isMainThread && workerData !== null && typeof workerData === "object" && "rankscopeRank" in workerData) {
    return (workerData as { rankscopeRank: RankAssignment }).rankscopeRank;
  }
  const raw = process.env[ASSIGNMENT_ENV];
  if (raw === undefined || raw === "") return undefined;
  try {
    return JSON.parse(raw) as RankAssignment;
  } catch {
    throw new TypeError(`${ASSIGNMENT_ENV} is not valid JSON; it is set by spawnRanks and should not be edited`);
  }
}
