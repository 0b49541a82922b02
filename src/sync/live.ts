/**
 * The live sync of a job: started by the controller's `store` backend when a server is configured
 * (`server` + `serverToken`, or `RANKSCOPE_SERVER_URL` + `RANKSCOPE_SERVER_TOKEN`), it streams what
 * the store commits to the team server from a thread of its own (`sync-worker.ts`). The job writes
 * its local store exactly as without it, and neither the loop nor a flush ever waits for it. At
 * the end of the run it gets `finishDeadlineMs` to deliver the rest; what it could not is counted,
 * reported with the command that sends it later (`rankscope sync RUN_DIR`), and stays in the store.
 */
import type { Worker } from "node:worker_threads";
import { processWide } from "../core/process-wide.js";
import { reportError, warn } from "../core/diagnostics.js";
import { DEADLINE, withDeadline } from "../core/deadline.js";
import { packageModule, startModuleWorker } from "../core/module-worker.js";
import type { LiveSyncSettings } from "./settings.js";
import { storeWritersDone } from "./writers.js";
import type { SyncReport, SyncThreadData } from "./sync-worker.js";

/** The process's sync counters (tests and the job's end read them). */
interface SyncCounters {
  /** Passes that failed (the server unreachable or refusing), each reported. */
  failedPasses: number;
  /** Runs whose end came before everything reached the server: left for `rankscope sync`. */
  undeliveredRuns: number;
  /** Points and batches the live syncs of this process delivered. */
  deliveredPoints: number;
  deliveredBatches: number;
}

/** The process-wide sync counters. */
function syncCounters(): SyncCounters {
  return processWide("syncCounters", () => ({
    failedPasses: 0,
    undeliveredRuns: 0,
    deliveredPoints: 0,
    deliveredBatches: 0,
  }));
}

function isReport(v: unknown): v is SyncReport {
  return typeof v === "object" && v !== null && "op" in v && (v.op === "failed" || v.op === "finished");
}

/** One run's live sync. */
export class LiveSync {
  private readonly worker: Worker;
  private finished: Promise<SyncReport | null> | null = null;
  private resolveFinished: ((r: SyncReport | null) => void) | null = null;

  constructor(
    private readonly runDir: string,
    private readonly settings: LiveSyncSettings,
  ) {
    this.worker = startModuleWorker(packageModule("sync/sync-worker"), {
      workerData: { runDir, settings } satisfies SyncThreadData,
    });
    // The sync never keeps a job alive: its end waits for it explicitly, with a deadline.
    this.worker.unref();
    this.worker.on("message", (m: unknown) => {
      if (!isReport(m)) return;
      if (m.op === "failed") {
        syncCounters().failedPasses++;
        warn(
          `sync.failed:${runDir}`,
          `the sync of ${runDir} to ${new URL(settings.url).host} failed (${m.passes} in a row; the store keeps everything and the next pass tries again): ${m.message}`,
        );
      } else this.resolveFinished?.(m);
    });
    this.worker.on("error", (error) =>
      reportError(`sync.thread:${runDir}`, `the sync thread of ${runDir} failed: ${error.message}`),
    );
    this.worker.on("exit", () => this.resolveFinished?.(null));
  }

  /** Deliver what is left within the deadline, then stop; false when something was left for `rankscope sync`. */
  async finish(): Promise<boolean> {
    // The run's other writers in this process first (bounded: the same deadline again at most).
    await storeWritersDone(this.runDir, this.settings.finishDeadlineMs);
    this.finished ??= new Promise<SyncReport | null>((resolve) => {
      this.resolveFinished = resolve;
      this.worker.ref();
      this.worker.postMessage({ op: "finish", deadlineMs: this.settings.finishDeadlineMs });
    });
    // The thread has the deadline itself; this one is its backstop.
    const report = await withDeadline(this.finished, this.settings.finishDeadlineMs + 5_000);
    await this.worker.terminate();
    const counters = syncCounters();
    if (report !== DEADLINE && report !== null && report.op === "finished") {
      counters.deliveredPoints += report.totals.points;
      counters.deliveredBatches += report.totals.batches;
      if (report.delivered) return true;
    }
    this.leftBehind(report === DEADLINE || report === null ? "the sync thread did not answer" : report.message);
    return false;
  }

  /** At exit, where nothing can be awaited: stop the thread; whatever it had not sent is left behind. */
  abandon(): void {
    if (this.finished !== null) return;
    this.finished = Promise.resolve(null);
    void this.worker.terminate();
    this.leftBehind("the process is exiting");
  }

  private leftBehind(why: string): void {
    syncCounters().undeliveredRuns++;
    reportError(
      `sync.undelivered:${this.runDir}`,
      `not everything of ${this.runDir} reached ${new URL(this.settings.url).host} (${why}); the local store has it all: send it with rankscope sync ${this.runDir} --server ${this.settings.url}`,
    );
  }
}
