/** processWide: every process-wide slot under one versioned key, shared by every copy of the package. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { currentRank, getOrCreateMetricLogger } from "../../src/index.js";
import { getCollector } from "../../src/core/collector.js";
import { peekProcessWide, processWide, setProcessWide } from "../../src/core/process-wide.js";
import { tempDir } from "../helpers.js";

const slot = (name: string): unknown =>
  (globalThis as unknown as Record<symbol, unknown>)[Symbol.for(`rankscope.v1.${name}`)];

test("state lives under Symbol.for('rankscope.v1.{name}'): the collector, the logger, the rank identity", async () => {
  assert.equal(slot("collector"), getCollector());
  const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
  assert.equal(slot("metricLogger"), logger, "the controller's logger (a hand-rolled globalThis slot before)");
  await logger.shutdown();
  assert.equal(slot("metricLogger"), undefined);
  assert.equal(slot("rankIdentity"), undefined);
  assert.equal(currentRank().rank, 0);
});

test("a second copy of the package (same key) sees the same values; set and peek never create", () => {
  const made = processWide("testSlot", () => ({ n: 1 }));
  assert.equal(
    processWide("testSlot", () => ({ n: 2 })),
    made,
  );
  assert.equal(slot("testSlot"), made);
  assert.equal(peekProcessWide("testMissing"), undefined);
  setProcessWide("testSlot", undefined);
  assert.equal(peekProcessWide("testSlot"), undefined);
});
