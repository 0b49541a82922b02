/**
 * Tracing cost on the caller's thread: per `traceScope` span and per `Tracer.step`, against the
 * target of ≤ 1 µs each; plus the writer's cost per event (paid off the caller's path, at save).
 * Peer: an OpenTelemetry API span with no SDK registered (a no-op — the floor of any OTel span;
 * a recording SDK span needs @opentelemetry/sdk-trace-base, which is not a dependency).
 */
import { trace as otelTrace } from "@opentelemetry/api";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { getCollector } from "../src/core/collector.js";
import { configurePerfTracer, PerfTracer, savePerfTracer, traceScope } from "../src/trace/perf-tracer.js";
import { Tracer } from "../src/trace/tracer.js";

const runDir = mkdtempSync(join(tmpdir(), "rankscope-bench-trace-"));
const ROUNDS = 15;

/**
 * Per operation: the process's CPU time (median of rounds) — what the work costs, whatever else
 * the machine is running — and wall time (best of rounds).
 */
interface Figure {
  cpu: number;
  wall: number;
}

function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/** ns per operation of `body(n)` over rounds; `between` runs untimed after each round. */
async function measure(
  n: number,
  body: (n: number) => void | Promise<void>,
  between?: () => Promise<void> | void,
): Promise<Figure> {
  await body(Math.min(n, 10_000)); // warm up
  if (between) await between();
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = cpuMicros();
    const t0 = performance.now();
    await body(n);
    wall.push(((performance.now() - t0) * 1e6) / n);
    cpu.push(((cpuMicros() - c0) * 1e3) / n);
    if (between) await between();
  }
  wall.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  return { cpu: cpu[Math.floor(cpu.length / 2)]!, wall: wall[0]! };
}

const half = (f: Figure): Figure => ({ cpu: f.cpu / 2, wall: f.wall / 2 });

const rows: [string, Figure, string][] = [];
let sink = 0;
const work = (): number => sink++;

const perf = new PerfTracer({
  runDir,
  rank: 0,
  role: "Bench",
  enabled: true,
  ranks: "all",
  saveIntervalMs: 600_000,
  maxBufferedEvents: 1_000_000,
});
const save = (): Promise<void> => perf.save();
const N = 100_000;

let clock = 0;
rows.push([
  "reference: two performance.now() reads (a span's clock cost)",
  await measure(N, (n) => {
    for (let i = 0; i < n; i++) clock += performance.now() + performance.now();
  }),
  "—",
]);
rows.push([
  "baseline: call the function directly",
  await measure(N, (n) => {
    for (let i = 0; i < n; i++) work();
  }),
  "—",
]);
configurePerfTracer({
  runDir,
  rank: 2,
  role: "Bench",
  enabled: true,
  ranks: "all",
  saveIntervalMs: 600_000,
  maxBufferedEvents: 1_000_000,
});
rows.push([
  "traceScope(name, fn), sync span (the exported function)",
  await measure(
    N,
    (n) => {
      for (let i = 0; i < n; i++) traceScope("step", work);
    },
    savePerfTracer,
  ),
  "≤ 1000",
]);
rows.push([
  "PerfTracer.scope, sync span",
  await measure(
    N,
    (n) => {
      for (let i = 0; i < n; i++) perf.scope("step", undefined, work);
    },
    save,
  ),
  "≤ 1000",
]);
const opts = { category: "compute" as const, args: { step: 1 } };
rows.push([
  "traceScope, sync span with category and args",
  await measure(
    N,
    (n) => {
      for (let i = 0; i < n; i++) perf.scope("step", opts, work);
    },
    save,
  ),
  "≤ 1000",
]);
rows.push([
  "traceScope, nested sync span (depth 2)",
  await measure(
    N,
    (n) => {
      for (let i = 0; i < n; i++) perf.scope("outer", undefined, () => perf.scope("inner", undefined, work));
    },
    save,
  ).then(half),
  "≤ 1000",
]);
const asyncWork = async (): Promise<number> => sink++;
const asyncBase = await measure(N, async (n) => {
  for (let i = 0; i < n; i++) await asyncWork();
});
rows.push(["baseline: await an async function", asyncBase, "—"]);
rows.push([
  "traceScope, async span (awaited)",
  await measure(
    N,
    async (n) => {
      for (let i = 0; i < n; i++) await perf.scope("step", undefined, asyncWork);
    },
    save,
  ),
  "≤ 1000 over baseline",
]);
const off = new PerfTracer({ runDir, rank: 1, role: "Bench", enabled: true, ranks: "0", saveIntervalMs: 600_000 });
rows.push([
  "traceScope, rank not selected (RANKSCOPE_TRACE_RANKS)",
  await measure(N, (n) => {
    for (let i = 0; i < n; i++) off.scope("step", undefined, work);
  }),
  "—",
]);

// Writer: serialise and append what the caller buffered, per event (off the caller's path).
const writerWall: number[] = [];
const writerCpu: number[] = [];
for (let r = 0; r < 5; r++) {
  for (let i = 0; i < N; i++) perf.scope("step", opts, work);
  const c0 = cpuMicros();
  const w0 = performance.now();
  await perf.save();
  writerWall.push(((performance.now() - w0) * 1e6) / N);
  writerCpu.push(((cpuMicros() - c0) * 1e3) / N);
}
writerWall.sort((x, y) => x - y);
writerCpu.sort((x, y) => x - y);
rows.push([
  "writer: serialise + append + wait for the disk, per event (at save, not on the caller)",
  { cpu: writerCpu[2]!, wall: writerWall[0]! },
  "—",
]);

const collector = getCollector();
const stepTracer = new Tracer("bench");
rows.push([
  "Tracer.step (trackMemory off)",
  await measure(
    N,
    (n) => {
      stepTracer.start();
      for (let i = 0; i < n; i++) stepTracer.step("fwd");
      stepTracer.stop();
    },
    () => void collector.takeStates(),
  ),
  "≤ 1000",
]);
rows.push([
  "Tracer.start + step + stop",
  await measure(
    N,
    (n) => {
      for (let i = 0; i < n; i++) {
        stepTracer.start();
        stepTracer.step("fwd");
        stepTracer.stop();
      }
    },
    () => void collector.takeStates(),
  ),
  "—",
]);
const memTracer = new Tracer("bench_mem", { trackMemory: true });
rows.push([
  "Tracer.step (trackMemory on: V8 heap + RSS sample)",
  await measure(
    N,
    (n) => {
      memTracer.start();
      for (let i = 0; i < n; i++) memTracer.step("fwd");
      memTracer.stop();
    },
    () => void collector.takeStates(),
  ),
  "—",
]);
rows.push([
  "Tracer.start + stop (trackMemory on: heap + RSS at both ends)",
  await measure(
    5_000,
    (n) => {
      for (let i = 0; i < n; i++) {
        memTracer.start();
        memTracer.stop();
      }
    },
    () => void collector.takeStates(),
  ),
  "—",
]);

const otel = otelTrace.getTracer("bench");
rows.push([
  "peer: OpenTelemetry API span, no SDK (no-op floor)",
  await measure(N, (n) => {
    for (let i = 0; i < n; i++)
      otel.startActiveSpan("step", (span) => {
        work();
        span.end();
      });
  }),
  "—",
]);

await perf.close();
await off.close();
rmSync(runDir, { recursive: true, force: true });

const load = loadavg()
  .map((l) => l.toFixed(1))
  .join(", ");
process.stdout.write(`Node ${process.version}, ${ROUNDS} rounds of ${N} operations; load average ${load}.\n`);
process.stdout.write(
  "CPU: the process's CPU time per operation, median of rounds. Wall: elapsed time per operation, best round.\n\n",
);
process.stdout.write("| operation | CPU ns/op | wall ns/op | target ns |\n|---|---:|---:|---:|\n");
for (const [name, f, target] of rows)
  process.stdout.write(`| ${name} | ${f.cpu.toFixed(0)} | ${f.wall.toFixed(0)} | ${target} |\n`);
if (sink < 0 || clock < 0) process.stdout.write("unreachable\n");
