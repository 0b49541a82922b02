/**
 * Running a function inside a measurement that ends when the function has finished — at once for
 * a value or a throw, when it settles for a promise — the one way the tracers wrap sync and async
 * work (`trace`, `tracePhase`; `traceScope` writes the same steps in place, see perf-tracer.ts).
 */
import { isPromiseLike } from "../core/deadline.js";

/**
 * Run `fn`, then `done(failed, error)`; returns what `fn` returns and rethrows what it throws. For
 * a promise (any thenable), `done` runs when it settles (see `settleAfter`).
 */
export function runAround<T>(fn: () => T, done: (failed: boolean, error: unknown) => void): T {
  let result: T;
  try {
    result = fn();
  } catch (error) {
    done(true, error);
    throw error;
  }
  if (isPromiseLike(result)) {
    return settleAfter(
      result,
      () => done(false, undefined),
      (error) => done(true, error),
    );
  }
  done(false, undefined);
  return result;
}

/**
 * A wrapped function's thenable result `result`, replaced by a promise of the same outcome that
 * calls `ended()` (fulfilled) or `failed(error)` (rejected, then rethrown) first. Typed as the
 * wrapped function's `T`: a caller awaits it exactly as it would have awaited `result` (a custom
 * thenable comes back as a native promise, which is the one difference).
 */
export function settleAfter<T>(
  result: T & PromiseLike<unknown>,
  ended: () => void,
  failed: (error: unknown) => void,
): T;
export function settleAfter(
  result: PromiseLike<unknown>,
  ended: () => void,
  failed: (error: unknown) => void,
): unknown {
  return Promise.resolve(result).then(
    (value) => {
      ended();
      return value;
    },
    (error: unknown) => {
      failed(error);
      throw error;
    },
  );
}
