/**
 * `IngestGate`: batches past the ingest pool's connections wait their turn in a bounded queue, for a
 * bounded time; past either they are refused with a 503 and `Retry-After` (which the sync retries).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { IngestBusy, IngestGate } from "../../src/server/ingest-gate.js";

/** Work that ends when `finish` is called. */
function held(): { work: () => Promise<string>; finish: (v: string) => void; started: () => boolean } {
  let finish: (v: string) => void = () => undefined;
  let started = false;
  const done = new Promise<string>((resolve) => (finish = resolve));
  return {
    work: () => {
      started = true;
      return done;
    },
    finish: (v) => finish(v),
    started: () => started,
  };
}

test("a batch past the slots waits its turn; past the queue it is refused with a 503 to retry", async () => {
  const gate = new IngestGate(1, 1, 60_000);
  const a = held();
  const b = held();
  const first = gate.run(a.work);
  const second = gate.run(b.work);
  assert.equal(gate.active, 1);
  assert.equal(gate.waiting, 1);
  assert.equal(b.started(), false, "the second waits while the first holds the slot");
  await assert.rejects(
    gate.run(() => Promise.resolve("c")),
    (error: unknown) => {
      assert.ok(error instanceof IngestBusy);
      assert.equal(error.status, 503);
      assert.equal(error.retryAfterS, 1);
      return true;
    },
  );
  a.finish("a");
  assert.equal(await first, "a");
  b.finish("b");
  assert.equal(await second, "b");
  assert.equal(gate.active, 0);
  assert.equal(gate.waiting, 0);
});

test("a batch that waits past the bound is refused, and leaves the queue", async () => {
  const gate = new IngestGate(1, 8, 20);
  const a = held();
  const first = gate.run(a.work);
  await assert.rejects(
    gate.run(() => Promise.resolve("late")),
    (error: unknown) => error instanceof IngestBusy,
  );
  assert.equal(gate.waiting, 0);
  a.finish("a");
  assert.equal(await first, "a");
  assert.equal(gate.active, 0, "the slot is given back");
  assert.equal(await gate.run(() => Promise.resolve("next")), "next");
});
