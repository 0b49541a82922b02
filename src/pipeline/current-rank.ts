/**
 * Who this process (or worker thread) is in the job: the identity a transport sets when it joins a
 * run as a rank, else the run's controller's, else rank 0 of one; and the identities of a
 * standalone process and of the controller's own collector.
 */
import { DEFAULT_PROCESS_NAME, type RankIdentity } from "../core/rank-identity.js";
import { peekProcessWide, setProcessWide } from "../core/process-wide.js";
import { currentRun } from "../run/current.js";

/** The identity of a process that nobody told who it is: rank 0 of one. */
export function standaloneIdentity(processName: string): RankIdentity {
  return { rank: 0, rankName: processName, processName, localRank: 0, localWorldSize: 1 };
}

/** The controller's own identity: its collector's values are a line of their own, never rank 0's. */
export function controllerIdentity(processName: string): RankIdentity {
  return { ...standaloneIdentity(processName), role: "controller" };
}

/**
 * Who this process (or worker thread) is in the job: its rank, rank name, and place in its replica
 * (Forge's `current_rank()`). Set when the process joins a run as a rank; otherwise the identity of
 * the run's controller, or rank 0 of one.
 */
export function currentRank(): RankIdentity {
  return (
    peekProcessWide<RankIdentity>("rankIdentity") ?? currentRun()?.identity ?? standaloneIdentity(DEFAULT_PROCESS_NAME)
  );
}

/** Record who this process is (the transports call this when a rank joins a run). */
export function setCurrentRank(identity: RankIdentity): void {
  setProcessWide("rankIdentity", identity);
}
