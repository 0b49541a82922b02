/**
 * The stream's drain in the process lifecycle (src/core/lifecycle.ts): a `producer`, so the ring
 * reaches the file and its backends before the logger and the sinks finish. The stream adds no
 * exit or signal hook of its own; this is its only part in the process's end.
 */
import { registerDrain } from "../core/lifecycle.js";
import type { StopReason } from "./ring.js";

/** What the drain drives: the stream's synchronous flush and stop (bounded, never throwing). */
interface DrainableStream {
  flushSync(waitMs: number): void;
  stopSync(reason: StopReason, waitMs: number): void;
}

/**
 * Register `stream`'s drain; returns its unregistration. Each wait is the least of `exitWaitMs()`
 * and what is left of the lifecycle's deadline. With `signals` false the ring is left as it is
 * when the process ends by SIGINT/SIGTERM (the `handleSignals` option).
 */
export function registerStreamDrain(stream: DrainableStream, signals: boolean, exitWaitMs: () => number): () => void {
  const waitMs = (deadline: number): number => Math.max(0, Math.min(exitWaitMs(), deadline - Date.now()));
  return registerDrain({
    name: "stream",
    stage: "producer",
    drain: ({ reason, deadline }) => {
      if (reason === "beforeExit") stream.flushSync(waitMs(deadline));
      else if (signals && (reason === "SIGINT" || reason === "SIGTERM")) stream.stopSync(reason, waitMs(deadline));
    },
    exit: ({ reason, deadline }) => {
      if (!signals && (reason === "SIGINT" || reason === "SIGTERM")) return;
      stream.stopSync(reason === "beforeExit" ? "exit" : reason, waitMs(deadline));
    },
  });
}
