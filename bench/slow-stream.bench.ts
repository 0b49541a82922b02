/**
 * Issue 24 case 4: what a slow `per_rank_no_reduce` backend costs the flush. The soak of
 * `test/stream/slow-backend.test.ts` (two child ranks recording 10–100 values every 5 ms, the
 * controller flushing every 500 ms) runs twice in this process's turn: once with a healthy backend
 * (`logStream` resolves at once) and once with a slow one (20–200 ms per call). Prints each run's
 * flush times (the first flush, which starts the stream's writers, left out), the ratio slow /
 * healthy, the flushes that named a rank missing, and the slow backend's largest backlog.
 *
 * Run: `npm run bench -- slow-stream` (20 s per run; `SLOW_STREAM_SOAK_MS=120000` for the issue's
 * 120 s soak).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { printTable } from "./harness.js";

const JOB = fileURLToPath(new URL("../test/stream/fixtures/slow-stream-job.mjs", import.meta.url));
const SOAK_MS = Number(process.env["SLOW_STREAM_SOAK_MS"] ?? "20000");

interface Soak {
  flushMs: number[];
  withMissing: number;
  maxBacklog: number;
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

function soak(minMs: number, maxMs: number): Soak {
  const runDir = mkdtempSync(join(tmpdir(), "rankscope-bench-slow-stream-"));
  try {
    const env = {
      ...process.env,
      CHILD_RUN_DIR: runDir,
      SOAK_MS: String(SOAK_MS),
      FLUSH_EVERY_MS: "500",
      SLOW_STREAM_MIN_MS: String(minMs),
      SLOW_STREAM_MAX_MS: String(maxMs),
    };
    const result = spawnSync(process.execPath, [JOB], {
      env,
      encoding: "utf8",
      timeout: SOAK_MS + 120_000,
    });
    if (result.status !== 0)
      throw new Error(`the soak failed (${String(result.status ?? result.signal)}): ${result.stderr}`);
    const flushes = result.stdout
      .split("\n")
      .filter((l) => l.startsWith('{"flush"'))
      .map((l) => JSON.parse(l) as { flush: number; ms: number; missing: string[] });
    const backlog = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.includes('"rankscope/stream_backlog/'))
      .map((l) => (JSON.parse(l) as { value: number }).value);
    return {
      flushMs: flushes.slice(1).map((f) => f.ms),
      withMissing: flushes.filter((f) => f.missing.length > 0).length,
      maxBacklog: Math.max(0, ...backlog),
    };
  } finally {
    rmSync(runDir, { recursive: true, force: true });
  }
}

const healthy = soak(0, 0);
const slow = soak(20, 200);
const row = (name: string, s: Soak, base: Soak): (string | number)[] => {
  const sorted = [...s.flushMs].sort((a, b) => a - b);
  const baseSorted = [...base.flushMs].sort((a, b) => a - b);
  return [
    name,
    s.flushMs.length,
    quantile(sorted, 0.5),
    quantile(sorted, 0.95),
    sorted.at(-1) ?? NaN,
    `${(quantile(sorted, 0.5) / quantile(baseSorted, 0.5)).toFixed(2)}×`,
    `${((sorted.at(-1) ?? NaN) / (baseSorted.at(-1) ?? NaN)).toFixed(2)}×`,
    s.withMissing,
    s.maxBacklog,
  ];
};
process.stdout.write(
  `Soak of ${SOAK_MS / 1000} s per run, 2 child ranks, flush every 500 ms (ms per flush, the first left out)\n\n`,
);
printTable(
  [
    "logStream",
    "flushes",
    "p50 ms",
    "p95 ms",
    "max ms",
    "p50 / healthy p50",
    "max / healthy max",
    "flushes naming a rank missing",
    "largest backlog (records)",
  ],
  [row("healthy (at once)", healthy, healthy), row("slow (20–200 ms)", slow, healthy)],
);
