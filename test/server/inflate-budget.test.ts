/**
 * `InflateBudget`: the bytes all ingest requests hold inflated, against one bound; once a burst is
 * over, what it held is collected so the server's memory goes back to the system.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { InflateBudget } from "../../src/server/ingest-route.js";
import { waitFor } from "../helpers.js";

const MIB = 1024 * 1024;

test("a take past the bound is refused and holds nothing", () => {
  const budget = new InflateBudget(256 * MIB, null);
  assert.equal(budget.take(200 * MIB), true);
  assert.equal(budget.take(100 * MIB), false);
  assert.equal(budget.used, 200 * MIB);
  budget.give(200 * MIB);
  assert.equal(budget.used, 0);
});

test("bytes given back inside the second after a collection are collected when that second ends", async () => {
  let collections = 0;
  const budget = new InflateBudget(256 * MIB, () => collections++);
  // A burst's first request ends: nothing held, 120 MiB given back, one collection.
  budget.take(120 * MIB);
  budget.give(120 * MIB);
  await waitFor(() => collections === 1, { timeoutMs: 10_000, what: "the first collection" });
  // The last request of the burst ends at once after it: its 120 MiB must not stay uncollected.
  budget.take(120 * MIB);
  budget.give(120 * MIB);
  await waitFor(() => collections === 2, { timeoutMs: 10_000, what: "the burst's last bytes to be collected" });
});

test("nothing is collected while a request still holds bytes, or after little was given back", async () => {
  let collections = 0;
  const budget = new InflateBudget(256 * MIB, () => collections++);
  budget.take(100 * MIB);
  budget.take(1 * MIB);
  budget.give(100 * MIB);
  budget.give(1 * MIB);
  await waitFor(() => collections === 1, { timeoutMs: 10_000, what: "the collection once nothing is held" });
  // The threshold: small requests do not ask for a collection each.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  budget.take(1 * MIB);
  budget.give(1 * MIB);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(collections, 1);
});
