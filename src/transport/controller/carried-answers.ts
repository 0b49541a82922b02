/**
 * Flush answers a remote rank's handle carries: an answer that arrived after its flush's deadline
 * is merged (exactly: accumulator states merge) into the rank's next answer in time, with the
 * answer numbers (`seq`) of every answer merged, so all are acknowledged once logged; and the held
 * answer of a rank still registering, which carries nothing.
 */
import { reportError } from "../../core/diagnostics.js";
import { newestAlerts } from "../../alerts/user-alert.js";
import { mergeRankKeyStates } from "../../pipeline/reduce-states.js";
import { mergeTracerTimings, type RankTiming } from "../../core/step-timing.js";
import type { OffCycleLog, RankSnapshot } from "../../pipeline/rank-handle.js";

/** At most this many off-cycle logs are carried per rank; older ones are dropped and counted. */
const MAX_CARRIED_OFF_CYCLE = 1000;

/**
 * The empty answer of a rank that is registering (`RankAgent.holdFlushes`): no number, no states,
 * nothing else. Its values are still in the rank's collector, so it is dropped without a word
 * when no request waits for it (a flush broadcast before the rank registered).
 */
export function isHeldAnswer(snapshot: RankSnapshot): boolean {
  return (
    snapshot.seq === undefined &&
    snapshot.states.length === 0 &&
    snapshot.offCycle === undefined &&
    snapshot.alerts === undefined &&
    snapshot.timing === undefined
  );
}

/** The flush-answer numbers a merged snapshot holds (`carrySnapshot` notes them), to acknowledge them all once logged. */
const mergedSeqs = new WeakMap<RankSnapshot, readonly number[]>();

/** The numbers (`seq`) of the flush answers a snapshot holds: its own, or all those `carrySnapshot` merged into it. */
export function answerSeqs(snapshot: RankSnapshot): readonly number[] {
  return mergedSeqs.get(snapshot) ?? (snapshot.seq === undefined ? [] : [snapshot.seq]);
}

/**
 * One snapshot holding both `earlier`'s values and `later`'s (exact: accumulator states merge), at
 * `later`'s step. Used for flush answers that arrived after their deadline: they join the next one.
 */
export function carrySnapshot(earlier: RankSnapshot | null, later: RankSnapshot): RankSnapshot {
  if (earlier === null) return later;
  const merged = mergeSnapshots(earlier, later);
  mergedSeqs.set(merged, [...answerSeqs(earlier), ...answerSeqs(later)]);
  return merged;
}

function mergeSnapshots(earlier: RankSnapshot, later: RankSnapshot): RankSnapshot {
  let offCycle: OffCycleLog[] = [...(earlier.offCycle ?? []), ...(later.offCycle ?? [])];
  if (offCycle.length > MAX_CARRIED_OFF_CYCLE) {
    const dropped = offCycle.length - MAX_CARRIED_OFF_CYCLE;
    offCycle = offCycle.slice(dropped);
    reportError(
      "rank.offCycleFull",
      `rank ${later.rankName}: ${dropped} off-cycle logs (system monitor) carried over late flushes exceeded ${MAX_CARRIED_OFF_CYCLE}; the oldest are dropped and counted`,
    );
  }
  // The user's alert() calls of both: the newest that one answer may carry.
  const alerts = newestAlerts(earlier.alerts, later.alerts, `rank ${later.rankName}'s late answers`);
  return {
    rankName: later.rankName,
    step: later.step,
    states: mergeRankKeyStates(
      [
        { rankName: earlier.rankName, states: earlier.states },
        { rankName: later.rankName, states: later.states },
      ],
      later.step,
    ),
    droppedKeyRecords: Math.max(earlier.droppedKeyRecords, later.droppedKeyRecords),
    ...(offCycle.length > 0 ? { offCycle } : {}),
    ...(alerts.length > 0 ? { alerts } : {}),
    ...carriedTiming(earlier.timing, later.timing),
  };
}

/** The timings of a late answer and the next one together (their sums add), as a snapshot field. */
function carriedTiming(earlier: RankTiming | undefined, later: RankTiming | undefined): { timing?: RankTiming } {
  if (earlier === undefined) return later === undefined ? {} : { timing: later };
  if (later === undefined) return { timing: earlier };
  return { timing: { ...later, tracers: mergeTracerTimings(earlier.tracers, later.tracers) } };
}

/** How many answer numbers a handle remembers as seen or logged (a rank keeps at most 16 answers). */
const MAX_REMEMBERED_SEQS = 256;

/** Add `seq` to a bounded set of answer numbers, forgetting the oldest past `MAX_REMEMBERED_SEQS`. */
export function remember(set: Set<number>, seq: number): void {
  set.add(seq);
  if (set.size <= MAX_REMEMBERED_SEQS) return;
  const oldest = set.values().next();
  if (oldest.done !== true) set.delete(oldest.value);
}
