/**
 * The stream path against pino, in the same process and run:
 *   1. producer cost per streamed value (ns) — streamValues probe, a streamed recordMetric — vs
 *      `pino.info({ k, v, step })` to a file;
 *   2. end-to-end throughput to a JSONL file on disk (events/s) vs pino lines/s;
 *   3. bytes allocated per call in steady state;
 *   4. overhead on a realistic loop: ~50 µs of work per token, 10 streamed values per token.
 * Run with `npm run bench -- stream` (uses --expose-gc).
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import pino from "pino";
import { recordMetric, Reduce } from "../src/index.js";
import { getCollector } from "../src/core/collector.js";
import {
  flushStream,
  metricStreamProducer,
  startStream,
  stopStream,
  streamStats,
  streamValues,
} from "../src/stream/stream.js";

const dir = mkdtempSync(join(tmpdir(), "rankscope-bench-stream-"));
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const now = (): number => performance.now();
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const fmt = (x: number, digits = 1): string =>
  x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** CPU time of the whole process (every thread, the writer's included), ms. */
function processCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

const rows: string[][] = [];
function row(...cells: string[]): void {
  rows.push(cells);
}

// ---------------------------------------------------------------------------------------------
// Setup: one stream with a ring large enough that the measured calls are never dropped.
const CAPACITY = 1 << 18;
startStream({ file: join(dir, "stream.jsonl"), capacity: CAPACITY, batchSize: 4096, flushMs: 50 });
const collector = getCollector();
collector.stream = metricStreamProducer();
const probe = new Float32Array(151_936).map((_, i) => Math.sin(i));
const metricHandle = (i: number): void => recordMetric("bench/loss", i * 0.001, Reduce.MEAN);

/**
 * ns per call of `fn`: many short rounds, flushing the ring every few rounds (not timed). The
 * minimum is the cost without interference (the machine is shared); the median is reported too.
 */
async function nsPerCall(
  fn: (i: number) => void,
  calls: number,
  rounds: number,
  between: () => Promise<void>,
): Promise<{ min: number; median: number }> {
  const samples: number[] = [];
  for (let r = 0; r < rounds; r++) {
    if (r % 10 === 0) await between();
    const t0 = now();
    for (let i = 0; i < calls; i++) fn(i);
    samples.push(((now() - t0) * 1e6) / calls);
  }
  return { min: Math.min(...samples), median: median(samples) };
}

const flushRing = async (): Promise<void> => {
  await flushStream();
};

// Warm up the JIT on every path first.
for (let i = 0; i < 50_000; i++) {
  streamValues("logits", probe, i);
  metricHandle(i);
}
await flushRing();

const CALLS = 5_000;
const ROUNDS = 300;
const probeNs = await nsPerCall((i) => streamValues("logits", probe, i), CALLS, ROUNDS, flushRing);
const metricNs = await nsPerCall(metricHandle, CALLS, ROUNDS, flushRing);
collector.stream = null;
const plainMetricNs = await nsPerCall(metricHandle, CALLS, ROUNDS, async () => {});
collector.stream = metricStreamProducer();
const droppedBefore = streamStats().dropped;

// pino to a file, asynchronous destination (its fastest file mode).
const pinoFile = join(dir, "pino.log");
const dest = pino.destination({ dest: pinoFile, sync: false, minLength: 4096 });
const logger = pino(dest);
const pinoCall = (i: number): void => logger.info({ k: "bench/loss", v: i * 0.001, step: i });
for (let i = 0; i < 20_000; i++) pinoCall(i);
const pinoNs = await nsPerCall(
  pinoCall,
  1000,
  ROUNDS,
  () => new Promise<void>((resolve) => dest.flush(() => resolve())),
);

const ns = (x: { min: number; median: number }): string => `${fmt(x.min)} ns (median ${fmt(x.median)})`;
row(
  'producer: `streamValues("logits", Float32Array(151936), i)` (10 values copied)',
  ns(probeNs),
  `${fmt(pinoNs.min / probeNs.min)}× faster than pino`,
);
row(
  "producer: `recordMetric` with the value streamed (per_rank_no_reduce path)",
  ns(metricNs),
  `${fmt(pinoNs.min / metricNs.min)}× faster than pino`,
);
row(
  "  of which the stream push (streamed − plain `recordMetric`)",
  `${fmt(metricNs.min - plainMetricNs.min)} ns`,
  `${fmt(pinoNs.min / (metricNs.min - plainMetricNs.min))}× faster than pino`,
);
row("`pino.info({ k, v, step })` to a file (async destination)", ns(pinoNs), "");
row(
  "records dropped while measuring the producer",
  String(streamStats().dropped - droppedBefore),
  "ring sized to hold every round",
);

// ---------------------------------------------------------------------------------------------
// End to end: events/s until the last one is on disk.
async function streamEndToEnd(
  events: number,
  push: (i: number) => void,
): Promise<{ perSecond: number; perCpuSecond: number; dropped: number }> {
  await flushStream();
  const before = streamStats();
  const cpu0 = process.cpuUsage();
  const t0 = now();
  for (let i = 0; i < events; i++) {
    push(i);
    // Leave the writer room instead of dropping: this measures how fast records reach the disk.
    if ((i & 4095) === 4095)
      while (streamStats().pending > CAPACITY / 2) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await flushStream();
  const seconds = (now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const after = streamStats();
  const written = after.written - before.written;
  return {
    perSecond: written / seconds,
    perCpuSecond: written / ((cpu.user + cpu.system) / 1e6),
    dropped: after.dropped - before.dropped,
  };
}

const E2E = 2_000_000;
const e2eMetric = await streamEndToEnd(E2E, metricHandle);
// Values with 16–17 significant digits (a float32 loss widened to double, a ratio), which take
// the slower general path of number formatting; `i * 0.001` above is mostly short decimals.
const fullPrecision = (i: number): void => recordMetric("bench/loss", 2 + Math.sin(i), Reduce.MEAN);
const e2eFull = await streamEndToEnd(E2E, fullPrecision);
const e2eProbe = await streamEndToEnd(E2E / 4, (i) => streamValues("logits", probe, i));

async function pinoEndToEnd(lines: number): Promise<{ perSecond: number; perCpuSecond: number }> {
  const file = join(dir, "pino-e2e.log");
  const d = pino.destination({ dest: file, sync: false, minLength: 4096 });
  const l = pino(d);
  const cpu0 = process.cpuUsage();
  const t0 = now();
  for (let i = 0; i < lines; i++) {
    l.info({ k: "bench/loss", v: i * 0.001, step: i });
    if ((i & 4095) === 4095) await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise<void>((resolve) => d.flush(() => resolve()));
  d.flushSync();
  const seconds = (now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  statSync(file);
  d.end();
  return { perSecond: lines / seconds, perCpuSecond: lines / ((cpu.user + cpu.system) / 1e6) };
}
const pinoLines = await pinoEndToEnd(E2E / 4);
const e2e = (r: { perSecond: number; perCpuSecond: number }): string =>
  `${fmt(r.perSecond / 1e6, 2)} M/s wall, ${fmt(r.perCpuSecond / 1e6, 2)} M per CPU-second`;
const vsPino = (r: { perSecond: number; perCpuSecond: number }): string =>
  `${fmt(r.perSecond / pinoLines.perSecond)}× pino wall, ${fmt(r.perCpuSecond / pinoLines.perCpuSecond)}× per CPU-second`;
row("end to end, metric records → JSONL file", e2e(e2eMetric), `${vsPino(e2eMetric)} (dropped ${e2eMetric.dropped})`);
row(
  "end to end, metric records of 17-digit doubles (`2 + Math.sin(i)`) → JSONL file",
  e2e(e2eFull),
  `${vsPino(e2eFull)} (dropped ${e2eFull.dropped})`,
);
row(
  "end to end, probes (10 float32 values) → JSONL file",
  e2e(e2eProbe),
  `${vsPino(e2eProbe)} (dropped ${e2eProbe.dropped})`,
);
row("end to end, pino lines → file", e2e(pinoLines), "");

// ---------------------------------------------------------------------------------------------
// Bytes allocated per call: heap growth over a window with no GC in it. The least of 5 windows: an
// allocation made by every call shows in every window, while incidental ones (the JIT, a timer)
// only add to some.
let gcs = 0;
const observer = new PerformanceObserver((list) => (gcs += list.getEntries().length));
observer.observe({ entryTypes: ["gc"] });
async function bytesPerCall(fn: (i: number) => void, calls: number): Promise<{ least: number; median: number }> {
  const samples: number[] = [];
  for (let attempt = 0; attempt < 20 && samples.length < 5; attempt++) {
    await flushStream();
    gc();
    // The observer reports the forced GC later: let it, so it does not count against the window.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const gcBefore = gcs;
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < calls; i++) fn(i);
    const after = process.memoryUsage().heapUsed;
    await new Promise((resolve) => setTimeout(resolve, 20)); // let the observer report a GC in the window
    if (gcs === gcBefore) samples.push(Math.max(0, after - before) / calls);
  }
  return samples.length > 0
    ? { least: Math.min(...samples), median: median(samples) }
    : { least: Number.NaN, median: Number.NaN };
}
// 250k calls: a fixed few KB per window (not per call) would otherwise show up as a fraction of a byte.
const ALLOC_CALLS = CAPACITY - 10_000;
const allocProbe = await bytesPerCall((i) => streamValues("logits", probe, i), ALLOC_CALLS);
const allocMetric = await bytesPerCall(metricHandle, ALLOC_CALLS);
const allocPino = await bytesPerCall(pinoCall, 500);
observer.disconnect();
const bytes = (x: { least: number; median: number }, digits: number): string =>
  Number.isNaN(x.least)
    ? "n/a (a GC ran in every window)"
    : `${fmt(x.least, digits)} (median ${fmt(x.median, digits)})`;
row(
  "bytes allocated per `streamValues` call (steady state; heap growth over 252k calls, least of 5 windows without a GC)",
  bytes(allocProbe, 2),
  "",
);
row("bytes allocated per streamed `recordMetric` call", bytes(allocMetric, 2), "");
row("bytes allocated per `pino.info` call", bytes(allocPino, 0), "");

// ---------------------------------------------------------------------------------------------
// A realistic loop: ~50 µs of CPU work per token, 10 streamed values per token.
//
// Seed 004's criterion is the job's time with and without logging, so the headline is wall time.
// Every variant runs the same loop function with a different `record` callback, so the work is
// compiled once and runs the same machine code in each (separate loops measured ±1 % apart from
// code placement alone). Rounds interleave the variants; a variant's overhead is the median over
// rounds of its time over the no-recording time of the same round. Beside it, the CPU time of the
// whole process (the writer thread's included). A thread's own CPU time is not measurable
// precisely on Node 20 (schedstat is updated only at scheduler ticks, ±4 ms per read).
//
// The stream runs with its default configuration here (batch 100, capacity 16,384, flush every
// second), as a user's would: the sizes above only keep the producer measurements from dropping.
collector.stream = null;
const firstTotals = await stopStream();
// The end-to-end runs left ~1 GB of dirty page cache, which the kernel would write back during the
// loop below, on these same 2 cores: delete the files, which drops their dirty pages instead.
for (const name of ["stream.jsonl", "pino-e2e.log", "pino.log"]) rmSync(join(dir, name), { force: true });
startStream({ file: join(dir, "stream-defaults.jsonl") });
let sink = 0;
function work(iterations: number): void {
  let x = sink;
  for (let i = 0; i < iterations; i++) x = (x * 1.0000001 + i) % 1e9;
  sink = x;
}
const TOKENS = 4000;
const ROUNDS_LOOP = 41;
let iterations = 3000;
function tokenLoop(record: (token: number) => void): void {
  for (let t = 0; t < TOKENS; t++) {
    work(iterations);
    record(t);
  }
}
const logits = new Float32Array(151_936).map((_, i) => Math.cos(i));
const tenMetrics = (t: number): void => {
  for (let k = 0; k < 10; k++) recordMetric("bench/loss", t + k, Reduce.MEAN);
};
const variants = {
  none: { record: (_t: number): void => {}, streamed: false },
  plainMetrics: { record: tenMetrics, streamed: false },
  probe: { record: (t: number): void => streamValues("logits", logits, t), streamed: false },
  metrics: { record: tenMetrics, streamed: true },
};
type Variant = keyof typeof variants;
// Warm every variant, then calibrate the work to ~50 µs per token.
for (const variant of Object.values(variants)) tokenLoop(variant.record);
for (let k = 0; k < 5; k++) {
  const t0 = now();
  tokenLoop(variants.none.record);
  const us = ((now() - t0) * 1000) / TOKENS;
  iterations = Math.max(1, Math.round((iterations * 50) / us));
}
const wallTimes: Record<Variant, number[]> = { none: [], plainMetrics: [], probe: [], metrics: [] };
const cpuTimes: Record<Variant, number[]> = { none: [], plainMetrics: [], probe: [], metrics: [] };
for (let round = 0; round < ROUNDS_LOOP; round++) {
  for (const name of Object.keys(variants) as Variant[]) {
    collector.stream = variants[name].streamed ? metricStreamProducer() : null;
    await flushStream();
    const c0 = processCpuMs();
    const t0 = now();
    tokenLoop(variants[name].record);
    wallTimes[name].push(now() - t0);
    cpuTimes[name].push(processCpuMs() - c0);
  }
}
collector.stream = metricStreamProducer();
const perToken = (ms: number): number => (ms * 1000) / TOKENS;
/** Median over rounds of (variant / no recording − 1), in %. */
const pairedOverhead = (times: Record<Variant, number[]>, name: Variant): number =>
  median(times[name].map((t, r) => (t / (times.none[r] as number) - 1) * 100));
const pct = (x: number): string => `${fmt(x, 2)} %`;
row(
  "realistic loop: µs per token without recording (wall)",
  fmt(perToken(median(wallTimes.none)), 1),
  `${TOKENS} tokens × ${iterations} work iterations, ${ROUNDS_LOOP} rounds; the stream's default configuration`,
);
for (const [name, label] of [
  ["probe", "one 10-value probe per token (seed 004's case)"],
  ["metrics", "10 streamed metric values per token"],
  ["plainMetrics", "10 metric values per token, stream off (the reduction alone)"],
] as const) {
  const least = (Math.min(...wallTimes[name]) / Math.min(...wallTimes.none) - 1) * 100;
  row(
    `realistic loop: ${label}`,
    `overhead ${pct(pairedOverhead(wallTimes, name))} wall`,
    `median of paired rounds; least disturbed rounds ${pct(least)}; process CPU, writer included, ${pct(pairedOverhead(cpuTimes, name))}`,
  );
}

collector.stream = null;
const final = await stopStream();
dest.flushSync();
dest.end();
rmSync(dir, { recursive: true, force: true });

process.stdout.write(`| measure | result | comparison |\n|---|---|---|\n`);
for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`);
process.stdout.write(
  `\nstream totals: written ${(firstTotals?.written ?? 0) + (final?.written ?? 0)}, dropped ${(firstTotals?.dropped ?? 0) + (final?.dropped ?? 0)}; node ${process.version}, ${process.arch}, ${cpus().length} CPUs, load average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(" ")}\n`,
);
