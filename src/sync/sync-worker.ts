/**
 * The live sync's thread: a pass of `RunSync` every interval, so the job's threads never wait for
 * the server. It reads the store through its own read-only connection (WAL: it never blocks the
 * writer). A failed pass (the server unreachable, refusing) is reported to the job's thread and
 * the next pass tries again from the server's state; nothing is lost, since the store keeps it.
 * At `finish`, one last full pass within the deadline given, then it answers and stops.
 */
import { parentPort, workerData } from "node:worker_threads";
import { closeStores, runInfo } from "../store/reader.js";
import { describeError } from "../core/diagnostics.js";
import { sleep } from "../core/retry.js";
import { RunSync } from "./run-sync.js";
import type { LiveSyncSettings } from "./settings.js";

/** What the thread is started with. */
export interface SyncThreadData {
  readonly runDir: string;
  readonly settings: LiveSyncSettings;
}

/** Messages from the job's thread. */
type SyncRequest = { readonly op: "finish"; readonly deadlineMs: number };

/** Messages to the job's thread. */
export type SyncReport =
  | { readonly op: "failed"; readonly message: string; readonly passes: number }
  | {
      readonly op: "finished";
      readonly delivered: boolean;
      readonly message: string;
      readonly totals: RunSync["totals"];
    };

function isThreadData(v: unknown): v is SyncThreadData {
  return (
    typeof v === "object" &&
    v !== null &&
    "runDir" in v &&
    typeof v.runDir === "string" &&
    "settings" in v &&
    typeof v.settings === "object"
  );
}

if (parentPort === null || !isThreadData(workerData))
  throw new Error("the sync thread must be started by startLiveSync");
const port = parentPort;
const { runDir, settings } = workerData;
const stop = new AbortController();
let finishing = false;

function newSync(signal: AbortSignal, sendDeadlineMs: number): RunSync {
  return new RunSync({
    runDir,
    url: settings.url,
    token: settings.token,
    ...(settings.project !== undefined ? { project: settings.project } : {}),
    sendDeadlineMs,
    requestDeadlineMs: Math.min(sendDeadlineMs, 30_000),
    stop: signal,
  });
}

const live = newSync(stop.signal, settings.sendDeadlineMs);

async function loop(): Promise<void> {
  let failures = 0;
  while (!finishing) {
    try {
      await live.pass();
      failures = 0;
    } catch (error) {
      if (finishing) return;
      failures++;
      port.postMessage({ op: "failed", message: describeError(error), passes: failures } satisfies SyncReport);
    }
    await sleep(settings.intervalMs, stop.signal);
  }
}

const running = loop();

function sum(a: RunSync["totals"], b: RunSync["totals"]): RunSync["totals"] {
  return {
    batches: a.batches + b.batches,
    points: a.points + b.points,
    records: a.records + b.records,
    fileBytes: a.fileBytes + b.fileBytes,
    conflicts: a.conflicts + b.conflicts,
    refused: a.refused + b.refused,
  };
}

port.on("message", (request: SyncRequest) => {
  if (request.op !== "finish") return;
  finishing = true;
  stop.abort();
  void (async () => {
    await running;
    // A fresh sync for the last pass: its own deadline, cursors from the server.
    const until = Date.now() + request.deadlineMs;
    const deadline = AbortSignal.timeout(Math.max(1, request.deadlineMs));
    const last = newSync(deadline, Math.max(1, request.deadlineMs));
    last.inheritTails(live);
    let report: SyncReport;
    try {
      // The run's other writers (its ranks, this process's other stores) may end a moment later:
      // pass again until the store says the run ended, within the deadline.
      // Done once the run has ended and nothing was written for a settling time (a writer whose
      // line another process took over still writes after the run is marked ended).
      const settleMs = Math.max(1000, settings.intervalMs);
      let seen: number | null = null;
      for (;;) {
        await last.pass(true);
        const info = runInfo(runDir);
        if ((info.status !== "running" && info.updatedAt === seen) || Date.now() + settleMs >= until) break;
        seen = info.updatedAt;
        await sleep(settleMs, deadline);
      }
      report = { op: "finished", delivered: true, message: "", totals: sum(live.totals, last.totals) };
    } catch (error) {
      report = {
        op: "finished",
        delivered: false,
        message: describeError(error),
        totals: sum(live.totals, last.totals),
      };
    }
    closeStores();
    port.postMessage(report);
  })();
});
