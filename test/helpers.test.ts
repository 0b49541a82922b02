/** The shared test helpers' own contract: `waitFor` resolves with the first truthy value, or throws naming what it waited for; `within` bounds one awaited event. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { waitFor, within } from "./helpers.js";

test("waitFor resolves with the condition's first truthy value, sync or async", async () => {
  let checks = 0;
  assert.equal(
    await waitFor(() => (++checks >= 3 ? "ready" : undefined), {
      timeoutMs: 10_000,
      what: "three checks",
      intervalMs: 1,
    }),
    "ready",
  );
  assert.equal(checks, 3);
  assert.deepEqual(await waitFor(async () => ({ answer: 0 }), { timeoutMs: 10_000, what: "an object" }), { answer: 0 });
});

test("waitFor throws naming what it waited for once the deadline passed, and passes on a condition's error", async () => {
  await assert.rejects(
    waitFor(() => false, { timeoutMs: 30, what: "the moon to turn blue", intervalMs: 5 }),
    /^Error: timed out after 30 ms waiting for the moon to turn blue$/,
  );
  await assert.rejects(
    waitFor(
      () => {
        throw new RangeError("broken check");
      },
      { timeoutMs: 10_000, what: "never" },
    ),
    RangeError,
  );
});

test("within resolves with the promise's value, passes on its rejection, and throws naming what it waited for at the deadline", async () => {
  assert.equal(await within(Promise.resolve(7), { timeoutMs: 10_000, what: "a number" }), 7);
  await assert.rejects(
    within(Promise.reject(new RangeError("exit 3")), { timeoutMs: 10_000, what: "never" }),
    RangeError,
  );
  await assert.rejects(
    within(new Promise(() => {}), { timeoutMs: 30, what: "a child that never exits" }),
    /^Error: timed out after 30 ms waiting for a child that never exits$/,
  );
});
