/**
 * The stream's bounded waits on the writer: every wait for another thread has a deadline, and a
 * writer that misses it is reported by the caller (see `StreamService.teardown`).
 */

/**
 * Resolve when `register`'s `settle` is called or after `waitMs`, whichever comes first. The timer
 * is referenced: it keeps the process alive while it waits, and bounds the wait.
 */
export function waitAtMost(waitMs: number, register: (settle: () => void) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => settle(), waitMs);
    const settle = (): void => {
      clearTimeout(timer);
      resolve();
    };
    register(settle);
  });
}

/**
 * Block this thread on `control[index]` until `ready(value)` or `waitMs` passes (exit paths,
 * where nothing can be awaited). True when ready.
 */
export function waitUntil(
  control: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  waitMs: number,
): boolean {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const value = Atomics.load(control, index);
    if (ready(value)) return true;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    Atomics.wait(control, index, value, left);
  }
}

/**
 * Poll `control[index]` every few ms, without blocking the event loop, until `ready(value)` or
 * `waitMs` passes (a linked thread waits on a writer another thread owns). True when ready.
 */
export async function pollUntil(
  control: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  waitMs: number,
): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  while (!ready(Atomics.load(control, index))) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return true;
}
