import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  getOrCreateMetricLogger,
  recordMetric,
  Reduce,
  registerBackend,
  type Backend,
  type FlushResult,
  type Metric,
  type StreamRecord,
} from "../../src/index.js";
import { getCollector } from "../../src/core/collector.js";
import { captureStdout, collectDiagnostics, tempDir } from "../helpers.js";

const collector = getCollector();

test("config errors name the backend and list what is valid", async () => {
  const logger = await getOrCreateMetricLogger();
  // @ts-expect-error -- a missing loggingMode is a compile error too; this checks the runtime error
  await assert.rejects(logger.initBackends({ console: {} }), {
    name: "TypeError",
    message: 'backend "console": loggingMode is required; valid: global_reduce, per_rank_reduce, per_rank_no_reduce',
  });
  // @ts-expect-error -- an invalid loggingMode is a compile error too; this checks the runtime error
  await assert.rejects(logger.initBackends({ console: { loggingMode: "global" } }), {
    message:
      'backend "console": loggingMode "global" is not valid; valid: global_reduce, per_rank_reduce, per_rank_no_reduce',
  });
  // @ts-expect-error -- an unknown backend is a compile error too; this checks the runtime error
  const unknownBackend = logger.initBackends({ mlflow: { loggingMode: "global_reduce" } });
  await assert.rejects(unknownBackend, /unknown backend "mlflow"; registered: .*console.*jsonl/);
  await assert.rejects(logger.initBackends({ console: "yes" } as never), /backend "console": config must be an object/);
  await assert.rejects(
    logger.initBackends({ console: { loggingMode: "global_reduce", every: 0 } }),
    /every must be a positive integer/,
  );
  await logger.shutdown();
});

test("an unknown option of a built-in backend is a TypeError; perRankShareRun under global_reduce is a warning", async () => {
  const logger = await getOrCreateMetricLogger();
  await assert.rejects(logger.initBackends({ console: { loggingMode: "global_reduce", colour: true } }), {
    name: "TypeError",
    message:
      'backend "console": unknown option "colour"; valid: loggingMode, perRankShareRun, every, type, deadlineMs, layout, pairsPerRow',
  });
  const seen = await collectDiagnostics(() =>
    logger.initBackends({ console: { loggingMode: "global_reduce", perRankShareRun: true } }),
  );
  assert.deepEqual(
    seen.map((d) => d.message),
    [
      'backend "console": perRankShareRun only applies to per-rank modes; under global_reduce there is one run already, so it is ignored',
    ],
  );
  await logger.shutdown();
});

test("a failing backend is reported by name once, counted, and the others still get every value", async () => {
  collector.clear();
  const received: Metric[][] = [];
  registerBackend("broken", () => ({
    logBatch() {
      throw new Error("disk on fire");
    },
  }));
  registerBackend("capture", () => ({ logBatch: (metrics: readonly Metric[]) => void received.push([...metrics]) }));
  const logger = await getOrCreateMetricLogger();
  await logger.initBackends({ broken: { loggingMode: "global_reduce" }, capture: { loggingMode: "global_reduce" } });
  let last: FlushResult | undefined;
  const seen = await collectDiagnostics(async () => {
    for (let step = 0; step < 3; step++) {
      recordMetric("loss", step);
      last = await logger.flush(step);
    }
  });
  // Every value, and from the step after the first failure, how many calls "broken" missed per flush.
  assert.deepEqual(
    received.map((batch) => batch.map((m) => [m.key, m.value, m.step])),
    [
      [["loss", 0, 0]],
      [
        ["loss", 1, 1],
        ["rankscope/backend_undelivered/broken", 1, 1],
      ],
      [
        ["loss", 2, 2],
        ["rankscope/backend_undelivered/broken", 1, 2],
      ],
    ],
  );
  assert.deepEqual(last?.undelivered, { broken: { late: 0, skipped: 0, failed: 3, undelivered: 3 } });
  const errors = seen.filter((d) => d.code.startsWith("backend.logBatch:broken"));
  assert.equal(errors.length, 3);
  assert.equal(errors[2]?.count, 3);
  assert.match(
    errors[0]?.message ?? "",
    /backend "broken" failed in logBatch: disk on fire; the other backends still get their data/,
  );
  await logger.shutdown();
});

test("a backend whose init fails is left out; the others start", async () => {
  collector.clear();
  const got: number[] = [];
  registerBackend("failsInit", () => ({
    init() {
      throw new Error("no credentials");
    },
    logBatch() {},
  }));
  registerBackend("capture2", () => ({
    logBatch: (metrics: readonly Metric[]) => void got.push(...metrics.map((m) => m.value)),
  }));
  const logger = await getOrCreateMetricLogger();
  const seen = await collectDiagnostics(() =>
    logger.initBackends({ failsInit: { loggingMode: "global_reduce" }, capture2: { loggingMode: "global_reduce" } }),
  );
  assert.match(seen[0]?.message ?? "", /backend "failsInit" failed in init: no credentials/);
  recordMetric("x", 7);
  await logger.flush(0);
  assert.deepEqual(got, [7]);
  await logger.shutdown();
});

test("values recorded before initBackends are logged at the first flush after it", async () => {
  collector.clear();
  recordMetric("early", 5, Reduce.SUM);
  const got: Metric[] = [];
  registerBackend("capture3", () => ({ logBatch: (metrics: readonly Metric[]) => void got.push(...metrics) }));
  const logger = await getOrCreateMetricLogger();
  await logger.initBackends({ capture3: { loggingMode: "global_reduce" } });
  recordMetric("early", 6, Reduce.SUM);
  await logger.flush(0);
  assert.deepEqual(
    got.map((m) => [m.key, m.value]),
    [["early", 11]],
  );
  await logger.shutdown();
});

test("streamed values carry step N + 1 after flush(N), and their own timestamp", async () => {
  collector.clear();
  const stream: StreamRecord[] = [];
  const batches: string[] = [];
  registerBackend("streamCapture", () => ({
    logBatch: (metrics: readonly Metric[]) =>
      void batches.push(metrics.map((m) => `${m.key}@${m.step}=${m.value}`).join(",")),
    logStream: (records: readonly StreamRecord[]) => void stream.push(...records),
  }));
  const logger = await getOrCreateMetricLogger({ processName: "Trainer" });
  await logger.initBackends({ streamCapture: { loggingMode: "per_rank_no_reduce" } });
  const before = Date.now();
  recordMetric("v", 1, Reduce.SUM);
  await logger.flush(4);
  recordMetric("v", 2, Reduce.SUM);
  recordMetric("v", 3, Reduce.SUM);
  await logger.flush(5);
  // Stream records reach backends from the writer thread, asynchronously; shutdown drains them.
  await logger.shutdown();
  assert.deepEqual(
    stream.map((r) => [r.key, r.value, r.step, r.rankName]),
    [
      ["v", 1, 0, "Trainer"],
      ["v", 2, 5, "Trainer"],
      ["v", 3, 5, "Trainer"],
    ],
  );
  for (const r of stream) assert.ok(r.timestamp >= before && r.timestamp <= Date.now());
  assert.deepEqual(batches, [], "a per_rank_no_reduce backend gets no reduced batches");
});

test("per_rank_reduce logs this process's values under its rank name", async () => {
  collector.clear();
  const logger = await getOrCreateMetricLogger({ processName: "Trainer" });
  await logger.initBackends({ console: { loggingMode: "per_rank_reduce" } });
  recordMetric("my_sum_rank_metric", 1, Reduce.SUM);
  recordMetric("my_sum_rank_metric", 1, Reduce.SUM);
  const out = await captureStdout(() => logger.flush(0));
  assert.equal(out, "=== [Trainer] - METRICS STEP 0 ===\nmy_sum_rank_metric: 2.0\n===============\n");
  await logger.shutdown();
});

test("flush checks its step; shutdown reports values that were never flushed", async () => {
  collector.clear();
  const logger = await getOrCreateMetricLogger();
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce", file: join(tempDir(), "m.jsonl") } });
  await assert.rejects(logger.flush(-1), /flush\(step\) takes a non-negative integer step, got -1/);
  await assert.rejects(logger.flush(1.5), /got 1.5/);
  recordMetric("late", 1);
  const seen = await collectDiagnostics(() => logger.shutdown());
  assert.match(
    seen.map((d) => d.message).join("\n"),
    /1 key\(s\) recorded since the last flush were not logged; call flush\(step\) before shutdown\(\)/,
  );
  await assert.rejects(logger.flush(2), /flush\(\) after shutdown\(\)/);
});

test("a backend's slow write does not block recording: states are taken before logging", async () => {
  collector.clear();
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const seen: number[] = [];
  registerBackend("slow", () => ({
    async logBatch(metrics: readonly Metric[]) {
      await gate;
      seen.push(...metrics.map((m) => m.value));
    },
  }));
  const logger = await getOrCreateMetricLogger();
  await logger.initBackends({ slow: { loggingMode: "global_reduce" } });
  recordMetric("n", 1, Reduce.SUM);
  const flushing = logger.flush(0);
  recordMetric("n", 100, Reduce.SUM); // recorded while step 0 is being logged: belongs to step 1
  release();
  await flushing;
  await logger.flush(1);
  assert.deepEqual(seen, [1, 100]);
  await logger.shutdown();
});

test("a backend sees each flush's metrics sorted by key, with the backend interface's calls", async () => {
  collector.clear();
  const calls: string[] = [];
  const backend: Backend = {
    init: (ctx) => void calls.push(`init ${ctx.displayName} ${ctx.loggingMode}`),
    logBatch: (metrics, step) => void calls.push(`batch ${step} ${metrics.map((m) => m.key).join(",")}`),
    logHistograms: (hs, step) =>
      void calls.push(`hist ${step} ${hs.map((h) => `${h.key}:${h.histogram.count}`).join(",")}`),
    logSamples: (s, step) => void calls.push(`samples ${step} ${Object.keys(s).join(",")}`),
    flushed: () => void calls.push("flushed"),
    finish: () => void calls.push("finish"),
  };
  registerBackend("spy", () => backend);
  const logger = await getOrCreateMetricLogger();
  await logger.initBackends({ spy: { loggingMode: "global_reduce" } });
  recordMetric("z", 1);
  recordMetric("a/h", 2, Reduce.HISTOGRAM);
  recordMetric("m", { reward: 1 }, Reduce.SAMPLE);
  await logger.flush(2);
  await logger.shutdown();
  assert.deepEqual(calls, [
    "init GlobalReduce global_reduce",
    "batch 2 a/h/count,a/h/max,a/h/mean,a/h/min,z",
    "hist 2 a/h:1",
    "samples 2 m",
    "flushed",
    "finish",
  ]);
});
