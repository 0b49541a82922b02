/**
 * The lifecycle's last resort at a signal (src/core/lifecycle.ts): a thread that ends the process
 * when the drain deadline passes, whatever its main thread is doing.
 *
 * The lifecycle's own deadline is a timer on the main thread. A job whose main thread never comes
 * back to the event loop — a loop spinning on promises that resolve at once, a synchronous loop
 * started after the signal — starves that timer, and the process would never end (issue 24 case
 * 1). The watchdog needs nothing from the main thread: a worker started at the signal sleeps on
 * `Atomics.wait` until the deadline, writes one line to stderr and sends the process SIGKILL (the
 * signal's own listener is ours and cannot run, so SIGKILL is the one signal that ends it). It is
 * unref'd: when the process ends by the signal first, as it normally does, it goes with it.
 */
import { Worker } from "node:worker_threads";

/** The watchdog's code: CommonJS, evaluated in a worker started without the user's flags. */
const WATCHDOG_SOURCE = `
const { workerData } = require("node:worker_threads");
const { writeSync } = require("node:fs");
const left = workerData.at - Date.now();
if (left > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, left);
try { writeSync(2, workerData.message); } catch {}
process.kill(workerData.pid, "SIGKILL");
`;

/** What the watchdog is told. */
interface WatchdogData {
  /** When to end the process (ms since the epoch). */
  readonly at: number;
  readonly pid: number;
  /** The line written to stderr before the kill. */
  readonly message: string;
}

/**
 * Start a thread that kills this process (SIGKILL) at `at` (ms since the epoch), after writing
 * `message` to stderr. Returns false if the thread could not be started (the lifecycle's timer is
 * then the only bound); never throws.
 */
export function startEndWatchdog(at: number, message: string): boolean {
  const workerData: WatchdogData = { at, pid: process.pid, message: message.endsWith("\n") ? message : `${message}\n` };
  try {
    // No flags of the user's (`--import tsx`, …): the watchdog needs none, and starts faster.
    const worker = new Worker(WATCHDOG_SOURCE, {
      eval: true,
      workerData,
      execArgv: [],
      stdin: false,
      stdout: true,
      stderr: true,
    });
    worker.unref();
    // Its failure must not become the process's: the lifecycle's timer still bounds the end.
    worker.on("error", () => undefined);
    return true;
  } catch {
    return false;
  }
}
