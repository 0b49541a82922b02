import assert from "node:assert/strict";
import { test } from "node:test";
import { residentSetSize } from "../../src/trace/rss.js";

test("residentSetSize agrees with process.memoryUsage.rss() and follows memory the process touches", () => {
  const before = residentSetSize();
  const reference = process.memoryUsage.rss();
  assert.ok(Math.abs(before - reference) < 0.1 * reference, `statm ${before} vs memoryUsage ${reference}`);
  const block = Buffer.alloc(128 * 1024 * 1024, 1); // filled, so every page is resident
  const after = residentSetSize();
  assert.ok(after - before > 100 * 1024 * 1024, `grew by ${after - before} bytes after touching 128 MiB`);
  assert.equal(block[block.length - 1], 1);
});
