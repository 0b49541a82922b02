import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { formatMetricsGrid, formatScientific } from "../../src/backends/console/index.js";
import { getCollector } from "../../src/core/collector.js";
import { monotonicCommitStep, MonotonicStep } from "../../src/core/step.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { stats } from "../../src/stats/index.js";
import { captureStdout, tempDir } from "../helpers.js";

afterEach(() => getCollector().clear());

test("commit step is max(step, last + 1): repeated and earlier steps move forward", () => {
  assert.equal(monotonicCommitStep(5, undefined), 5);
  assert.equal(monotonicCommitStep(5, 3), 5);
  assert.equal(monotonicCommitStep(3, 3), 4);
  assert.equal(monotonicCommitStep(0, 9), 10);
  const commits = new MonotonicStep();
  assert.deepEqual([0, 1, 1, 1, 7, 2].map((s) => commits.commit(s)), [0, 1, 2, 3, 7, 8]);
  assert.equal(new MonotonicStep(10).commit(4), 11, "a resumed run continues after its last step");
});

test("AReaL grid: up to 4 pairs per row, filled column by column (6 keys → 2 rows of 3 pairs), .4e values, golden", () => {
  const metrics = ["a", "bb", "c", "d", "e", "f"].map((key, i) => ({ key, value: [0.25, 1, -3e-7, 12345.678, NaN, 2][i] as number, reduce: "mean", step: 3, timestamp: 0 }));
  assert.equal(
    formatMetricsGrid("GlobalReduce", 3, metrics),
    [
      "=== [GlobalReduce] - METRICS STEP 3 ===",
      "╒════╤════════════╤═══╤═════════════╤═══╤════════════╕",
      "│ a  │ 2.5000e-01 │ c │ -3.0000e-07 │ e │        nan │",
      "├────┼────────────┼───┼─────────────┼───┼────────────┤",
      "│ bb │ 1.0000e+00 │ d │  1.2346e+04 │ f │ 2.0000e+00 │",
      "╘════╧════════════╧═══╧═════════════╧═══╧════════════╛",
      "",
    ].join("\n"),
  );
  assert.equal(formatScientific(-Infinity), "-inf");
  assert.equal(formatScientific(1e100), "1.0000e+100");
});

test("console grid layout through a flush hides __count keys; bad layout options are rejected", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({ console: { loggingMode: "global_reduce", layout: "grid", pairsPerRow: 2 } });
  stats.scalar({ reward: 0.5 });
  stats.scalar({ loss: 2 });
  const out = await captureStdout(() => logger.flush(0));
  assert.equal(
    out,
    [
      "=== [GlobalReduce] - METRICS STEP 0 ===",
      "╒══════╤════════════╤════════╤════════════╕",
      "│ loss │ 2.0000e+00 │ reward │ 5.0000e-01 │",
      "╘══════╧════════════╧════════╧════════════╛",
      "",
    ].join("\n"),
  );
  await logger.shutdown();
  const bad = new MetricLogger({ runDir: tempDir() });
  // @ts-expect-error -- an invalid layout is a compile error too; this checks the runtime error
  await assert.rejects(bad.initBackends({ console: { loggingMode: "global_reduce", layout: "table" } }), /layout "table" is not valid; valid: "list".*"grid"/);
  await assert.rejects(bad.initBackends({ console: { loggingMode: "global_reduce", pairsPerRow: 0 } }), /pairsPerRow must be a positive integer/);
  await bad.shutdown();
});
