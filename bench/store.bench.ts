/**
 * The store: ingest throughput (points/s) and the time to read a 1M-point series downsampled to
 * 2,000 points, against a row-per-point baseline in the same SQLite build on the same disk.
 *
 * Targets (issue 6): ingest >= 1M points/s in batches; a 1M-point read downsampled to 2,000 points
 * in <= 100 ms. Run: `npm run bench -- store` (or `npx tsx bench/store.bench.ts`).
 */
import Database from "better-sqlite3";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { StoreBackend } from "../src/backends/store/index.js";
import { closeStores, series } from "../src/backends/store/reader.js";
import { GLOBAL_RANK } from "../src/backends/store/schema.js";
import { StoreWriter } from "../src/backends/store/writer.js";
import { tempDir } from "../test/helpers.js";

const N = 1_000_000;
const BATCH = 10_000;
const READS = 15;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

function series1M(): { steps: Float64Array; walls: Float64Array; values: Float64Array } {
  const steps = new Float64Array(N);
  const walls = new Float64Array(N);
  const values = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    steps[i] = i;
    walls[i] = 1.7e12 + i * 10;
    values[i] = Math.sin(i / 5000) + (i % 97) / 1000;
  }
  values[654_321] = 100; // a spike the downsampled read must keep
  return { steps, walls, values };
}

const rows: string[][] = [];
const row = (what: string, store: string, baseline: string, target: string): void => {
  rows.push([what, store, baseline, target]);
};

const root = tempDir("rankscope-bench-");
const { steps, walls, values } = series1M();

// 1. Bulk ingest: one series, batches of 10k points, one transaction per batch.
const chunkedDir = join(root, "chunked");
const w = StoreWriter.open({ runDir: chunkedDir, role: "controller", rank: GLOBAL_RANK, rankName: "bench", experiment: "bench", trial: "chunked" });
let t0 = performance.now();
for (let at = 0; at < N; at += BATCH) w.writeSeries("loss", steps.subarray(at, at + BATCH), walls.subarray(at, at + BATCH), values.subarray(at, at + BATCH));
const chunkedIngestMs = performance.now() - t0;

// 2. Flush-shaped ingest: 1,000 keys x 1 point per flush (one transaction per flush), 200 flushes.
const keys = Array.from({ length: 1000 }, (_, i) => `layer${i}/grad_norm`);
const flushes = 200;
t0 = performance.now();
for (let step = 0; step < flushes; step++) {
  const wall = 1.7e12 + step;
  w.write({ scalars: keys.map((key, i) => ({ key, step, wall, value: i + step / 1000, reduce: "mean" })) });
}
const flushIngestMs = performance.now() - t0;
w.finish();

// 3. Baseline: a row per point, (key, rank, step) primary key, same batches.
const baseDir = join(root, "baseline");
rmSync(baseDir, { recursive: true, force: true });
const baseWriter = StoreWriter.open({ runDir: baseDir, role: "controller", rank: GLOBAL_RANK, rankName: "bench", experiment: "bench", trial: "rows" });
baseWriter.close();
const base = new Database(join(baseDir, "metrics.db"));
base.pragma("journal_mode = WAL");
base.pragma("synchronous = NORMAL");
base.exec("CREATE TABLE baseline (key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, wall REAL NOT NULL, value REAL, PRIMARY KEY (key_id, rank, step)) WITHOUT ROWID");
const insert = base.prepare("INSERT OR REPLACE INTO baseline VALUES (1, -1, ?, ?, ?)");
const insertBatch = base.transaction((from: number) => {
  for (let i = from; i < from + BATCH; i++) insert.run(steps[i], walls[i], values[i]);
});
t0 = performance.now();
for (let at = 0; at < N; at += BATCH) insertBatch.immediate(at);
const baselineIngestMs = performance.now() - t0;

// 2b. The same traffic through the backend (worker thread): the user's loop only posts batches;
// batches that queue while the writer works are merged into one transaction.
const backendDir = join(root, "backend");
const backend = new StoreBackend({ loggingMode: "global_reduce" });
await backend.init({
  backendName: "store",
  displayName: "GlobalReduce",
  loggingMode: "global_reduce",
  role: "controller",
  identity: { rank: 0, rankName: "bench", processName: "bench", localRank: 0, localWorldSize: 1 },
  runDir: backendDir,
  experiment: "bench",
  trial: "backend",
  resumeStep: 0,
  primaryMetadata: {},
});
t0 = performance.now();
let loopMs = 0;
for (let step = 0; step < flushes; step++) {
  const timestamp = 1.7e12 + step;
  const l0 = performance.now();
  backend.logBatch(keys.map((key, i) => ({ key, value: i + step / 1000, reduce: "mean", step, timestamp })), step);
  await backend.flushed();
  loopMs += performance.now() - l0;
}
await backend.drain();
const backendFlushMs = performance.now() - t0;
// Stream records (per_rank_no_reduce), batches of 10k as the stream ring drains them.
const streamBatch = Array.from({ length: BATCH }, (_, i) => ({ key: "probe/activation", value: i / BATCH, step: 0, timestamp: 1.7e12 + i, rank: 0, rankName: "bench" }));
const streamTotal = 100 * BATCH;
t0 = performance.now();
for (let b = 0; b < streamTotal / BATCH; b++) {
  backend.logStream(streamBatch);
  await backend.flushed();
}
await backend.drain();
const streamMs = performance.now() - t0;
await backend.finish();

const rate = (points: number, ms: number): string => `${((points / ms) * 1000 / 1e6).toFixed(2)} M/s`;
row("ingest, 1 series, batches of 10k", rate(N, chunkedIngestMs), rate(N, baselineIngestMs), ">= 1 M/s");
row("ingest, 1,000 keys x 1 point per flush, one transaction each", rate(keys.length * flushes, flushIngestMs), "(same path: rows)", "");
row(
  "ingest, 1,000 keys x 1 point per flush, through the backend",
  `${rate(keys.length * flushes, backendFlushMs)} (user loop: ${(loopMs / flushes).toFixed(2)} ms per flush)`,
  "",
  "",
);
row("ingest, stream values, batches of 10k, through the backend", rate(streamTotal, streamMs), "(same path: rows)", "");

// 4. Read 1M points downsampled to 2,000.
const readMs: number[] = [];
let kept = 0;
let spikeKept = false;
for (let i = 0; i < READS; i++) {
  t0 = performance.now();
  const r = series(chunkedDir, "loss", { maxPoints: 2000 });
  readMs.push(performance.now() - t0);
  kept = r.points.length;
  spikeKept = r.points.some((p) => p.value === 100);
}
const wallReadMs: number[] = [];
for (let i = 0; i < READS; i++) {
  t0 = performance.now();
  series(chunkedDir, "loss", { maxPoints: 2000, x: "wall" });
  wallReadMs.push(performance.now() - t0);
}
const cursorMs: number[] = [];
for (let i = 0; i < READS; i++) {
  t0 = performance.now();
  series(chunkedDir, "loss", { after: N - 101 });
  cursorMs.push(performance.now() - t0);
}

// Baseline read: GROUP BY bucket with min/max/last in SQL.
const buckets = Math.floor(2000 / 3);
const groupBy = base.prepare(
  `SELECT CAST((step - 0) * ${buckets} / ${N} AS INTEGER) AS b, min(value), max(value), max(step) FROM baseline WHERE key_id = 1 AND rank = -1 GROUP BY b`,
);
const baseReadMs: number[] = [];
for (let i = 0; i < Math.min(READS, 5); i++) {
  t0 = performance.now();
  groupBy.raw(true).all();
  baseReadMs.push(performance.now() - t0);
}
const baseScanMs: number[] = [];
const scan = base.prepare("SELECT step, wall, value FROM baseline WHERE key_id = 1 AND rank = -1 ORDER BY step");
for (let i = 0; i < Math.min(READS, 5); i++) {
  t0 = performance.now();
  scan.raw(true).all();
  baseScanMs.push(performance.now() - t0);
}
base.close();
closeStores();

row(`read 1M points → ${kept} (x = step), median of ${READS}`, `${median(readMs).toFixed(1)} ms${spikeKept ? ", spike kept" : ", SPIKE LOST"}`, `${median(baseReadMs).toFixed(1)} ms (GROUP BY)`, "<= 100 ms");
row(`read 1M points → 2,000 (x = wall), median of ${READS}`, `${median(wallReadMs).toFixed(1)} ms`, `${median(baseScanMs).toFixed(1)} ms (fetch all rows, no downsampling)`, "");
row("live read: last 100 points by cursor", `${median(cursorMs).toFixed(2)} ms`, "", "");

process.stdout.write("| measurement | store (chunks) | row-per-point baseline | target |\n|---|---|---|---|\n");
for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`);
process.stdout.write(`\nNode ${process.version}, better-sqlite3 ${(await import("better-sqlite3/package.json", { with: { type: "json" } })).default.version}, WAL, synchronous=NORMAL, temp dir on the local disk.\n`);
rmSync(root, { recursive: true, force: true });
