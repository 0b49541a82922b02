/**
 * What a W&B run writer writes to, the counters it keeps, and the rule deciding from the server's
 * `RunResumeStatus` whether it may write to that run and at which offset.
 */
import type { ResumeStatus, UpsertVariables } from "../client/api.js";
import type { WandbResume } from "../options.js";

/** What a writer writes to. */
export interface RunTarget {
  readonly upsert: UpsertVariables;
  readonly resume: WandbResume;
  /** W&B shared mode: this writer's client id (the rank name); null for a run of its own. */
  readonly clientId: string | null;
  /** Whether the run is shared by ranks (all writers of it use shared mode). */
  readonly shared: boolean;
  /** Whether this writer marks the run complete at the end (false for ranks of a shared run). */
  readonly sendsComplete: boolean;
  /** Create the run only when there is a first row (ranks: one that logs nothing leaves no empty run). */
  readonly lazy: boolean;
  /** The run directory, for messages (`rankscope wandb sync {runDir}`). */
  readonly runDir: string;
  readonly spoolDir: string;
}

/** Counters a test or a status line can read. */
export interface WriterStats {
  /** History lines the server acknowledged. */
  linesSent: number;
  /** History lines written to the spool. */
  linesSpooled: number;
  /** Requests retried. */
  retries: number;
  /** Most bytes ever waiting in the queue. */
  maxQueuedBytes: number;
}

/** Whether a writer may write to its run, and from where. */
type ResumeDecision =
  /** Write from `offset`; `lastStep` is the run's last `_step` on the server (-1 for a new run). */
  | { readonly ok: true; readonly offset: number; readonly lastStep: number }
  /** The `resume` option forbids this run as it is on the server. */
  | { readonly ok: false; readonly reason: string };

/** Apply the `resume` option to what the server said about the run. */
export function decideResume(target: RunTarget, status: ResumeStatus): ResumeDecision {
  const { exists, historyLineCount, lastStep } = status;
  const name = target.upsert.name;
  if (exists && target.resume === "never" && !target.shared) {
    return {
      ok: false,
      reason: `run ${name} already exists and resume is "never"; pick another runId or trial, or set resume: "allow"`,
    };
  }
  if (!exists && target.resume === "must") {
    return {
      ok: false,
      reason: `run ${name} does not exist and resume is "must"; check runId/entity/project, or set resume: "allow"`,
    };
  }
  // Shared-mode clients keep their own offsets on the server, starting at 0.
  return { ok: true, offset: target.clientId === null ? historyLineCount : 0, lastStep: exists ? lastStep : -1 };
}
