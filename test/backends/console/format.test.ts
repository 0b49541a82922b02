/**
 * What the `console` backend (src/backends/console/index.ts) prints on stdout: Forge's table (list
 * layout), AReaL's grid, sample logs, raw stream lines, and rankscope's own keys only when they say
 * something (a missing rank, a drop). (Through a logger with a rank that stops answering, and
 * option errors: console.test.ts.)
 */
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { getBackendRegistration, type Backend } from "../../../src/backends/backend.js";
import { formatMetricsGrid, formatScientific } from "../../../src/backends/console/index.js";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import type { Metric, StreamRecord } from "../../../src/core/metric.js";
import { getOrCreateMetricLogger, recordMetric, Reduce } from "../../../src/index.js";
import { getCollector } from "../../../src/core/collector.js";
import { stats } from "../../../src/stats/index.js";
import { captureStdout, tempDir } from "../../helpers.js";

const collector = getCollector();
afterEach(() => collector.clear());

/** The registered console backend, started as a rank's would be (`Trainer`, local rank 1 of 2). */
async function consoleBackend(): Promise<Backend> {
  const registration = getBackendRegistration("console");
  assert.ok(registration, "the console backend registers when its module loads");
  const backend = registration.factory({ loggingMode: "per_rank_reduce" });
  await backend.init?.({
    backendName: "console",
    displayName: "Trainer_AAAA_r1",
    loggingMode: "per_rank_reduce",
    role: "rank",
    identity: { rank: 1, rankName: "Trainer_AAAA_r1", processName: "Trainer", localRank: 1, localWorldSize: 2 },
    runDir: tempDir(),
    experiment: "exp",
    trial: "t",
    resumeStep: 0,
    primaryMetadata: {},
  });
  return backend;
}

const metric = (key: string, value: number): Metric => ({ key, value, reduce: "mean", step: 0, timestamp: 0 });

test("console prints Forge's table: header, sorted aligned keys, float values, rule", async () => {
  collector.clear();
  const logger = await getOrCreateMetricLogger({ processName: "Controller" });
  await logger.initBackends({ console: { loggingMode: "global_reduce" } });
  for (const n of [1, 2, 3]) {
    recordMetric("my_sum_metric", n, Reduce.SUM);
    recordMetric("my_max_metric", n, Reduce.MAX);
    recordMetric("my_mean_metric", n, Reduce.MEAN);
  }
  const out = await captureStdout(() => logger.flush(0));
  assert.equal(
    out,
    [
      "=== [GlobalReduce] - METRICS STEP 0 ===",
      "my_max_metric:  3.0",
      "my_mean_metric: 2.0",
      "my_sum_metric:  6.0",
      "===============",
      "",
    ].join("\n"),
  );
  await logger.shutdown();
});

test("samples print as JSON under SAMPLE LOGS, quantiles as key/pNN", async () => {
  collector.clear();
  const logger = await getOrCreateMetricLogger();
  await logger.initBackends({ console: { loggingMode: "global_reduce" } });
  recordMetric("rollout", { prompt: "2+2", response: "4", reward: 1 }, Reduce.SAMPLE);
  recordMetric("rollout", { prompt: "2+3", response: "6", reward: 0 }, Reduce.SAMPLE);
  for (let i = 1; i <= 100; i++) recordMetric("latency", i, Reduce.quantiles([0.5, 1]));
  const out = await captureStdout(() => logger.flush(3));
  assert.equal(
    out,
    [
      "=== [GlobalReduce] - METRICS STEP 3 ===",
      "latency/p100: 100.0",
      `latency/p50:  ${String(Number(/latency\/p50:\s+(\S+)/.exec(out)?.[1]))}`,
      "===============",
      "=== [GlobalReduce] - SAMPLE LOGS STEP 3 ===",
      "[rollout] (2 samples)",
      JSON.stringify({ prompt: "2+2", response: "4", reward: 1 }, null, 2),
      JSON.stringify({ prompt: "2+3", response: "6", reward: 0 }, null, 2),
      "===============",
      "",
    ].join("\n"),
  );
  const p50 = Number(/latency\/p50:\s+(\S+)/.exec(out)?.[1]);
  assert.ok(Math.abs(p50 - 50) / 50 < 0.03, `p50 ${p50}`);
  await logger.shutdown();
});

test("AReaL grid: up to 4 pairs per row, filled column by column (6 keys → 2 rows of 3 pairs), .4e values, golden", () => {
  const metrics = ["a", "bb", "c", "d", "e", "f"].map((key, i) => ({
    key,
    value: [0.25, 1, -3e-7, 12345.678, NaN, 2][i] as number,
    reduce: "mean",
    step: 3,
    timestamp: 0,
  }));
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
  // The call alone on its line, so the directive stays above it however the line is laid out.
  // @ts-expect-error -- an invalid layout is a compile error too; this checks the runtime error
  const badLayout = bad.initBackends({ console: { loggingMode: "global_reduce", layout: "table" } });
  await assert.rejects(badLayout, /layout "table" is not valid; valid: "list".*"grid"/);
  await assert.rejects(
    bad.initBackends({ console: { loggingMode: "global_reduce", pairsPerRow: 0 } }),
    /pairsPerRow must be a positive integer/,
  );
  await bad.shutdown();
});

test("rankscope's own keys are printed only when they say something: a missing rank, a drop", async () => {
  const backend = await consoleBackend();
  const complete = [
    metric("loss", 0.5),
    metric("loss__count", 4),
    metric("rankscope/ranks_expected", 4),
    metric("rankscope/ranks_reporting", 4),
    metric("rankscope/stream_dropped", 0),
  ];
  assert.equal(
    await captureStdout(() => backend.logBatch(complete, 3)),
    "=== [Trainer_AAAA_r1] - METRICS STEP 3 ===\nloss: 0.5\n===============\n",
  );
  const troubled = [
    metric("loss", 0.5),
    metric("loss__count", 3),
    metric("rankscope/ranks_expected", 4),
    metric("rankscope/ranks_reporting", 3),
    metric("rankscope/stream_dropped", 12),
  ];
  assert.equal(
    await captureStdout(() => backend.logBatch(troubled, 4)),
    [
      "=== [Trainer_AAAA_r1] - METRICS STEP 4 ===",
      "loss:                      0.5",
      "rankscope/ranks_expected:  4.0",
      "rankscope/ranks_reporting: 3.0",
      "rankscope/stream_dropped:  12.0",
      "===============",
      "",
    ].join("\n"),
  );
  assert.equal(
    await captureStdout(() => backend.logBatch([metric("rankscope/stream_dropped", 0)], 5)),
    "",
    "a flush with nothing to show prints nothing",
  );
});

test("stream lines: [localRank] [Process-localRank/localWorldSize] local time INFO key: the value as recorded", async () => {
  const backend = await consoleBackend();
  const at = new Date(2026, 0, 2, 3, 4, 5).getTime();
  const records: StreamRecord[] = [
    {
      key: "loss",
      value: 0.1 + 0.2,
      step: 7,
      timestamp: at,
      rank: 1,
      rankName: "Trainer_AAAA_r1",
      role: "rank",
      thread: 0,
    },
    { key: "reward", value: 3, step: 7, timestamp: at, rank: 1, rankName: "Trainer_AAAA_r1", role: "rank", thread: 0 },
  ];
  assert.equal(
    await captureStdout(() => backend.logStream?.(records)),
    "[1] [Trainer-1/2] 2026-01-02 03:04:05 INFO loss: 0.30000000000000004\n[1] [Trainer-1/2] 2026-01-02 03:04:05 INFO reward: 3\n",
  );
});
