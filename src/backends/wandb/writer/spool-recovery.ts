/**
 * What a W&B run writer does with its spool outside the send loop: continue the offsets of earlier
 * offline attempts, send the spool itself when the server came back before the run ended, and
 * leave an offline run directory beside it for W&B's own `wandb sync`.
 */
import { existsSync, rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { describeError, reportError, warn } from "../../../core/diagnostics.js";
import { isRecord } from "../../../core/json.js";
import { parseHistoryJson } from "../client/history.js";
import type { Endpoint } from "../client/http.js";
import { offlineRunDirs } from "../offline/offline-run.js";
import type { SenderLimits } from "../options.js";
import type { RunTarget } from "./run-target.js";
import { readSpool, SPOOL_INFO_FILE, spoolFileName } from "../spool/spool.js";
import { syncSpool } from "../sync/sync.js";

/**
 * What earlier offline attempts of a run left in its spool: the next offset and the last `_step`
 * (0 and -1 when there is none, or when its offsets are absolute, i.e. it had reached the server).
 */
export function previousOfflineAttempts(
  spoolDir: string,
  clientId: string | null,
  label: string,
): { nextOffset: number; lastStep: number } {
  const none = { nextOffset: 0, lastStep: -1 };
  if (!existsSync(join(spoolDir, spoolFileName(clientId))) || !existsSync(join(spoolDir, SPOOL_INFO_FILE))) return none;
  try {
    const client = readSpool(spoolDir).clients.find((c) => c.clientId === clientId);
    const lastLine = client?.lines.at(-1);
    if (client === undefined || client.absoluteOffsets || lastLine === undefined) return none;
    const last = parseHistoryJson(lastLine);
    const lastStep = isRecord(last) && typeof last["_step"] === "number" ? last["_step"] : -1;
    return { nextOffset: client.firstOffset + client.lines.length, lastStep };
  } catch (error) {
    reportError(
      `wandb.spool.previous:${spoolDir}`,
      `W&B run ${label}: the spool of earlier attempts in ${spoolDir} cannot be read (${describeError(error)}); this attempt starts its own offsets at 0`,
    );
    return none;
  }
}

/** What `settleSpool` needs to know about a finished writer. */
interface SpooledWriter {
  readonly target: Pick<RunTarget, "spoolDir" | "runDir" | "shared" | "sendsComplete">;
  readonly endpoint: Endpoint;
  readonly limits: SenderLimits;
  readonly label: string;
  /** When the writer's `finish()` must be done. */
  readonly deadline: number;
  /** The server was unreachable or slow, not refusing: it may be back. */
  readonly recoverable: boolean;
  readonly linesSpooled: number;
  /** This attempt's offline run directory (written as the run went), or null (a shared run, or nothing spooled). */
  readonly offlineRun: string | null;
}

/**
 * A finished writer's spool is not empty: send it now if the server came back before the run ended
 * (a run of its own only: the clients of a shared run finish at different times, and the run's
 * completion must come after all of them), else leave an offline run beside it and say how to send
 * it.
 */
export async function settleSpool(w: SpooledWriter): Promise<void> {
  const { spoolDir, runDir, shared, sendsComplete } = w.target;
  if (w.recoverable && !shared && (await sendSpoolNow(spoolDir, w.endpoint, w.limits, w.deadline, w.label))) {
    // Sent: its offline run would only upload the same rows again.
    if (w.offlineRun !== null) removeOfflineRun(w.offlineRun, w.label);
    return;
  }
  // Every attempt's offline run, in order: `wandb sync` replays them one after the other (an
  // attempt killed before its end included: its rows are there, its run marked failed).
  const offlineRuns = shared || w.offlineRun === null ? [] : offlineRunDirs(dirname(spoolDir), basename(spoolDir));
  warn(
    `wandb.spooled:${spoolDir}`,
    `W&B run ${w.label}: ${w.linesSpooled} history line(s)${sendsComplete ? " and the run's completion" : ""} are in the spool ${spoolDir}; ` +
      `run "rankscope wandb sync ${runDir}" to send them` +
      (offlineRuns.length === 0 ? "" : `, or W&B's own "wandb sync ${offlineRuns.join(" ")}"`),
  );
}

function removeOfflineRun(dir: string, label: string): void {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch (error) {
    reportError(
      `wandb.offlineRun:${dir}`,
      `W&B run ${label}: the spool was sent, but its offline run ${dir} could not be removed (${describeError(error)}); do not "wandb sync" it, its rows are on the server`,
    );
  }
}

/**
 * After an outage that ended before the run did: send the spool now (what `rankscope wandb sync`
 * would do) by `deadline`. True when it was sent.
 */
async function sendSpoolNow(
  spoolDir: string,
  endpoint: Endpoint,
  limits: SenderLimits,
  deadline: number,
  label: string,
): Promise<boolean> {
  const left = deadline - Date.now();
  if (left <= 0) return false;
  try {
    const result = await syncSpool(spoolDir, {
      apiKey: endpoint.apiKey,
      baseUrl: endpoint.baseUrl,
      limits: { ...limits, retryBudgetMs: left, requestTimeoutMs: Math.min(limits.requestTimeoutMs, left) },
    });
    const sent = result.runs.reduce((n, r) => n + r.linesSent, 0);
    warn(
      `wandb.recovered:${spoolDir}`,
      `W&B run ${label}: the server is back; ${sent} spooled history line(s) were sent at finish (the spool ${spoolDir} stays; syncing it again is a no-op)`,
    );
    return true;
  } catch {
    return false;
  }
}
