/**
 * Values a process logs outside the flush cycle (the system monitor's samples, on their own axis):
 * they wait, bounded, in one process-wide queue, and the process's own runtime carries them to the
 * controller in its next flush answer (`RankRuntime.flush`).
 */
import { reportError } from "../core/diagnostics.js";
import { processWide } from "../core/process-wide.js";
import type { OffCycleLog } from "./rank-handle.js";

/** At most this many off-cycle logs wait for the next flush; older ones are dropped and counted. */
export const MAX_PENDING_OFF_CYCLE = 1000;

/** The values logged outside the flush cycle that wait for this process's next flush answer. */
export function offCycleQueue(): OffCycleLog[] {
  return processWide("offCycleLogs", (): OffCycleLog[] => []);
}

/** Queue values logged on a rank outside the flush cycle, for the controller (bounded). */
export function queueOffCycleLog(log: OffCycleLog): void {
  const queue = offCycleQueue();
  if (queue.length >= MAX_PENDING_OFF_CYCLE) {
    queue.shift();
    reportError(
      "rank.offCycleFull",
      `more than ${MAX_PENDING_OFF_CYCLE} off-cycle logs (system monitor) waited for a flush; the oldest are dropped and counted. Flush more often, or log less often.`,
    );
  }
  queue.push(log);
}
