/**
 * The run this process belongs to, once known: its directory and who this process is in it.
 *
 * Set by the controller's `MetricLogger` when it is created and by a rank's `RankRuntime` when the
 * controller initialises it. Faces that write files of their own (traces, sessions, streams, text
 * logs) read it here instead of asking the user to pass the run directory around, and may
 * subscribe to be told when it becomes known.
 */
import type { RankIdentity } from "../core/rank-identity.js";
import { processWide } from "../core/process-wide.js";

/** Where this process writes and who it is. */
export interface CurrentRun {
  readonly runDir: string;
  readonly experiment: string;
  readonly trial: string;
  readonly identity: RankIdentity;
  readonly role: "controller" | "rank";
}

type Listener = (run: CurrentRun) => void;

interface Holder {
  run: CurrentRun | undefined;
  listeners: Set<Listener>;
}

function holder(): Holder {
  return processWide("currentRun", (): Holder => ({ run: undefined, listeners: new Set() }));
}

/** The run this process belongs to, or undefined before a logger or the controller said so. */
export function currentRun(): CurrentRun | undefined {
  return holder().run;
}

/** Set this process's run (the logger and rank runtime call this) and tell the listeners. */
export function setCurrentRun(run: CurrentRun): void {
  const h = holder();
  h.run = run;
  for (const listener of h.listeners) {
    try {
      listener(run);
    } catch {
      // A face failing to react must not stop the run from starting.
    }
  }
}

/** Be told whenever the run is set; returns an unsubscribe function. */
export function onRunChange(listener: Listener): () => void {
  const h = holder();
  h.listeners.add(listener);
  return () => h.listeners.delete(listener);
}
