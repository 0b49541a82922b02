/**
 * Diagnostics at a bounded rate: a flood of one kind of rejected message is counted every time,
 * printed the first time, and then at most once per interval with how many came since.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  diagnosticCounts,
  resetDiagnostics,
  setDiagnosticHandler,
  warnAtBoundedRate,
  type Diagnostic,
} from "../../src/core/diagnostics.js";

test("warnAtBoundedRate counts every occurrence, prints the first, then at most one line per interval with the count since", () => {
  resetDiagnostics();
  const printed: Diagnostic[] = [];
  const restore = setDiagnosticHandler((d) => void printed.push(d));
  try {
    const t0 = 1_000_000;
    for (let i = 0; i < 1000; i++) warnAtBoundedRate("test.flood", "a forged message was dropped", 60_000, t0 + i);
    assert.equal(diagnosticCounts()["test.flood"], 1000);
    assert.deepEqual(
      printed.map((d) => d.message),
      ["a forged message was dropped"],
    );
    warnAtBoundedRate("test.flood", "a forged message was dropped", 60_000, t0 + 60_000);
    assert.equal(printed.length, 2);
    assert.equal(printed[1]?.message, "a forged message was dropped (999 more since the last report, 1001 in all)");
    assert.equal(printed[1]?.count, 1001);
    warnAtBoundedRate("test.flood", "a forged message was dropped", 60_000, t0 + 60_001);
    assert.equal(printed.length, 2, "not again within the interval");
    assert.equal(diagnosticCounts()["test.flood"], 1002);
  } finally {
    restore();
    resetDiagnostics();
  }
});
