/**
 * The controller's rank bookkeeping at a flush: ask every registered rank for its states within the
 * flush deadline, and count who answered, of how many, naming the ones that did not. A host
 * agent's handle answers for the ranks of its host (src/transport/host): they are counted one by
 * one, and named when missing.
 */
import type { KeyState } from "../core/key-state.js";
import { DEADLINE, withDeadline } from "../core/deadline.js";
import type { RankRef } from "../alerts/engine.js";
import { warn } from "../core/diagnostics.js";
import {
  ALERTS_UNDELIVERED_KEY,
  DROPPED_KEY_RECORDS_KEY,
  RANKS_EXPECTED_KEY,
  RANKS_REPORTING_KEY,
} from "../core/internal-keys.js";
import { appendRankTiming, appendTimingColumns, emptyTimingColumns, type TimingColumns } from "../core/step-timing.js";
import { mergeRankKeyStates, singleValueState } from "../pipeline/reduce-states.js";
import {
  isMergeableSnapshot,
  type RankGroupHandle,
  type RankGroupSnapshot,
  type RankHandle,
  type RankSnapshot,
} from "../pipeline/rank-handle.js";

/** What the ranks answered to one flush. */
interface RankAnswers {
  /** The answers that came in time, for this step. */
  readonly snapshots: RankSnapshot[];
  /** Ranks that did not answer in time (a host's ranks one by one). */
  readonly missing: string[];
  /** Ranks registered (the controller's own collector is not counted: it cannot go missing). */
  readonly ranksExpected: number;
  /** Of those, how many answered in time. */
  readonly ranksReporting: number;
  /** When each of `snapshots` arrived, in ms after the ranks were asked (same order). */
  readonly arrivalMs: number[];
  /** Tell every rank that answered that its answer is logged (call once the backends took it). */
  readonly acknowledge: () => void;
}

/** A handle answering for several ranks (a host agent's). */
function isRankGroupHandle(handle: RankHandle): handle is RankGroupHandle {
  return "memberRanks" in handle && typeof handle.memberRanks === "function";
}

/** The answer of such a handle, which says which of its ranks answered. */
function isRankGroupSnapshot(snapshot: RankSnapshot): snapshot is RankGroupSnapshot {
  return "group" in snapshot && typeof snapshot.group === "object" && snapshot.group !== null;
}

/** Ask every handle for its states at `step`, waiting at most `deadlineMs`. `own` is the controller's own handle (never counted). */
export async function askRanks(
  handles: readonly RankHandle[],
  own: RankHandle,
  step: number,
  deadlineMs: number,
): Promise<RankAnswers> {
  const asked = performance.now();
  const arrived = new Float64Array(handles.length);
  const answers = await Promise.all(
    handles.map((h, i) =>
      withDeadline(
        h.flush(step, deadlineMs).then(
          (snapshot) => ((arrived[i] = performance.now() - asked), snapshot),
          () => undefined,
        ),
        deadlineMs,
      ),
    ),
  );
  const snapshots: RankSnapshot[] = [];
  const arrivalMs: number[] = [];
  const answered: Array<[RankHandle, RankSnapshot]> = [];
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
    arrivalMs.push(arrived[i] ?? NaN);
    answered.push([handle, answer]);
    if (isRankGroupSnapshot(answer)) {
      ranksReporting += answer.group.reporting;
      missing.push(...answer.group.missing);
    } else if (handle !== own) ranksReporting++;
  }
  const acknowledge = (): void => {
    for (const [handle, answer] of answered) handle.acknowledge?.(answer);
  };
  return { snapshots, missing, ranksExpected, ranksReporting, arrivalMs, acknowledge };
}

/**
 * The step timings of the ranks that answered, one row per rank (a host's ranks as its agent
 * forwarded them, arrivals measured by the agent): the input of straggler attribution. The
 * controller's own collector is not a rank and is left out; so is a rank that traced nothing.
 */
export function answersTiming(answers: Pick<RankAnswers, "snapshots" | "arrivalMs">, own: RankHandle): TimingColumns {
  const columns = emptyTimingColumns();
  for (const [i, snapshot] of answers.snapshots.entries()) {
    if (isRankGroupSnapshot(snapshot)) {
      if (snapshot.group.timing !== undefined) appendTimingColumns(columns, snapshot.group.timing);
      continue;
    }
    const timing = snapshot.timing;
    if (timing === undefined || snapshot.rankName === own.rankName) continue;
    appendRankTiming(columns, snapshot.rankName, timing.rank, timing.host, answers.arrivalMs[i] ?? NaN, timing.tracers);
  }
  return columns;
}

/**
 * The answers' states merged key by key, sorted by key. When an answer came as a wire frame
 * (`MergeableSnapshot`) every answer is merged from columns, no state object per rank·key; the
 * result is `mergeRankKeyStates`' bit for bit, which merges them otherwise (and reports a key
 * recorded with two reductions).
 */
export function mergeAnswers(snapshots: readonly RankSnapshot[], step: number): KeyState[] {
  const columns = snapshots.find(isMergeableSnapshot);
  return columns?.mergeAll(snapshots) ?? mergeRankKeyStates(snapshots, step);
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
  const where = memberPlaces(handles);
  return names.map((rankName) => {
    const handle = handles.get(rankName);
    const host = handle?.host ?? where.get(rankName)?.host;
    const rank = handle?.identity?.rank;
    return { rankName, ...(rank === undefined ? {} : { rank }), ...(host === undefined ? {} : { host }) };
  });
}

/** Where the ranks behind host and rack agents run: by rank name, its host (and the rack its host agent registered with). */
function memberPlaces(handles: ReadonlyMap<string, RankHandle>): Map<string, { host: string; rack?: string }> {
  const where = new Map<string, { host: string; rack?: string }>();
  for (const handle of handles.values()) {
    if (!isRankGroupHandle(handle)) continue;
    const members = handle.memberRanks();
    const hosts = handle.memberHostList?.();
    const racks = handle.memberRackList?.();
    for (const [i, member] of members.entries()) {
      const host = hosts?.[i] ?? handle.host;
      const rack = racks?.[i] ?? handle.rack;
      if (host !== undefined) where.set(member, rack === undefined ? { host } : { host, rack });
    }
  }
  return where;
}

/** The missing ranks as a flush's warning names them: behind an agent, with their host (and rack). */
export function describeMissing(names: readonly string[], handles: ReadonlyMap<string, RankHandle>): string {
  const where = memberPlaces(handles);
  return names
    .map((name) => {
      const place = where.get(name);
      if (place === undefined) return name;
      return `${name} on ${place.host}${place.rack === undefined ? "" : ` in rack ${place.rack}`}`;
    })
    .join(", ");
}

/** `rankscope/alerts_undelivered` for a flush: logged from the first flush the webhook missed an alert. */
export function alertStates(undelivered: number | undefined): KeyState[] {
  return undelivered === undefined
    ? []
    : [{ key: ALERTS_UNDELIVERED_KEY, reduce: "sum", state: singleValueState(undelivered) }];
}

/** Ranks named at most in the dropped-keys warning. */
const NAMED_RANKS = 8;

/**
 * What the ranks that answered dropped past their key bound (each rank's count since it started,
 * in every answer): a `sum` state of `rankscope/dropped_key_records` once any rank dropped, and one
 * warning on the controller naming them (the ranks' own warnings are on their own consoles).
 */
export function droppedKeyStates(snapshots: readonly RankSnapshot[], step: number): KeyState[] {
  let total = 0;
  const ranks: string[] = [];
  for (const s of snapshots) {
    if (s.droppedKeyRecords <= 0) continue;
    total += s.droppedKeyRecords;
    ranks.push(`${s.rankName} (${s.droppedKeyRecords})`);
  }
  if (total === 0) return [];
  const named =
    ranks.length > NAMED_RANKS
      ? `${ranks.slice(0, NAMED_RANKS).join(", ")} and ${ranks.length - NAMED_RANKS} more`
      : ranks.join(", ");
  warn(
    "flush.droppedKeys",
    `flush(${step}): ${total} recorded value(s) were dropped because their key was new past a process's key bound (RANKSCOPE_MAX_KEYS): ${named}; logged as ${DROPPED_KEY_RECORDS_KEY}. Keys that embed ids are the usual cause; raise the bound if the keys are real.`,
  );
  return [{ key: DROPPED_KEY_RECORDS_KEY, reduce: "sum", state: singleValueState(total) }];
}
