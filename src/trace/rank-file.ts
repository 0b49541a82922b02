/**
 * Where a per-rank trace file goes and who writes it: `{runDir}/{folder}/rank-{rank}.jsonl`,
 * from explicit options or, once known, the current run (`src/run/current.ts`). The run's
 * controller writes `{folder}/controller.jsonl` instead, as trace process `CONTROLLER_TRACE_PID`:
 * it is rank 0 of its own job, and a rank 0 in a worker thread or child process would otherwise
 * share its file and pid under a second `process_name`.
 *
 * Shared by the perf tracer and the session tracer: both buffer in memory on the caller's thread,
 * then hand text to an `AppendFile` off the hot path, and write what is left synchronously at exit.
 */
import { join } from "node:path";
import { AppendFile } from "../io/append-file.js";
import { currentRun, onRunChange } from "../run/current.js";
import { registerDrain } from "../core/lifecycle.js";

/** Where and as whom a tracer writes; every field optional, the current run fills the rest. */
export interface RankFileOptions {
  /** The run directory (default: the current run's). */
  runDir?: string;
  /** This process's rank (default: the current run's identity). */
  rank?: number;
  /** Role shown in trace viewers, e.g. `Trainer` (default: the current run's process name). */
  role?: string;
}

/** A resolved target: the file and the identity written into it. */
export interface RankFileTarget {
  readonly path: string;
  readonly rank: number;
  readonly role: string;
  /** The trace viewer's process id: the rank, or `CONTROLLER_TRACE_PID` for the controller. */
  readonly pid: number;
  /** Whether this is the run's controller (file `controller.jsonl`) rather than a rank. */
  readonly controller: boolean;
}

/**
 * The trace process id of the run's controller: above any rank number, so the controller and a
 * rank 0 are two processes in Perfetto. (Perfetto reads `pid` as an unsigned 32-bit number.)
 */
export const CONTROLLER_TRACE_PID = 1_000_000;

/** Resolve a target, or undefined while the run directory or rank is not known yet. */
export function resolveRankFile(folder: string, options: RankFileOptions): RankFileTarget | undefined {
  const run = currentRun();
  const runDir = options.runDir ?? run?.runDir;
  const rank = options.rank ?? run?.identity.rank;
  if (runDir === undefined || rank === undefined) return undefined;
  const role = options.role ?? run?.identity.processName ?? "Process";
  // The controller by the current run's word only: explicit options always name a rank.
  if (options.rank === undefined && run?.role === "controller") {
    return { path: join(runDir, folder, "controller.jsonl"), rank, role, pid: CONTROLLER_TRACE_PID, controller: true };
  }
  return { path: join(runDir, folder, `rank-${rank}.jsonl`), rank, role, pid: rank, controller: false };
}

/** Call `listener` when the current run becomes known (for tracers buffering until then). */
export function whenRunKnown(listener: () => void): () => void {
  return onRunChange(() => listener());
}

const files = new Map<string, AppendFile>();

/** One AppendFile per path in this process, so two writers of a file never interleave batches. */
export function appendFileFor(path: string): AppendFile {
  let file = files.get(path);
  if (file === undefined) {
    file = new AppendFile(path);
    files.set(path, file);
  }
  return file;
}

type ExitWriter = () => void;
const exitWriters = new Set<ExitWriter>();

function writeAllSync(): void {
  for (const writer of exitWriters) {
    try {
      writer();
    } catch {
      // Exit must finish; a writer that fails has already reported through diagnostics.
    }
  }
  for (const file of files.values()) file.writeQueuedSync();
}

let unregister: (() => void) | null = null;

/**
 * Register a synchronous writer to run at process end: `beforeExit`, `exit`, and SIGINT/SIGTERM
 * (through the process lifecycle, src/core/lifecycle.ts, which then ends the process by the signal).
 * Returns an unregister function.
 */
export function onExitWriteSync(writer: ExitWriter): () => void {
  exitWriters.add(writer);
  // beforeExit: the loop is idle, so a sync write cannot overtake one in flight; exit: process.exit(),
  // and the last step after a signal's drains.
  unregister ??= registerDrain({
    name: "trace and session files",
    stage: "producer",
    drain: ({ reason }) => {
      if (reason === "beforeExit") writeAllSync();
    },
    exit: writeAllSync,
  });
  return () => {
    exitWriters.delete(writer);
    if (exitWriters.size === 0) {
      // What is queued still goes out: the files' own async loop or the next exit write.
      unregister?.();
      unregister = null;
    }
  };
}
