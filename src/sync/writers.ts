/**
 * The store writers open in this process, per run directory, so the live sync's last pass can
 * wait until the run's other writers here (the controller's own per-rank stores, which a slow
 * start can leave writing after the controller's store finished) have finished too.
 */
import { processWide } from "../core/process-wide.js";
import { DEADLINE, withDeadline } from "../core/deadline.js";

interface OpenWriters {
  readonly counts: Map<string, number>;
  readonly waiters: Map<string, (() => void)[]>;
}

function open(): OpenWriters {
  return processWide("syncOpenWriters", () => ({
    counts: new Map<string, number>(),
    waiters: new Map<string, (() => void)[]>(),
  }));
}

/** A store writer of `runDir` opened; call the function returned once it has finished. */
export function trackStoreWriter(runDir: string): () => void {
  const state = open();
  state.counts.set(runDir, (state.counts.get(runDir) ?? 0) + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (state.counts.get(runDir) ?? 1) - 1;
    if (left > 0) return void state.counts.set(runDir, left);
    state.counts.delete(runDir);
    for (const wake of state.waiters.get(runDir) ?? []) wake();
    state.waiters.delete(runDir);
  };
}

/** Resolves once no store writer of `runDir` is open in this process, or after `ms`; false when the wait ran out. */
export async function storeWritersDone(runDir: string, ms: number): Promise<boolean> {
  const state = open();
  if ((state.counts.get(runDir) ?? 0) === 0) return true;
  const done = new Promise<void>((resolve) =>
    state.waiters.set(runDir, [...(state.waiters.get(runDir) ?? []), resolve]),
  );
  return (await withDeadline(done, ms)) !== DEADLINE;
}
