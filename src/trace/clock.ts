/**
 * The tracers' clock: monotonic milliseconds, `performance.now()`. `Tracer`, `PerfTracer` and
 * `SessionTracer` read time only through `traceClock.now()`, so a test can drive time (node:test's
 * `mock.timers` mocks timers and `Date`, not `performance.now()`) with `setTraceClock`.
 *
 * One property load and an inlined call on the hot path (`Tracer.step`, a span's two readings);
 * `npm run bench -- trace` measures the same with it as with `performance.now()` written in place.
 */

/** Where the tracers read the time. */
export interface TraceClock {
  /** Monotonic milliseconds (only differences are meaningful). */
  now(): number;
}

const performanceClock = (): number => performance.now();

/** The one clock object the tracers read. */
export const traceClock: TraceClock = { now: performanceClock };

/**
 * Read time from `now` instead of `performance.now()` (tests); returns the function that
 * restores the real clock. `now` must be monotonic, like `performance.now()`.
 */
export function setTraceClock(now: () => number): () => void {
  traceClock.now = now;
  return () => {
    traceClock.now = performanceClock;
  };
}
