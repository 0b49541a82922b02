/**
 * Who recorded a value: the one identity model every side reads (the transport, the controller,
 * the stream, the run directory, the backends, the store and the dashboard), so it lives here,
 * below all of them. docs/DESIGN.md ("Identity: who recorded it") has the naming rule per sink.
 *
 * Every recording context has one identity, assigned once: the controller's own collector, each
 * rank (a process or a thread rank), and each user `new Worker` inside either (a `Recorder` with
 * its `thread`). A per-rank sink keys on the recorder's *line* (`lineOf`), one integer that tells
 * the controller, the ranks and the workers' raw values apart.
 *
 * This file has no imports and no Node API: the dashboard's web app uses the line functions too.
 */

/** Whose values: the controller's own collector, or a rank's. */
export type RecorderRole = "controller" | "rank";

/** Who a rank (or the controller) is. */
export interface RankIdentity {
  /** Global rank number (0 for the controller and single-process jobs: never a line of its own, see `lineOf`). */
  readonly rank: number;
  /** Short stable name: `{processName}_{replicaId}_r{localRank}` for spawned ranks, the processName for the controller. */
  readonly rankName: string;
  /** The process (actor) name, e.g. `Controller` or `Trainer`. */
  readonly processName: string;
  /** Rank within its replica, and ranks per replica (for stream lines like `[0] [Trainer-0/2]`). */
  readonly localRank: number;
  readonly localWorldSize: number;
  /**
   * `controller` for the controller's own collector: a line of its own in every per-rank sink,
   * never rank 0's. Absent (or `rank`) for a rank.
   */
  readonly role?: RecorderRole;
}

/** Who recorded one value: an identity (the controller or a rank) and the thread it was recorded in. */
export interface Recorder {
  readonly role: RecorderRole;
  /** The identity's rank number (the controller's is 0 and names no line). */
  readonly rank: number;
  /** The identity's name (the controller's: its processName). */
  readonly rankName: string;
  /** 0: the identity's own thread (a process's main thread, or a thread rank's thread); else the threadId of a user's worker in that process. */
  readonly thread: number;
}

/** The process name of the controller (and of a single-process job) when none is given. */
export const DEFAULT_PROCESS_NAME = "Controller";

/** Name shown by global backends as the source of their metrics (Forge's). */
export const GLOBAL_DISPLAY_NAME = "GlobalReduce";

/** The line of values reduced across every recorder (`global_reduce`). */
export const GLOBAL_LINE = -1;
/** The line of the controller's own values. */
export const CONTROLLER_LINE = -2;
/** Thread lines are `-((owner + 3) * THREAD_LINE_SPAN + thread)`: below every other line, one block per owner. */
export const THREAD_LINE_SPAN = 2 ** 24;

/** `controller` or `rank`: an identity's role (absent means a rank). */
export function roleOf(identity: Pick<RankIdentity, "role">): RecorderRole {
  return identity.role === "controller" ? "controller" : "rank";
}

/** The recorder of `identity`'s own thread (`thread` 0), or of one of its user workers. */
export function recorderOf(identity: RankIdentity, thread = 0): Recorder {
  return { role: roleOf(identity), rank: identity.rank, rankName: identity.rankName, thread };
}

/**
 * The line a recorder's values go to in a per-rank sink: `CONTROLLER_LINE` for the controller's
 * own thread, the rank number for a rank's, and a thread line for a user worker's raw values.
 * @throws RangeError for a thread id of 2^24 or more (no process starts that many threads)
 */
export function lineOf(recorder: Pick<Recorder, "role" | "rank" | "thread">): number {
  const owner = recorder.role === "controller" ? CONTROLLER_LINE : recorder.rank;
  if (recorder.thread === 0) return owner;
  if (!Number.isInteger(recorder.thread) || recorder.thread < 0 || recorder.thread >= THREAD_LINE_SPAN) {
    throw new RangeError(
      `a recorder's thread must be an integer in [0, ${THREAD_LINE_SPAN}), got ${String(recorder.thread)}`,
    );
  }
  return -((owner + 3) * THREAD_LINE_SPAN + recorder.thread);
}

/** What a line stands for. */
export type LineOwner =
  | { readonly kind: "global" }
  | {
      readonly kind: "recorder";
      readonly role: RecorderRole;
      readonly rank: number;
      readonly thread: number;
      readonly ownerLine: number;
    };

/** Decode a line (`lineOf`'s inverse; the controller's rank reads as 0). */
export function recorderOfLine(line: number): LineOwner {
  if (line === GLOBAL_LINE) return { kind: "global" };
  if (line === CONTROLLER_LINE)
    return { kind: "recorder", role: "controller", rank: 0, thread: 0, ownerLine: CONTROLLER_LINE };
  if (line >= 0) return { kind: "recorder", role: "rank", rank: line, thread: 0, ownerLine: line };
  const n = -line;
  const thread = n % THREAD_LINE_SPAN;
  const ownerLine = Math.floor(n / THREAD_LINE_SPAN) - 3;
  if (thread === 0 || ownerLine < CONTROLLER_LINE) return { kind: "global" };
  return ownerLine === CONTROLLER_LINE
    ? { kind: "recorder", role: "controller", rank: 0, thread, ownerLine }
    : { kind: "recorder", role: "rank", rank: ownerLine, thread, ownerLine };
}

/** A line as people read it: `global`, `controller`, `rank 3`, `rank 3 · thread 7`, `controller · thread 2`. */
export function lineLabel(line: number): string {
  const owner = recorderOfLine(line);
  if (owner.kind === "global") return line === GLOBAL_LINE ? "global" : `line ${line}`;
  const base = owner.role === "controller" ? "controller" : `rank ${owner.rank}`;
  return owner.thread === 0 ? base : `${base} · thread ${owner.thread}`;
}

/**
 * A recorder's name where sinks need one name per recorder (a TensorBoard run, a store line's
 * name): the identity's name, and `{name}/thread-{t}` for a user worker.
 */
export function recorderPath(recorder: Pick<Recorder, "rankName" | "thread">): string {
  return recorder.thread === 0 ? recorder.rankName : `${recorder.rankName}/thread-${recorder.thread}`;
}

/** Where a line sorts: the global line, ranks ascending, the controller, then thread lines (by owner and thread). */
export function compareLines(a: number, b: number): number {
  const group = (line: number): number => (line === GLOBAL_LINE ? 0 : line >= 0 ? 1 : line === CONTROLLER_LINE ? 2 : 3);
  return group(a) - group(b) || Math.abs(a) - Math.abs(b);
}

/**
 * A line's label with its name, as the dashboard and `rankscope tail` show it: `controller
 * (Controller)`, `rank 1 (Trainer_0_r1)`, `rank 1 · thread 7 (Trainer_0_r1)`, `global`. A name that
 * says nothing more (`rank1`, `global`) is left out.
 */
export function lineDisplayLabel(line: number, name?: string): string {
  const label = lineLabel(line);
  const owner = recorderOfLine(line);
  if (name === undefined || name === "" || owner.kind === "global") return label;
  const ownerName = owner.thread === 0 ? name : name.replace(/\/thread-\d+$/, "");
  return ownerName === `rank${owner.rank}` ? label : `${label} (${ownerName})`;
}

/**
 * Who recorded a JSON line, as its fields (the stream files and the JSONL backend): `"rank":3` for
 * a rank, `"role":"controller"` for the controller (no `rank`: it is not rank 0), then
 * `,"thread":7` for a user's worker thread.
 */
export function recorderJsonFields(recorder: Pick<Recorder, "role" | "rank" | "thread">): string {
  const base = recorder.role === "controller" ? `"role":"controller"` : `"rank":${recorder.rank}`;
  return recorder.thread === 0 ? base : `${base},"thread":${recorder.thread}`;
}
