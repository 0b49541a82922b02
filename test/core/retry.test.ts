/** The one retry helper: jittered backoff, a deadline, a stop signal; and its synchronous form. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { backoffDelay, retry, retrySync, type AttemptOutcome } from "../../src/core/retry.js";

test("backoff doubles from initialMs to maxMs, with half of each delay random", () => {
  const policy = { initialMs: 100, maxMs: 1000 };
  assert.deepEqual(
    [0, 1, 2, 3, 4, 10].map((n) => backoffDelay(n, policy, () => 0)),
    [50, 100, 200, 400, 500, 500],
  );
  assert.deepEqual(
    [0, 1, 4].map((n) => backoffDelay(n, policy, () => 1)),
    [100, 200, 1000],
  );
});

test("retry retries what is retryable until it succeeds, and reports every wait", async () => {
  const waits: number[] = [];
  let calls = 0;
  const result = await retry<string, Extract<AttemptOutcome<string>, { ok: false }>>(
    async () => (++calls < 3 ? { ok: false, retryable: true, reason: `try ${calls}` } : { ok: true, value: "done" }),
    { initialMs: 1, maxMs: 4, deadlineMs: 10_000, onRetry: (_reason, delay) => waits.push(delay) },
  );
  assert.deepEqual(result, { ok: true, value: "done" });
  assert.equal(calls, 3);
  assert.equal(waits.length, 2);
});

test("retry gives up at once on a refusal, at its deadline, and when stopped", async () => {
  const refused = await retry(async () => ({ ok: false as const, retryable: false, reason: "401" }), {
    initialMs: 1,
    maxMs: 1,
    deadlineMs: 10_000,
  });
  assert.deepEqual(refused, { ok: false, last: { ok: false, retryable: false, reason: "401" }, why: "refused" });
  let calls = 0;
  const late = await retry(
    async () => {
      calls++;
      return { ok: false as const, retryable: true, reason: "503" };
    },
    // The first wait (at least 500 ms) would pass the 100 ms deadline: no second attempt.
    { initialMs: 1000, maxMs: 1000, deadlineMs: 100 },
  );
  assert.equal(late.ok ? "" : late.why, "deadline");
  assert.equal(calls, 1);
  const stop = new AbortController();
  const stopped = await retry(
    async () => {
      stop.abort();
      return { ok: false as const, retryable: true, reason: "503" };
    },
    { initialMs: 60_000, maxMs: 60_000, deadlineMs: 600_000, stop: stop.signal },
  );
  assert.equal(stopped.ok ? "" : stopped.why, "stopped");
});

test("retrySync retries while asked, a bounded number of times, then throws the last error", () => {
  let calls = 0;
  const busy = Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" });
  assert.equal(
    retrySync(
      () => {
        if (++calls < 3) throw busy;
        return 7;
      },
      { attempts: 5, initialMs: 1, maxMs: 2, shouldRetry: (e) => (e as { code?: string }).code === "SQLITE_BUSY" },
    ),
    7,
  );
  calls = 0;
  assert.throws(
    () =>
      retrySync(
        () => {
          calls++;
          throw busy;
        },
        { attempts: 3, initialMs: 1, maxMs: 1, shouldRetry: () => true },
      ),
    /database is locked/,
  );
  assert.equal(calls, 3);
  assert.throws(
    () => retrySync(() => JSON.parse("{"), { attempts: 3, initialMs: 1, maxMs: 1, shouldRetry: () => false }),
    SyntaxError,
  );
});
