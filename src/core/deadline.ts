/**
 * One way to wait for something outside our control with a deadline: a rank, a backend, a
 * transport. What misses the deadline is the caller's to report (by name) and count.
 */

/** What `withDeadline` resolves to when the deadline passed first. */
export const DEADLINE: unique symbol = Symbol("rankscope.deadline");

/**
 * `promise`, or `DEADLINE` if it has not settled within `ms`. The timer is not unref'd: a call the
 * caller awaits keeps the process alive until its deadline, so a hung peer cannot make the process
 * exit in the middle of it. The timer is cleared as soon as `promise` settles.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T | typeof DEADLINE> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<typeof DEADLINE>((resolve) => {
    timer = setTimeout(() => resolve(DEADLINE), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** True for a value `await` would wait for (a promise or any thenable). */
export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === "object" || typeof value === "function") &&
    "then" in value &&
    typeof value.then === "function"
  );
}
