import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { afterEach, test } from "node:test";
import { fileURLToPath } from "node:url";
import { getCollector, recordMetric } from "../../src/core/collector.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { parseNvidiaSmi, SystemMonitor } from "../../src/system/index.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";

const originalPath = process.env["PATH"] ?? "";
const fixture = (name: string): string => fileURLToPath(new URL(`../fixtures/nvidia-smi/${name}`, import.meta.url));

afterEach(() => {
  process.env["PATH"] = originalPath;
  getCollector().clear();
});

function usePath(dir: string): void {
  process.env["PATH"] = `${dir}${delimiter}${originalPath}`;
}

function values(metrics: readonly { key: string; value: number }[]): Record<string, number> {
  return Object.fromEntries(metrics.map((m) => [m.key, m.value]));
}

test("multi-GPU stand-in: one set of keys per GPU under system/{label}/, on the monitor's own axis; the training step is untouched", async () => {
  usePath(fixture("multi"));
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  const monitor = new SystemMonitor({ logger, label: "node0", collectionInterval: 1, flushInterval: 1 });
  recordMetric("loss", 0.5, "mean");
  await monitor.sample();
  // The machine's CPU times move in 10 ms ticks: the samples are apart by more than a few.
  await new Promise((resolve) => setTimeout(resolve, 50));
  await monitor.sample();
  const logged = await monitor.flush();
  const v = values(logged);
  for (const i of [0, 1, 2, 3]) assert.equal(v[`system/node0/gpu/${i}/memory_total_mib`], 81920);
  assert.equal(v["system/node0/gpu/0/utilization_percent"], 87);
  assert.equal(v["system/node0/gpu/3/memory_used_mib"], 81037);
  assert.equal(v["system/node0/gpu/1/memory_used_percent"], (70001 / 81920) * 100);
  assert.ok((v["system/node0/memory/process_rss_mib"] as number) > 0);
  assert.ok((v["system/node0/memory/machine_total_mib"] as number) > 0);
  assert.ok("system/node0/cpu/process_percent" in v && "system/node0/cpu/machine_percent" in v);
  assert.ok(logged.every((m) => m.axis === "system/step" && m.step === 0));
  assert.deepEqual(
    [...monitor.gpus],
    [
      [0, "NVIDIA A100-SXM4-80GB"],
      [1, "NVIDIA A100-SXM4-80GB"],
      [2, "NVIDIA A100-SXM4-80GB"],
      [3, "NVIDIA A100-SXM4-80GB"],
    ],
  );

  await monitor.sample();
  assert.equal((await monitor.flush())[0]?.step, 1, "system/step counts the monitor's own flushes");
  const training = await logger.flush(7);
  assert.deepEqual(values(training.metrics), { loss: 0.5 }, "the monitor neither flushed nor took the training values");
  await monitor.stop();
  await logger.shutdown();
  const lines = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { key: string; step: number });
  assert.deepEqual([...new Set(lines.filter((l) => l.key.startsWith("system/")).map((l) => l.step))], [0, 1]);
  assert.deepEqual(
    lines.filter((l) => !l.key.startsWith("system/")),
    [{ ...lines.find((l) => l.key === "loss"), key: "loss", step: 7 }],
  );
});

test("[N/A] and [Not Supported] fields are left out, not logged as 0", async () => {
  usePath(fixture("na"));
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  const monitor = new SystemMonitor({ logger, label: "n" });
  await monitor.sample();
  const keys = (await monitor.flush()).map((m) => m.key).filter((k) => k.includes("/gpu/"));
  assert.deepEqual(keys.sort(), [
    "system/n/gpu/0/memory_total_mib",
    "system/n/gpu/0/memory_used_mib",
    "system/n/gpu/0/memory_used_percent",
  ]);
  assert.deepEqual(parseNvidiaSmi("0, Name, With, Commas, 5, 10, 20\n\nnot a gpu line\n"), [
    { index: 0, name: "Name, With, Commas", utilizationPercent: 5, memoryUsedMiB: 10, memoryTotalMiB: 20 },
  ]);
  await logger.shutdown();
});

test("nvidia-smi missing: warned once, CPU and memory still logged, no further calls", async () => {
  process.env["PATH"] = tempDir();
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  const monitor = new SystemMonitor({ logger, label: "n" });
  const seen = await collectDiagnostics(async () => {
    await monitor.sample();
    await monitor.sample();
  });
  assert.equal(monitor.gpuAvailable, false);
  assert.deepEqual(
    seen.map((d) => d.code),
    ["system.nvidiaSmiMissing"],
  );
  assert.match(seen[0]?.message ?? "", /not found on PATH; .*CPU and memory only/);
  const keys = (await monitor.flush()).map((m) => m.key);
  assert.ok(keys.includes("system/n/memory/process_rss_mib"));
  assert.ok(!keys.some((k) => k.includes("/gpu/")));
  await logger.shutdown();
});

test("nvidia-smi failing: reported with its message and counted, retried next sample, the job goes on", async () => {
  usePath(fixture("failing"));
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  const monitor = new SystemMonitor({ logger, label: "n" });
  const seen = await collectDiagnostics(async () => {
    await monitor.sample();
    await monitor.sample();
  });
  assert.equal(monitor.gpuFailures, 2);
  assert.equal(monitor.gpuAvailable, true);
  assert.deepEqual(
    seen.map((d) => [d.code, d.level]),
    [
      ["system.nvidiaSmiFailed", "error"],
      ["system.nvidiaSmiFailed", "error"],
    ],
  );
  assert.match(
    seen[0]?.message ?? "",
    /exited with 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/,
  );
  // The job goes on: the CPU and memory figures are still taken. (machine_percent needs a clock
  // tick between two samples, so it can be absent; the memory figures are taken at every sample.)
  assert.ok((await monitor.flush()).some((m) => m.key === "system/n/memory/process_rss_mib"));
  await logger.shutdown();
});

test("on timers it samples and flushes by itself until stopped; bad intervals are rejected", async () => {
  usePath(fixture("multi"));
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  const monitor = new SystemMonitor({ logger, collectionInterval: 0.02, flushInterval: 0.05 }).start();
  await waitFor(() => monitor.step >= 2, {
    timeoutMs: 20_000,
    what: "two flushes of the monitor on its timers",
    intervalMs: 10,
  });
  await monitor.stop();
  assert.ok(monitor.samples >= 1);
  const step = monitor.step;
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(monitor.step, step, "no flush after stop()");
  assert.throws(
    () => new SystemMonitor({ collectionInterval: 0 }),
    /collectionInterval must be a positive number of seconds/,
  );
  assert.throws(() => new SystemMonitor({ label: "a/b" }), /label must be a non-empty name without "\/"/);
  await logger.shutdown();
});

test("the monitor's metrics land in the store as system metrics, apart from the training series", async () => {
  usePath(fixture("multi"));
  const runDir = tempDir();
  // Deadlines for a loaded machine: what this test checks is where the values land, not how late.
  const logger = new MetricLogger({ runDir, backendDeadlineMs: 60_000, shutdownDeadlineMs: 60_000 });
  await logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } });
  const monitor = new SystemMonitor({ logger, label: "node0", collectionInterval: 1, flushInterval: 1 });
  recordMetric("loss", 0.5, "mean");
  await monitor.sample();
  await monitor.flush();
  await monitor.sample();
  await monitor.flush();
  await logger.flush(7);
  await monitor.stop();
  await logger.shutdown();
  const store = await import("../../src/store/reader.js");
  const system = store.systemMetrics(runDir).map((k) => k.key);
  assert.ok(
    system.includes("system/node0/gpu/0/utilization_percent"),
    `system keys: [${system.join(", ")}]; samples ${monitor.samples}, nvidia-smi failures ${monitor.gpuFailures}`,
  );
  const gpu = store.series(runDir, "system/node0/gpu/0/utilization_percent", { kind: "system" });
  assert.deepEqual(
    gpu.points.map((p) => [p.step, p.value]),
    [
      [0, 87],
      [1, 87],
    ],
    "one point per monitor flush, on the monitor's own steps",
  );
  const scalars = store.keys(runDir, "scalar").map((k) => k.key);
  assert.deepEqual(scalars, ["loss"], "the training series holds only training values");
  store.closeStores();
});
