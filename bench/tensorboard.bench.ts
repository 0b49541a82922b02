/**
 * tfevents throughput: scalars encoded and framed per second (protobufjs + crc-32's CRC-32C), and
 * end to end through the tensorboard backend into a real file (logBatch + flushed per step).
 * Run: `npm run bench -- tensorboard` (or `npx tsx bench/tensorboard.bench.ts`).
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BackendContext } from "../src/backends/backend.js";
import { resolveBackendRegistration } from "../src/backends/backend.js";
import "../src/backends/builtin.js";
import { scalarEvents, type ScalarPoint } from "../src/backends/tensorboard/events.js";
import { frameRecords } from "../src/backends/tensorboard/record.js";
import type { Metric } from "../src/core/metric.js";

const MIN_MS = 1500;

function flushBatch(keys: number, step: number, timestamp: number): Metric[] {
  const out: Metric[] = [];
  for (let k = 0; k < keys; k++)
    out.push({ key: `train/metric_${k}`, value: Math.sin(step + k), reduce: "mean", step, timestamp });
  return out;
}

/**
 * Run `body` (which handles `perCall` scalars) repeatedly for at least MIN_MS. Scalars per second
 * of wall time, and per second of this process's CPU time (all its threads, so file writes on
 * libuv's pool count): on a shared, busy machine the second is the steadier figure.
 */
async function measure(
  perCall: number,
  body: (i: number) => unknown,
): Promise<{ rate: number; cpuRate: number; calls: number }> {
  for (let i = 0; i < 50; i++) await body(i);
  let calls = 0;
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < MIN_MS) {
    for (let j = 0; j < 20; j++) await body(calls++);
    elapsed = performance.now() - start;
  }
  const cpu = process.cpuUsage(cpuStart);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  return { rate: (calls * perCall) / (elapsed / 1000), cpuRate: (calls * perCall) / cpuSeconds, calls };
}

const rows: string[][] = [];
const fmt = (n: number): string => `${(n / 1e6).toFixed(2)} M/s`;
const both = (m: { rate: number; cpuRate: number }): string[] => [fmt(m.rate), fmt(m.cpuRate)];

for (const keys of [100, 1000]) {
  const batches = Array.from({ length: 64 }, (_, s) => flushBatch(keys, s, 1_700_000_000_000 + s * 1000));
  const m = await measure(keys, (i) => frameRecords(scalarEvents(batches[i % 64] as Metric[])));
  rows.push([`encode + frame, ${keys} scalars per flush (one event)`, ...both(m)]);
}

{
  // Stream records each carry their own timestamp: one event (and one record) per value.
  const records: ScalarPoint[] = Array.from({ length: 1000 }, (_, i) => ({
    key: `probe/${i % 8}`,
    value: i * 0.5,
    step: 7,
    timestamp: 1_700_000_000_000 + i,
  }));
  const m = await measure(records.length, () => frameRecords(scalarEvents(records)));
  rows.push(["encode + frame, stream values (one event per value)", ...both(m)]);
}

for (const keys of [100, 1000]) {
  const dir = mkdtempSync(join(tmpdir(), "rankscope-bench-tb-"));
  const registration = await resolveBackendRegistration("tensorboard");
  if (registration === undefined) throw new Error("tensorboard backend is not registered");
  const backend = registration.factory({ loggingMode: "global_reduce" });
  const context: BackendContext = {
    backendName: "tensorboard",
    displayName: "GlobalReduce",
    loggingMode: "global_reduce",
    role: "controller",
    identity: { rank: 0, rankName: "Controller", processName: "Controller", localRank: 0, localWorldSize: 1 },
    runDir: dir,
    experiment: "bench",
    trial: "t",
    resumeStep: 0,
    primaryMetadata: {},
  };
  await backend.init?.(context);
  const batches = Array.from({ length: 64 }, (_, s) => flushBatch(keys, s, 1_700_000_000_000 + s * 1000));
  const m = await measure(keys, async (i) => {
    await backend.logBatch(batches[i % 64] as Metric[], i);
    await backend.flushed?.();
  });
  await backend.finish?.();
  const tbDir = join(dir, "tensorboard");
  const size = readdirSync(tbDir).reduce((n, f) => n + statSync(join(tbDir, f)).size, 0);
  rows.push([
    `end to end to a file, ${keys} scalars per flush (logBatch + flushed; ${(size / 1e6).toFixed(0)} MB in ${m.calls + 50} flushes)`,
    ...both(m),
  ]);
  rmSync(dir, { recursive: true, force: true });
}

process.stdout.write(
  `| tfevents scalars | per wall second | per CPU second |\n| --- | --- | --- |\n${rows.map((r) => `| ${r.join(" | ")} |`).join("\n")}\n`,
);
