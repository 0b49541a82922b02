/**
 * Running a function inside a measurement that ends when the function has finished — at once for
 * a value or a throw, when it settles for a promise — the one way the tracers wrap sync and async
 * work (`traceScope`, `trace`, `tracePhase`).
 */
import { isPromiseLike } from "../core/deadline.js";

/**
 * Run `fn`, then `done(failed, error)`; returns what `fn` returns and rethrows what it throws. For
 * a promise (any thenable), `done` runs when it settles and a promise of the same outcome is
 * returned in its place.
 */
export function runAround<T>(fn: () => T, done: (failed: boolean, error: unknown) => void): T;
export function runAround<T>(fn: () => T | Promise<Awaited<T>>, done: (failed: boolean, error: unknown) => void): T | Promise<Awaited<T>> {
  let result: T | Promise<Awaited<T>>;
  try {
    result = fn();
  } catch (error) {
    done(true, error);
    throw error;
  }
  if (isPromiseLike(result)) {
    return Promise.resolve(result).then(
      (value) => {
        done(false, undefined);
        return value;
      },
      (error: unknown) => {
        done(true, error);
        throw error;
      },
    );
  }
  done(false, undefined);
  return result;
}
