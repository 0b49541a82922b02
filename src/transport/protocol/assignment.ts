/**
 * What `spawnRanks` hands a rank it starts, and how the rank reads it back (shared by the
 * launcher on the controller side and `joinRun` on the rank side).
 */
import { isMainThread, workerData } from "node:worker_threads";
import type { RankIdentity } from "../../core/rank-identity.js";
import { resolveSetting, type Setting } from "../../core/settings.js";

/** What `spawnRanks` hands a rank it starts (in `workerData` or `RANKSCOPE_RANK_ASSIGNMENT`). */
export interface RankAssignment {
  readonly identity: RankIdentity;
  readonly runId: string;
  readonly carrier: "worker" | "ipc" | "nats";
  readonly natsUrl?: string;
  /** Over NATS: the run secret messages are sealed with (in the assignment's environment variable, never on a command line). */
  readonly runSecret?: string;
  /** The rank module (file URL), imported before the rank registers: the one module a `start` request may name. */
  readonly module?: string;
}

/** Environment variable carrying a spawned child's assignment (JSON). */
export const ASSIGNMENT_ENV = "RANKSCOPE_RANK_ASSIGNMENT";

/** The assignment in `RANKSCOPE_RANK_ASSIGNMENT`, read by the one settings resolver (environment only). */
const ASSIGNMENT_SETTING: Setting<RankAssignment | undefined> = {
  owner: "spawnRanks",
  option: "assignment",
  env: ASSIGNMENT_ENV,
  kind: {
    valid: "the JSON object spawnRanks sets (it should not be edited)",
    fromOption: () => undefined,
    fromEnv: (raw) => {
      try {
        const value: unknown = JSON.parse(raw);
        return value !== null && typeof value === "object" ? (value as RankAssignment) : undefined;
      } catch {
        return undefined;
      }
    },
  },
  fallback: undefined,
};

/** The assignment of a rank started by `spawnRanks`, or undefined in any other process. */
export function readAssignment(): RankAssignment | undefined {
  if (!isMainThread && workerData !== null && typeof workerData === "object" && "rankscopeRank" in workerData) {
    return (workerData as { rankscopeRank: RankAssignment }).rankscopeRank;
  }
  return resolveSetting(ASSIGNMENT_SETTING, undefined);
}
