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

/** A stretch of work begins now; it ends when the loop turns (its check phase). */
function startStretch(): void {
  stretchStart = performance.now();
  setImmediate(() => (stretchStart = null));
}

/** Give the event loop a turn if this turn of it has run for `SLICE_MS` already. */
export async function turnIfDue(): Promise<void> {
  if (stretchStart === null) return startStretch();
  if (performance.now() - stretchStart < SLICE_MS) return;
  await yieldToEventLoop();
  // This turn began with the caller's next piece of work: count it from here.
  if (stretchStart === null) startStretch();
}
