/**
 * Recording with no logger at all (issue 20, item 4): the values are never logged, and that is
 * said — once, some seconds after the first key (off the hot path), and at exit with the count —
 * never silently. Values recorded before a logger is created are logged by it, without a warning.
 */
import assert from "node:assert/strict";
import { mock, test } from "node:test";
import { getCollector, NO_LOGGER_WARN_MS, recordMetric } from "../../src/core/collector.js";
import { diagnosticCounts } from "../../src/core/diagnostics.js";
import { Reduce } from "../../src/core/registry.js";
import { collectDiagnostics, runSnippet } from "../helpers.js";

const INDEX = JSON.stringify(new URL("../../src/index.ts", import.meta.url).href);
const COLLECTOR = JSON.stringify(new URL("../../src/core/collector.ts", import.meta.url).href);

test("a process that records with no logger is told at exit how many values were never logged", async () => {
  const result = await runSnippet(
    `const { recordMetric } = await import(${INDEX});
     const { getCollector } = await import(${COLLECTOR});
     for (let i = 0; i < 4; i++) recordMetric("loss", i);
     recordMetric("tokens", 7, "sum");
     process.on("exit", () => process.stdout.write("neverLogged=" + getCollector().neverLogged + "\\n"));`,
    {},
  );
  assert.equal(result.code, 0, result.stderr);
  const warnings = result.stderr.split("\n").filter((l) => l.includes("[rankscope]"));
  assert.equal(warnings.length, 1, result.stderr);
  assert.match(
    warnings[0] ?? "",
    /the process ended with 5 value\(s\) in 2 key\(s\) recorded and no logger: they were never logged; create one in the controller \(getOrCreateMetricLogger/,
  );
  assert.match(result.stdout, /^neverLogged=5$/m, "counted");
});

test("values recorded before the logger is created are logged by it, with no warning", async () => {
  const result = await runSnippet(
    `const { recordMetric, getOrCreateMetricLogger } = await import(${INDEX});
     const { mkdtempSync } = await import("node:fs"); const { tmpdir } = await import("node:os"); const { join } = await import("node:path");
     recordMetric("loss", 2);
     const logger = await getOrCreateMetricLogger({ runDir: mkdtempSync(join(tmpdir(), "early-")), quiet: true });
     await logger.initBackends({ console: { loggingMode: "global_reduce" } });
     recordMetric("loss", 4);
     await logger.flush(0);
     await logger.shutdown();`,
    {},
  );
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /loss:\s+3\.0/);
  assert.doesNotMatch(result.stderr, /no logger/);
});

test("while no logger exists, one warning some seconds after the first key (never on the hot path)", async () => {
  // This test file's process has no logger: its collector watches from its first key on.
  mock.timers.enable({ apis: ["setTimeout"] });
  try {
    const seen = await collectDiagnostics(() => {
      recordMetric("early/loss", 1, Reduce.MEAN);
      recordMetric("early/loss", 3, Reduce.MEAN);
      mock.timers.tick(NO_LOGGER_WARN_MS - 1);
      assert.equal(
        diagnosticCounts()["collector.noLogger"],
        undefined,
        "not before the grace period: a logger may still come",
      );
      mock.timers.tick(1);
      for (let i = 0; i < 1000; i++) recordMetric("early/loss", i, Reduce.MEAN);
    });
    const noLogger = seen.filter((d) => d.code === "collector.noLogger");
    assert.equal(noLogger.length, 1, JSON.stringify(seen));
    assert.match(
      noLogger[0]?.message ?? "",
      /^2 value\(s\) in 1 key\(s\) were recorded in this process and no logger exists to flush them; they are kept until one is/,
    );
    assert.equal(getCollector().hasFlusher, false);
  } finally {
    mock.timers.reset();
  }
});
