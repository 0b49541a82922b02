/**
 * The one retry loop, backoff and sleep of rankscope: W&B requests, NATS joins and SQLite's busy
 * retries all wait through here, so every retry has jitter (clients spread out instead of
 * retrying in step) and a bound (a deadline or a number of attempts).
 */

/** How retries are spaced: exponential from `initialMs`, capped at `maxMs`. */
interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
}

/**
 * The delay before retry number `attempt` (0-based): exponential backoff with "equal jitter",
 * half the delay fixed and half random.
 */
export function backoffDelay(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const full = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(attempt, 30));
  return full / 2 + random() * (full / 2);
}

/**
 * Wait `ms`, or less when `stop` is signalled (it resolves then, never rejects). The timer is
 * ref'd: something waiting to retry keeps the process alive, as the work it retries would.
 */
export function sleep(ms: number, stop?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (stop?.aborted === true) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      stop?.removeEventListener("abort", done);
      resolve();
    }
    stop?.addEventListener("abort", done, { once: true });
  });
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Block this thread for `ms`: only for threads of our own whose work is synchronous anyway (SQLite). */
function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

/** One attempt's outcome. */
export type AttemptOutcome<T> =
  | { readonly ok: true; readonly value: T }
  | {
      readonly ok: false;
      readonly retryable: boolean;
      readonly reason: string;
      readonly retryAfterMs?: number | undefined;
    };

/** Options of `retry`. */
interface RetryOptions extends BackoffPolicy {
  /** Total time the retries may take (attempts included); a retry that would end past it is not made. */
  readonly deadlineMs: number;
  /** Stops the waiting (and the loop) early. */
  readonly stop?: AbortSignal;
  /** Told before each wait, for reporting and counting. */
  readonly onRetry?: (reason: string, delayMs: number, attempt: number) => void;
}

/** Why `retry` gave up, with the last failed attempt. */
interface GaveUp<F> {
  readonly ok: false;
  readonly last: F;
  /** `refused`: not retryable; `deadline`: the budget is spent; `stopped`: `stop` was signalled. */
  readonly why: "refused" | "deadline" | "stopped";
}

/**
 * Run `attempt` until it succeeds, fails for good (not retryable), the deadline would be passed,
 * or `stop` is signalled. Waits `backoffDelay` between attempts; a `retryAfterMs` (a server's
 * `Retry-After`) waits at least that.
 */
export async function retry<T, F extends Extract<AttemptOutcome<T>, { ok: false }>>(
  attempt: (n: number) => Promise<{ readonly ok: true; readonly value: T } | F>,
  options: RetryOptions,
): Promise<{ readonly ok: true; readonly value: T } | GaveUp<F>> {
  const started = Date.now();
  for (let n = 0; ; n++) {
    const result = await attempt(n);
    if (result.ok) return result;
    if (!result.retryable) return { ok: false, last: result, why: "refused" };
    const backoff = backoffDelay(n, options);
    const delay =
      result.retryAfterMs !== undefined ? Math.max(result.retryAfterMs, Math.min(backoff, options.initialMs)) : backoff;
    if (stopped(options.stop)) return { ok: false, last: result, why: "stopped" };
    if (Date.now() - started + delay > options.deadlineMs) return { ok: false, last: result, why: "deadline" };
    options.onRetry?.(result.reason, delay, n);
    await sleep(delay, options.stop);
    if (stopped(options.stop)) return { ok: false, last: result, why: "stopped" };
  }
}

function stopped(stop: AbortSignal | undefined): boolean {
  return stop?.aborted === true;
}

/**
 * The synchronous form, for a thread of our own doing synchronous work (SQLite): run `fn`,
 * retrying while `shouldRetry(error)` up to `attempts` times with jittered backoff, then throw.
 */
export function retrySync<T>(
  fn: () => T,
  options: BackoffPolicy & { readonly attempts: number; readonly shouldRetry: (error: unknown) => boolean },
): T {
  for (let n = 0; ; n++) {
    try {
      return fn();
    } catch (error) {
      if (!options.shouldRetry(error) || n + 1 >= options.attempts) throw error;
      sleepSync(backoffDelay(n, options));
    }
  }
}
