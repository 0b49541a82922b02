/**
 * A host agent's answer to one flush, made from its ranks' answers: who answered and who did not,
 * their states merged exactly (straight from the frames' columns when it can, else
 * `mergeRankKeyStates`, the controller's own merge) with the agent process's own rejections, and
 * the header that names it all. The agent (`agent.ts`) asks the ranks and sends what this returns.
 */
import type { UserAlertCall } from "../../core/alert.js";
import { newestAlerts } from "../../alerts/user-alert.js";
import type { OffCycleLog, RankSnapshot } from "../../pipeline/rank-handle.js";
import { mergeRankKeyStates, singleValueState } from "../../pipeline/reduce-states.js";
// An agent merges states of every reduction its ranks may send, stats' avg_min_max included.
import "../../stats/reductions.js";
import { REJECTED_KEY_PREFIX } from "../../core/internal-keys.js";
import { FramedSnapshot } from "../controller/rank-frames.js";
import { takeRejectionsSinceLastFlush } from "../protocol/messages.js";
import type { FrameMerger } from "../wire/codec.js";
import type { KeyState } from "../../core/key-state.js";
import { appendRankTiming, emptyTimingColumns } from "../../core/step-timing.js";
import { answerSeqs } from "../controller/carried-answers.js";
import { hostEnvelope, type HostStatesHeader, type RankAnswers } from "./messages.js";

/** One rank's answer to the agent's flush, or `undefined` when it did not answer in time. */
export interface RankAnswer {
  /** The rank, and its process id where known (its answer numbers are that process's). */
  readonly handle: { readonly rankName: string; readonly pid?: number | undefined };
  readonly answer: RankSnapshot | undefined;
  /** When it arrived, in ms after the agent asked. */
  readonly arrivalMs: number;
}

/** What the answer is to: the flush, and the agent's rank list. */
export interface HostAnswerContext {
  readonly runId: string;
  readonly hostId: string;
  /** The controller's flush request id and step. */
  readonly id: number;
  readonly step: number;
  /** This answer's number (`KeptHostAnswers.next`), and the id of the agent process that numbers them. */
  readonly seq: number;
  readonly agent: string;
  /** The version of the agent's rank list the answer names. */
  readonly membersVersion: number;
  /** The rank list itself, when the controller has not had this version yet. */
  readonly members: readonly string[] | undefined;
  /** The agent's merger (it keeps its buffers from one flush to the next). */
  readonly merger: FrameMerger;
}

/** The ranks' answers to one flush gathered for the host's answer: who answered, who did not, and what their answers carry. */
function gatherAnswers(answers: readonly RankAnswer[], hostId: string) {
  const snapshots: RankSnapshot[] = [];
  const missing: string[] = [];
  let dropped = 0;
  const offCycle: OffCycleLog[] = [];
  const alerts: UserAlertCall[] = [];
  const timing = emptyTimingColumns();
  /** The answers' rows (indexes in `answers`) that carry step timings. */
  const rows: number[] = [];
  for (const [row, { handle, answer, arrivalMs }] of answers.entries()) {
    if (answer === undefined) {
      missing.push(handle.rankName);
      continue;
    }
    if (answer.timing !== undefined) {
      rows.push(row);
      appendRankTiming(timing, handle.rankName, answer.timing.rank, hostId, arrivalMs, answer.timing.tracers);
    }
    snapshots.push(answer);
    dropped += answer.droppedKeyRecords;
    if (answer.offCycle !== undefined) offCycle.push(...answer.offCycle);
    if (answer.alerts !== undefined) alerts.push(...answer.alerts);
  }
  return { snapshots, missing, dropped, offCycle, alerts, timing, rows, took: tookFrom(answers) };
}

/** By rank, the numbers of the rank answers merged (`HostStatesHeader.took`), of ranks whose process id is known. */
function tookFrom(answers: readonly RankAnswer[]): RankAnswers | undefined {
  let took: Record<string, { p: number; s: readonly number[] }> | undefined;
  for (const { handle, answer } of answers) {
    if (answer === undefined || handle.pid === undefined) continue;
    const s = answerSeqs(answer);
    if (s.length > 0) (took ??= {})[handle.rankName] = { p: handle.pid, s };
  }
  return took;
}

/** The agent process's own rejections since the last flush (`rankscope/rejected/{kind}`), added to its answer (`who`: "host agent h1", …). */
export function withRejections(states: KeyState[], step: number, who: string): KeyState[] {
  const rejected = takeRejectionsSinceLastFlush();
  if (rejected.length === 0) return states;
  const own = rejected.map(([kind, count]): KeyState => ({
    key: `${REJECTED_KEY_PREFIX}${kind}`,
    reduce: "sum",
    state: singleValueState(count),
  }));
  return mergeRankKeyStates(
    [
      { rankName: who, states },
      { rankName: who, states: own },
    ],
    step,
  );
}

/**
 * The ranks' states merged exactly: straight from their frames' columns when every answer came
 * as a frame (`FrameMerger`), else (a JSON answer, a carried late one, a key in two reductions)
 * `mergeRankKeyStates` — the same result either way.
 */
function mergeSnapshots(merger: FrameMerger, snapshots: readonly RankSnapshot[], step: number): KeyState[] {
  if (snapshots.every((s) => s instanceof FramedSnapshot)) {
    merger.begin();
    for (const s of snapshots) if (s instanceof FramedSnapshot) merger.add(s.frame);
    const merged = merger.result();
    if (merged !== undefined) return merged;
  }
  return mergeRankKeyStates(snapshots, step);
}

/**
 * The host's answer to one flush: its header, its merged states, and whether some of the host's
 * ranks did not answer in time (`incomplete`).
 */
export function hostAnswer(
  answers: readonly RankAnswer[],
  context: HostAnswerContext,
): { header: Omit<HostStatesHeader, "session"> & { seq: number }; states: KeyState[]; incomplete: boolean } {
  const { runId, hostId, step } = context;
  const { snapshots, missing, dropped, offCycle, alerts, timing, rows, took } = gatherAnswers(answers, hostId);
  const states = withRejections(mergeSnapshots(context.merger, snapshots, step), step, `host agent ${hostId}`);
  const header: Omit<HostStatesHeader, "session"> & { seq: number } = {
    ...hostEnvelope(runId),
    t: "hostStates",
    id: context.id,
    step,
    host: hostId,
    seq: context.seq,
    agent: context.agent,
    ...(took === undefined ? {} : { took }),
    reporting: snapshots.length,
    missing,
    mv: context.membersVersion,
    ...(context.members !== undefined ? { ranks: context.members } : {}),
    dropped,
    ...(offCycle.length > 0 ? { offCycle } : {}),
    // A host's answer carries at most what one rank's may (the newest).
    ...(alerts.length > 0 ? { alerts: newestAlerts(undefined, alerts, `host ${hostId}'s ranks`) } : {}),
    ...(rows.length > 0
      ? { timing: { rows, ranks: timing.ranks, arrivalMs: timing.arrivalMs, tracers: timing.tracers } }
      : {}),
  };
  return { header, states, incomplete: missing.length > 0 };
}
