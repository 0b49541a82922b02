/**
 * The controller's rank bookkeeping at a flush: ask every registered rank for its states within the
 * flush deadline, and count who answered, of how many, naming the ones that did not. A host
 * agent's handle answers for the ranks of its host (src/transport/host): they are counted one by
 * one, and named when missing.
 */
import type { KeyState } from "../core/collector.js";
import { DEADLINE, withDeadline } from "../core/deadline.js";
import { ALERTS_UNDELIVERED_KEY, RANKS_EXPECTED_KEY, RANKS_REPORTING_KEY } from "../core/internal-keys.js";
import type { RankRef } from "../alerts/engine.js";
import { singleValueState } from "./reduce-states.js";
import type { RankGroupHandle, RankGroupSnapshot, RankHandle, RankSnapshot } from "../transport/protocol/types.js";

/** What the ranks answered to one flush. */
export interface RankAnswers {
  /** The answers that came in time, for this step. */
  readonly snapshots: RankSnapshot[];
  /** Ranks that did not answer in time (a host's ranks one by one). */
  readonly missing: string[];
  /** Ranks registered (the controller's own collector is not counted: it cannot go missing). */
  readonly ranksExpected: number;
  /** Of those, how many answered in time. */
  readonly ranksReporting: number;
}

/** A handle answering for several ranks (a host agent's). */
export function isRankGroupHandle(handle: RankHandle): handle is RankGroupHandle {
  return "memberRanks" in handle && typeof handle.memberRanks === "function";
}

/** The answer of such a handle, which says which of its ranks answered. */
export function isRankGroupSnapshot(snapshot: RankSnapshot): snapshot is RankGroupSnapshot {
  return "group" in snapshot && typeof snapshot.group === "object" && snapshot.group !== null;
}

/** Ask every handle for its states at `step`, waiting at most `deadlineMs`. `own` is the controller's own handle (never counted). */
export async function askRanks(handles: readonly RankHandle[], own: RankHandle, step: number, deadlineMs: number): Promise<RankAnswers> {
  const answers = await Promise.all(handles.map((h) => withDeadline(h.flush(step, deadlineMs).catch(() => undefined), deadlineMs)));
  const snapshots: RankSnapshot[] = [];
  const missing: string[] = [];
  let ranksReporting = 0;
  let ranksExpected = 0;
  for (const [i, handle] of handles.entries()) {
    const answer = answers[i];
    const members = isRankGroupHandle(handle) ? handle.memberRanks() : undefined;
    if (handle !== own) ranksExpected += members?.length ?? 1;
    if (answer === DEADLINE || answer === undefined || answer.step !== step) {
      missing.push(...(members !== undefined && members.length > 0 ? members : [handle.rankName]));
      continue;
    }
    snapshots.push(answer);
    if (isRankGroupSnapshot(answer)) {
      ranksReporting += answer.group.reporting;
      missing.push(...answer.group.missing);
    } else if (handle !== own) ranksReporting++;
  }
  return { snapshots, missing, ranksExpected, ranksReporting };
}

/**
 * How many ranks a step's values come from, as states (means), so a chart of it shows when ranks
 * went missing and a backend with `every: N` averages them over its window.
 */
export function rankCountStates(answers: Pick<RankAnswers, "ranksExpected" | "ranksReporting">): KeyState[] {
  return [
    { key: RANKS_EXPECTED_KEY, reduce: "mean", state: singleValueState(answers.ranksExpected) },
    { key: RANKS_REPORTING_KEY, reduce: "mean", state: singleValueState(answers.ranksReporting) },
  ];
}

/**
 * Ranks named by `names` as alerts name them: number and host from their handle, or from the host
 * agent's handle that answers for them (its host; their numbers are not known there).
 */
export function rankRefs(names: readonly string[], handles: ReadonlyMap<string, RankHandle>): RankRef[] {
  if (names.length === 0) return [];
  const hostOf = new Map<string, string>();
  for (const handle of handles.values()) {
    if (!isRankGroupHandle(handle) || handle.host === undefined) continue;
    for (const member of handle.memberRanks()) hostOf.set(member, handle.host);
  }
  return names.map((rankName) => {
    const handle = handles.get(rankName);
    const host = handle?.host ?? hostOf.get(rankName);
    const rank = handle?.identity?.rank;
    return { rankName, ...(rank === undefined ? {} : { rank }), ...(host === undefined ? {} : { host }) };
  });
}

/** `rankscope/alerts_undelivered` for a flush: logged from the first flush the webhook missed an alert. */
export function alertStates(undelivered: number | undefined): KeyState[] {
  return undelivered === undefined ? [] : [{ key: ALERTS_UNDELIVERED_KEY, reduce: "sum", state: singleValueState(undelivered) }];
}
