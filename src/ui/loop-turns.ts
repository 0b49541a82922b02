/**
 * Turns of the event loop given only where they are due: a request that works through many items
 * (a many-lines answer, reads one after another) gives the loop a turn once it has held it for
 * `SLICE_MS` since the loop last turned, not after every item. Items that are small, or that wait
 * on I/O anyway (the team server's reads: the loop turns while they wait), cost no extra turn, so
 * a busy server does not put such a request at the back of its queue once per item; a long
 * stretch of synchronous work (the local store's reads, serialising long lines) is still cut.
 */
import { setImmediate as yieldToEventLoop } from "node:timers/promises";

/** Longest a stretch of work holds the event loop before it gives it a turn (ms). */
const SLICE_MS = 5;

/** When the stretch of work since the loop last turned began, or null when the loop has turned since. */
let stretchStart: number | null = null;

/** Give the event loop a turn if this turn of it has run for `SLICE_MS` already. */
export async function turnIfDue(): Promise<void> {
  const now = performance.now();
  if (stretchStart === null) {
    stretchStart = now;
    // Runs once the loop turns (its check phase): the next call starts a new stretch.
    setImmediate(() => (stretchStart = null));
    return;
  }
  if (now - stretchStart < SLICE_MS) return;
  await yieldToEventLoop();
}
