/**
 * A rack agent's answer to one flush, made from its hosts' answers (docs/scale.md, "A deeper
 * tree"): their states merged exactly (`mergeRankKeyStates`, the controller's own merge), the
 * ranks counted one by one — reporting, missing (those the hosts named, and every rank of a host
 * that did not answer by the rack's deadline) — the rank list with each rank's host, the ranks'
 * step timings forwarded in columns, and the hosts' answers it holds (`took`).
 */
import type { UserAlertCall } from "../../core/alert.js";
import { newestAlerts } from "../../alerts/user-alert.js";
import type { KeyState } from "../../core/key-state.js";
import { appendTimingColumns, emptyTimingColumns, type TimingColumns } from "../../core/step-timing.js";
import type { OffCycleLog, RankGroupSnapshot } from "../../pipeline/rank-handle.js";
import { mergeRankKeyStates } from "../../pipeline/reduce-states.js";
import type { HostHandle } from "../host/host-handle.js";
import { withRejections } from "../host/host-answer.js";
import { hostEnvelope, type HostStatesHeader, type RankAnswers } from "../host/messages.js";

/** One host's answer to the rack's flush, or `undefined` when it did not answer in time. */
export interface HostAnswer {
  readonly handle: HostHandle;
  readonly answer: RankGroupSnapshot | undefined;
}

/** What the answer is to, and the rack's rank list. */
export interface RackAnswerContext {
  readonly runId: string;
  readonly rackId: string;
  /** The flush request's id and step (from above). */
  readonly id: number;
  readonly step: number;
  /** This answer's number, and the rack agent process that numbers them. */
  readonly seq: number;
  readonly agent: string;
  /** The rank list (`rackMembers` of the hosts asked, after they answered), its version, and whether to send it. */
  readonly members: RackMembers;
  readonly membersVersion: number;
  readonly sendMembers: boolean;
}

/** The rack's rank list: every host's ranks in host order, with their hosts and racks, and where each host's ranks start. */
export interface RackMembers {
  readonly ranks: string[];
  readonly hosts: Array<[string, number]>;
  /** The rack agent each rank's host agent registered with: this rack, or for a rack below it the rack that rack names. */
  readonly racks: Array<[string, number]>;
  readonly offsets: number[];
}

/** Add one rank's `name` to runs of `[name, count]`. */
function addToRuns(runs: Array<[string, number]>, name: string): void {
  const last = runs.at(-1);
  if (last !== undefined && last[0] === name) last[1]++;
  else runs.push([name, 1]);
}

/**
 * The rack's rank list: every host's ranks in host order, with the host and the rack of each, as
 * `[host, count]` and `[rack, count]` runs. A host agent's ranks are in `rackId`; the ranks of a
 * rack agent below keep the racks it named.
 */
export function rackMembers(handles: readonly HostHandle[], rackId: string): RackMembers {
  const ranks: string[] = [];
  const hosts: Array<[string, number]> = [];
  const racks: Array<[string, number]> = [];
  const offsets: number[] = [];
  for (const handle of handles) {
    offsets.push(ranks.length);
    const members = handle.memberRanks();
    const places = handle.memberHostList();
    const below = handle.memberRackList();
    for (const [i, rank] of members.entries()) {
      ranks.push(rank);
      addToRuns(hosts, places[i] ?? handle.hostId);
      addToRuns(racks, below?.[i] ?? rackId);
    }
  }
  return { ranks, hosts, racks, offsets };
}

/** A number for an agent process id (a random UUID), as `RankAnswers.p` takes one: its first 48 bits. */
export function agentNumber(agent: string): number {
  return Number.parseInt(agent.replace(/-/g, "").slice(0, 12), 16) || 0;
}

/** The hosts' timing columns as one answer's rows: each rank's index in the rack's rank list. */
function rackTiming(answers: readonly HostAnswer[], offsets: readonly number[]): HostStatesHeader["timing"] {
  const columns: TimingColumns = emptyTimingColumns();
  const rows: number[] = [];
  for (const [i, { handle, answer }] of answers.entries()) {
    const timing = answer?.group.timing;
    if (timing === undefined) continue;
    const members = handle.memberRanks();
    const at = new Map(members.map((name, row) => [name, row]));
    const kept = timing.rankNames.map((name) => at.get(name));
    if (kept.some((row) => row === undefined)) continue; // a list this rack does not hold yet
    appendTimingColumns(columns, timing);
    for (const row of kept) rows.push((offsets[i] ?? 0) + (row ?? 0));
  }
  return rows.length === 0
    ? undefined
    : { rows, ranks: columns.ranks, arrivalMs: columns.arrivalMs, tracers: columns.tracers };
}

/** The rack's answer to one flush: its header, its merged states, and whether ranks are missing. */
export function rackAnswer(
  answers: readonly HostAnswer[],
  context: RackAnswerContext,
): { header: Omit<HostStatesHeader, "session"> & { seq: number }; states: KeyState[]; incomplete: boolean } {
  const { runId, rackId, step } = context;
  const members = context.members;
  const snapshots: RankGroupSnapshot[] = [];
  const missing: string[] = [];
  const offCycle: OffCycleLog[] = [];
  const alerts: UserAlertCall[] = [];
  let took: Record<string, { p: number; s: readonly number[] }> | undefined;
  let reporting = 0;
  let dropped = 0;
  for (const { handle, answer } of answers) {
    if (answer === undefined) {
      missing.push(...handle.memberRanks());
      continue;
    }
    snapshots.push(answer);
    reporting += answer.group.reporting;
    missing.push(...answer.group.missing);
    dropped += answer.droppedKeyRecords;
    if (answer.offCycle !== undefined) offCycle.push(...answer.offCycle);
    if (answer.alerts !== undefined) alerts.push(...answer.alerts);
    const seqs = handle.answerSeqs(answer);
    const agent = handle.currentAgent;
    if (seqs.length > 0 && agent !== undefined) (took ??= {})[handle.hostId] = { p: agentNumber(agent), s: seqs };
  }
  const timing = rackTiming(answers, members.offsets);
  const header: Omit<HostStatesHeader, "session"> & { seq: number } = {
    ...hostEnvelope(runId),
    t: "hostStates",
    id: context.id,
    step,
    host: rackId,
    seq: context.seq,
    agent: context.agent,
    ...(took === undefined ? {} : { took: took satisfies RankAnswers }),
    reporting,
    missing,
    mv: context.membersVersion,
    ...(context.sendMembers ? { ranks: members.ranks, hosts: members.hosts, racks: members.racks } : {}),
    dropped,
    ...(offCycle.length > 0 ? { offCycle } : {}),
    ...(alerts.length > 0 ? { alerts: newestAlerts(undefined, alerts, `rack ${rackId}'s hosts`) } : {}),
    ...(timing === undefined ? {} : { timing }),
  };
  const states = withRejections(mergeRankKeyStates(snapshots, step), step, `rack agent ${rackId}`);
  return { header, states, incomplete: missing.length > 0 };
}
