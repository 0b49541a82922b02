/**
 * A request's reads a few at a time: the lines of `/api/lines`, the runs of a `runs=[…]` request.
 * Each read's `HttpError` is that read's answer, not the request's.
 */
import { turnIfDue } from "./loop-turns.js";
import { HttpError } from "./security.js";

/**
 * How many reads of one request run at once, unless the source says (`concurrentRuns`): a team
 * server's wait on the database; the local store's do not overlap.
 */
export const READ_AHEAD = 4;

/** One read's outcome: its value, or the HTTP error that says why there is none. */
export type ReadOutcome = { ok: true; value: unknown } | { ok: false; error: HttpError };

/**
 * `n` reads, at most `inFlight` at once, giving the event loop a turn between starts where one is
 * due (`turnIfDue`: reads that wait on I/O, as a team server's, start together); each `HttpError` kept as that read's outcome (any other error fails the
 * request). Stops starting reads once `gone()` (the client left).
 */
export async function readAhead(
  n: number,
  read: (i: number) => Promise<unknown>,
  gone: () => boolean,
  inFlight = READ_AHEAD,
): Promise<ReadOutcome[]> {
  const outcomes: ReadOutcome[] = new Array<ReadOutcome>(n);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < n && !gone(); i = next++) {
      await turnIfDue();
      try {
        outcomes[i] = { ok: true, value: await read(i) };
      } catch (error) {
        if (!(error instanceof HttpError)) throw error;
        outcomes[i] = { ok: false, error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, n) }, worker));
  return gone() ? [] : outcomes;
}
