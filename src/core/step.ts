/**
 * Commit semantics for backends whose x-axis must only move forward (W&B, AReaL's StatsLogger):
 * a commit at step `s` after a commit at step `last` is written at `max(s, last + 1)`, so a
 * repeated or earlier step never goes backwards and never overwrites a point already written.
 * One function, shared by every backend and face that needs it.
 */

/** The step a commit is written at: `max(requested, lastCommitted + 1)` (`requested` when nothing was committed yet). */
export function monotonicCommitStep(requested: number, lastCommitted: number | undefined): number {
  if (lastCommitted === undefined) return requested;
  return Math.max(requested, lastCommitted + 1);
}

/** Remembers the last committed step: `commit(step)` returns the step to write at. */
export class MonotonicStep {
  private last: number | undefined;

  /** Start after `lastCommitted` (a resumed run), or fresh. */
  constructor(lastCommitted?: number) {
    this.last = lastCommitted;
  }

  /** The step to write this commit at; records it as the last one. */
  commit(requested: number): number {
    const step = monotonicCommitStep(requested, this.last);
    this.last = step;
    return step;
  }

  /** The last step committed, or undefined. */
  get lastCommitted(): number | undefined {
    return this.last;
  }
}
