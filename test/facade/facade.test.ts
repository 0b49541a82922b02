import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { afterEach, test } from "node:test";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { registerBackend } from "../../src/backends/backend.js";
import { getCollector } from "../../src/core/collector.js";
import { currentMetricLogger } from "../../src/controller/metric-logger.js";
import { formatValidationSamples, Logger, selectValidationSamples } from "../../src/facade/index.js";
import { captureStdout, collectDiagnostics, runSnippet, tempDir, waitFor } from "../helpers.js";

afterEach(() => getCollector().clear());

interface Line {
  key: string;
  value?: number;
  step: number;
  histogram?: { count: number };
}

function readJsonl(dir: string): Line[] {
  return readFileSync(join(dir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Line);
}

test("logMetrics writes to console and jsonl: flattened with /, prefixed, non-numbers skipped and counted", async () => {
  const dir = tempDir();
  const logger = await Logger.create({ logDir: dir, console: true, jsonl: true });
  let seen: { code: string }[] = [];
  const out = await captureStdout(async () => {
    seen = await collectDiagnostics(() =>
      logger.logMetrics(
        { loss: 0.5, grad: { norm: 2, layers: { first: 3 } }, note: "text", list: [1, 2], flag: true },
        3,
        { prefix: "train" },
      ),
    );
  });
  assert.equal(logger.skippedValues, 3);
  assert.deepEqual(
    seen.map((d) => d.code),
    ["facade.nonNumeric", "facade.nonNumeric", "facade.nonNumeric"],
  );
  assert.equal(
    out,
    [
      "=== [GlobalReduce] - METRICS STEP 3 ===",
      "train/grad/layers/first: 3.0",
      "train/grad/norm:         2.0",
      "train/loss:              0.5",
      "===============",
      "",
    ].join("\n"),
  );
  await captureStdout(() =>
    logger.logMetrics({ accuracy: 0.75, total_step: 40 }, 3, { prefix: "validation", stepMetric: "total_step" }),
  );
  await logger.finish();
  const lines = readJsonl(dir).map((l) => [l.key, l.value, l.step]);
  assert.deepEqual(lines, [
    ["train/grad/layers/first", 3, 3],
    ["train/grad/norm", 2, 3],
    ["train/loss", 0.5, 3],
    ["validation/accuracy", 0.75, 40],
    ["validation/total_step", 40, 40],
  ]);
  const config = parse(readFileSync(join(dir, "config.yaml"), "utf8")) as Record<string, unknown>;
  assert.deepEqual(
    config,
    { logDir: dir, console: true, jsonl: true },
    "the logger's config is the run config by default",
  );
});

test("logHyperparams (nested as given) and logHistogram reach the backends; secrets stay out of config.yaml", async () => {
  const calls: {
    hyper?: Readonly<Record<string, unknown>>;
    histograms: { key: string; step: number; count: number }[];
  } = { histograms: [] };
  registerBackend("capture", () => ({
    logBatch: () => undefined,
    logHyperparams: (p) => {
      calls.hyper = p;
    },
    logHistograms: (hs, step) => {
      for (const h of hs) calls.histograms.push({ key: h.key, step, count: h.histogram.count });
    },
  }));
  const dir = tempDir();
  const logger = await Logger.create({
    logDir: dir,
    console: false,
    backends: { capture: { loggingMode: "global_reduce" } },
    runConfig: { policy: { model: "tiny" }, logger: { wandb: { project: "p", apiKey: "sk-secret" } } },
    tags: ["grpo", "tiny"],
    group: "ablation (v2)",
  });
  await logger.logHyperparams({ policy: { lr: 1e-5, model: { name: "tiny" } }, seed: 1 });
  await logger.logHistogram([1, 2, 2, 3, 10], 5, "rewards");
  await logger.finish();
  assert.deepEqual(calls.hyper, { policy: { lr: 1e-5, model: { name: "tiny" } }, seed: 1 });
  assert.deepEqual(calls.histograms, [{ key: "rewards", step: 5, count: 5 }]);
  const text = readFileSync(join(dir, "config.yaml"), "utf8");
  assert.ok(!text.includes("sk-secret"));
  assert.match(text, /apiKey: "\*\*\*REDACTED\*\*\*"/);
  assert.deepEqual(JSON.parse(readFileSync(join(dir, "run.json"), "utf8")), {
    tags: ["grpo", "tiny"],
    group: "ablation (v2)",
  });
});

test("monitorGpus runs the monitor on its own axis next to training steps", async () => {
  const original = process.env["PATH"] ?? "";
  process.env["PATH"] =
    `${fileURLToPath(new URL("../fixtures/nvidia-smi/multi", import.meta.url))}${delimiter}${original}`;
  try {
    const dir = tempDir();
    const logger = await Logger.create({
      logDir: dir,
      console: false,
      jsonl: true,
      monitorGpus: true,
      gpuMonitoring: { collectionInterval: 0.02, flushInterval: 0.05 },
    });
    await logger.logMetrics({ loss: 1 }, 0);
    await waitFor(() => (logger.systemMonitor?.step ?? 0) >= 1, {
      timeoutMs: 20_000,
      what: "the GPU monitor's first flush",
      intervalMs: 10,
    });
    await logger.logMetrics({ loss: 2 }, 1);
    await logger.finish();
    const lines = readJsonl(dir);
    assert.deepEqual(
      lines.filter((l) => l.key === "loss").map((l) => [l.value, l.step]),
      [
        [1, 0],
        [2, 1],
      ],
    );
    const gpu = lines.filter((l) => l.key.endsWith("/gpu/0/utilization_percent"));
    assert.ok(gpu.length >= 1 && gpu.every((l) => l.value === 87));
    assert.ok(
      lines.filter((l) => l.key.startsWith("system/")).every((l) => l.step <= (logger.systemMonitor?.step ?? 0)),
    );
  } finally {
    process.env["PATH"] = original;
  }
});

test("bad config is a clear error: unknown backend, bad switch, bad numValSamplesToPrint", async () => {
  await assert.rejects(
    Logger.create({ console: false, backends: { nope: { loggingMode: "global_reduce" } } }),
    /unknown backend "nope"; registered: .*console.*jsonl/,
  );
  assert.equal(currentMetricLogger(), undefined, "the failed facade leaves no logger behind");
  assert.throws(() => new Logger({ jsonl: "yes" as never }), /option "jsonl" must be true, false or an object/);
  assert.throws(() => new Logger({ numValSamplesToPrint: -1 }), /numValSamplesToPrint must be a non-negative integer/);
});

const SAMPLES = [
  { prompt: "p1", response: "r1", reward: 0.1 },
  { prompt: "p2", response: "line one\nline two", reward: 0.9 },
  { prompt: "p3", response: "r3", reward: 0.5 },
  { prompt: "p4", response: "r4", reward: 0.3 },
  { prompt: "p5", response: "r5", reward: 1 },
];

test("validation samples: top and bottom halves by reward, plus the median for odd n (golden)", () => {
  assert.deepEqual(
    selectValidationSamples(SAMPLES, 2).map((s) => s.reward),
    [1, 0.1],
  );
  assert.deepEqual(
    selectValidationSamples(SAMPLES, 3).map((s) => s.reward),
    [1, 0.5, 0.1],
  );
  assert.deepEqual(
    selectValidationSamples(SAMPLES, 4).map((s) => s.reward),
    [1, 0.9, 0.3, 0.1],
  );
  assert.deepEqual(
    selectValidationSamples(SAMPLES, 9).map((s) => s.reward),
    [1, 0.9, 0.5, 0.3, 0.1],
  );
  assert.equal(
    formatValidationSamples(SAMPLES, 3, { width: 40 }),
    [
      "Validation samples: top 1, median, bottom 1 of 5 by reward",
      "┌─ Sample 1 | Reward: 1.0000 ───────────",
      "│ prompt: p5",
      "│ response: r5",
      "└───────────────────────────────────────",
      "┌─ Sample 2 | Reward: 0.5000 ───────────",
      "│ prompt: p3",
      "│ response: r3",
      "└───────────────────────────────────────",
      "┌─ Sample 3 | Reward: 0.1000 ───────────",
      "│ prompt: p1",
      "│ response: r1",
      "└───────────────────────────────────────",
      "",
    ].join("\n"),
  );
  assert.match(formatValidationSamples(SAMPLES, 2, { width: 40 }), /Sample 1 \| Reward: 1\.0000/);
  assert.match(
    formatValidationSamples([SAMPLES[1] as (typeof SAMPLES)[number]], 1),
    /│ response:\n│ {3}line one\n│ {3}line two\n/,
  );
  assert.throws(() => selectValidationSamples([{ prompt: "x" }], 1), /sample 0 has no numeric "reward" field/);
});

test("Logger.printValidationSamples prints numValSamplesToPrint samples by default", async () => {
  const logger = await Logger.create({ logDir: tempDir(), console: false, numValSamplesToPrint: 2 });
  const out = await captureStdout(() => logger.printValidationSamples(SAMPLES));
  assert.match(out, /^Validation samples: top 1, bottom 1 of 5 by reward\n┌─ Sample 1 \| Reward: 1\.0000 /);
  assert.match(out, /Sample 2 \| Reward: 0\.1000/);
  await logger.finish();
});

test("new Logger() after initBackends(): the facade logs to the backends already started, says which of its options are ignored, and nothing is rejected", async () => {
  const dir = tempDir();
  // As a user's script runs it: top-level awaits, no catch anywhere, in a child process.
  const code = `
    import { readFileSync } from "node:fs";
    import { getOrCreateMetricLogger, Logger, recordMetric, getLogger } from "${fileURLToPath(new URL("../../src/index.ts", import.meta.url))}";
    const metrics = await getOrCreateMetricLogger({ runDir: ${JSON.stringify(dir)}, quiet: true });
    await metrics.initBackends({ jsonl: { loggingMode: "global_reduce" } });
    const facade = new Logger({ console: true, tensorboard: true, tags: ["a"] });
    recordMetric("lr", 0.5);
    await facade.logMetrics({ loss: 2 }, 1, { prefix: "train" });
    await facade.logHistogram([1, 2, 3], 1, "rewards");
    await facade.finish();
    await metrics.flush(2);
    recordMetric("lr", 0.25);
    await metrics.flush(3);
    await metrics.shutdown();
    process.stdout.write(readFileSync(${JSON.stringify(join(dir, "metrics.jsonl"))}, "utf8"));
  `;
  const { code: exit, stdout, stderr } = await runSnippet(code, { NO_COLOR: "1" });
  assert.equal(exit, 0, stderr);
  assert.doesNotMatch(stderr, /initBackends\(\) was already called|Unhandled|unhandled/);
  assert.match(
    stderr,
    /Logger: this process's metric logger already has its backends \(initBackends\(\) was called before\); the Logger logs to them, and its options console, tensorboard, tags are ignored\. To choose the backends here instead, create the Logger before initBackends\(\)/,
  );
  const lines = stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Line);
  assert.deepEqual(
    lines.filter((l) => l.value !== undefined && !l.key.startsWith("rewards/")).map((l) => [l.key, l.value, l.step]),
    [
      ["lr", 0.5, 1],
      ["train/loss", 2, 1],
      ["lr", 0.25, 3],
    ],
    "the facade's values and the job's own, in the one jsonl backend initBackends started; finish() left it running",
  );
  assert.deepEqual(
    lines.filter((l) => l.histogram !== undefined).map((l) => [l.key, l.step, l.histogram?.count]),
    [["rewards", 1, 3]],
  );
  assert.equal(existsSync(join(dir, "tensorboard")), false, "the facade's own backends were not started");
});

test("initBackends() after a Logger facade started the backends: the error says the facade may have, and what to do", async () => {
  const dir = tempDir();
  const facade = await Logger.create({ logDir: dir, console: false, jsonl: true });
  const logger = currentMetricLogger();
  assert.ok(logger !== undefined);
  await assert.rejects(
    logger.initBackends({ console: { loggingMode: "global_reduce" } }),
    /initBackends\(\) was already called on this logger; to use other backends, call shutdown\(\) first .*\(A Logger facade created before calls it too; one created after initBackends\(\) logs to the backends already started\.\)/,
  );
  await facade.finish();
});
