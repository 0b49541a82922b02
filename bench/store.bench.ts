/**
 * The store: ingest throughput (points/s) and the time to read a 1M-point series downsampled to
 * 2,000 points, against a row-per-point baseline in the same SQLite build on the same disk.
 *
 * Targets (issue 6): ingest >= 1M points/s in batches; a 1M-point read downsampled to 2,000 points
 * in <= 100 ms. Ingest figures are the median (and best) of 3 runs, reads the median of 15: the
 * machines this runs on are shared. Run: `npm run bench -- store`.
 */
import { sqliteDriver, sqlitePackage, sqliteVersion } from "../src/store/sqlite.js";
import { rmSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { StoreBackend } from "../src/backends/store/index.js";
import { closeStores, series } from "../src/store/reader.js";
import { GLOBAL_RANK } from "../src/store/schema.js";
import { StoreWriter } from "../src/store/writer.js";
import { tempDir } from "../test/helpers.js";

/** better-sqlite3's `Database` class, of the build this Node.js runs. */
const Database = sqliteDriver();

const N = 1_000_000;
const BATCH = 10_000;
const READS = 15;
const RUNS = 3;
const KEYS = Array.from({ length: 1000 }, (_, i) => `layer${i}/grad_norm`);
const FLUSHES = 200;

const root = tempDir("rankscope-bench-");
let runCount = 0;
const freshDir = (): string => join(root, `run${runCount++}`);

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

const steps = new Float64Array(N);
const walls = new Float64Array(N);
const values = new Float64Array(N);
for (let i = 0; i < N; i++) {
  steps[i] = i;
  walls[i] = 1.7e12 + i * 10;
  values[i] = Math.sin(i / 5000) + (i % 97) / 1000;
}
values[654_321] = 100; // a spike the downsampled read must keep

function openWriter(runDir: string): StoreWriter {
  return StoreWriter.open({
    runDir,
    role: "controller",
    rank: GLOBAL_RANK,
    rankName: "bench",
    experiment: "bench",
    trial: "bench",
  });
}

/** Bulk: one series, batches of 10k points, one transaction per batch. Returns ms. */
function ingestBulk(runDir: string): number {
  const w = openWriter(runDir);
  const t0 = performance.now();
  for (let at = 0; at < N; at += BATCH)
    w.writeSeries(
      "loss",
      steps.subarray(at, at + BATCH),
      walls.subarray(at, at + BATCH),
      values.subarray(at, at + BATCH),
    );
  const ms = performance.now() - t0;
  w.finish();
  return ms;
}

/** Flush-shaped: 1,000 keys x 1 point, one transaction per flush. Returns ms. */
function ingestFlushes(runDir: string): number {
  const w = openWriter(runDir);
  const t0 = performance.now();
  for (let step = 0; step < FLUSHES; step++) {
    const wall = 1.7e12 + step;
    w.write({ scalars: KEYS.map((key, i) => ({ key, step, wall, value: i + step / 1000, reduce: "mean" })) });
  }
  const ms = performance.now() - t0;
  w.finish();
  return ms;
}

async function startBackend(runDir: string): Promise<StoreBackend> {
  const backend = new StoreBackend({ loggingMode: "global_reduce" });
  await backend.init({
    backendName: "store",
    displayName: "GlobalReduce",
    loggingMode: "global_reduce",
    role: "controller",
    identity: { rank: 0, rankName: "bench", processName: "bench", localRank: 0, localWorldSize: 1 },
    runDir,
    experiment: "bench",
    trial: "backend",
    resumeStep: 0,
    primaryMetadata: {},
  });
  return backend;
}

/** Flush-shaped through the backend (writer thread). Returns total ms and the loop's ms per flush. */
async function ingestFlushesBackend(runDir: string): Promise<{ ms: number; loopMs: number }> {
  const backend = await startBackend(runDir);
  const t0 = performance.now();
  let loopMs = 0;
  for (let step = 0; step < FLUSHES; step++) {
    const timestamp = 1.7e12 + step;
    const l0 = performance.now();
    backend.logBatch(
      KEYS.map((key, i) => ({ key, value: i + step / 1000, reduce: "mean", step, timestamp })),
      step,
    );
    await backend.flushed();
    loopMs += performance.now() - l0;
  }
  await backend.drain();
  const ms = performance.now() - t0;
  await backend.finish();
  return { ms, loopMs: loopMs / FLUSHES };
}

/** Stream records through the backend, batches of 10k as the stream ring drains them. Returns ms. */
async function ingestStreams(runDir: string): Promise<number> {
  const backend = await startBackend(runDir);
  const batch = Array.from({ length: BATCH }, (_, i) => ({
    key: "probe/activation",
    value: i / BATCH,
    step: 0,
    timestamp: 1.7e12 + i,
    rank: 0,
    rankName: "bench",
    role: "rank" as const,
    thread: 0,
  }));
  const t0 = performance.now();
  for (let b = 0; b < N / BATCH; b++) {
    backend.logStream(batch);
    await backend.flushed();
  }
  await backend.drain();
  const ms = performance.now() - t0;
  await backend.finish();
  return ms;
}

const rate = (points: number, ms: number): number => points / ms / 1000;
const fmt = (rates: readonly number[]): string =>
  `${median(rates).toFixed(2)} M/s (best ${Math.max(...rates).toFixed(2)})`;

const bulk: number[] = [];
const flush: number[] = [];
const flushBackend: number[] = [];
const loop: number[] = [];
const stream: number[] = [];
let readDir = "";
for (let r = 0; r < RUNS; r++) {
  readDir = freshDir();
  bulk.push(rate(N, ingestBulk(readDir)));
  flush.push(rate(KEYS.length * FLUSHES, ingestFlushes(freshDir())));
  const b = await ingestFlushesBackend(freshDir());
  flushBackend.push(rate(KEYS.length * FLUSHES, b.ms));
  loop.push(b.loopMs);
  stream.push(rate(N, await ingestStreams(freshDir())));
}

// Baseline: a row per point, (key, rank, step) primary key, same batches.
const base = new Database(join(freshDir() + ".db"));
base.pragma("journal_mode = WAL");
base.pragma("synchronous = NORMAL");
base.exec(
  "CREATE TABLE baseline (key_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, wall REAL NOT NULL, value REAL, PRIMARY KEY (key_id, rank, step)) WITHOUT ROWID",
);
const insert = base.prepare("INSERT OR REPLACE INTO baseline VALUES (1, -1, ?, ?, ?)");
const insertBatch = base.transaction((from: number) => {
  for (let i = from; i < from + BATCH; i++) insert.run(steps[i], walls[i], values[i]);
});
let t0 = performance.now();
for (let at = 0; at < N; at += BATCH) insertBatch.immediate(at);
const baselineRate = rate(N, performance.now() - t0);

// Reads of the last bulk-ingested series.
const timed = (fn: () => void, times: number): number => {
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    t0 = performance.now();
    fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
};
const sample = series(readDir, "loss", { maxPoints: 2000 });
const spikeKept = sample.points.some((p) => p.value === 100);
const readStep = timed(() => series(readDir, "loss", { maxPoints: 2000 }), READS);
const readWall = timed(() => series(readDir, "loss", { maxPoints: 2000, x: "wall" }), READS);
const readCursor = timed(() => series(readDir, "loss", { after: N - 101 }), READS);
const buckets = Math.floor(2000 / 3);
const groupBy = base.prepare(
  `SELECT CAST(step * ${buckets} / ${N} AS INTEGER) AS b, min(value), max(value), max(step) FROM baseline WHERE key_id = 1 AND rank = -1 GROUP BY b`,
);
const baseGroupBy = timed(() => groupBy.raw(true).all(), 5);
const scan = base.prepare("SELECT step, wall, value FROM baseline WHERE key_id = 1 AND rank = -1 ORDER BY step");
const baseScan = timed(() => scan.raw(true).all(), 5);
base.close();
closeStores();

const rows: [string, string, string, string][] = [
  ["ingest, 1 series, batches of 10k", fmt(bulk), `${baselineRate.toFixed(2)} M/s`, ">= 1 M/s"],
  ["ingest, stream values, batches of 10k, through the backend", fmt(stream), "", ">= 1 M/s"],
  ["ingest, 1,000 keys x 1 point per flush, one transaction each", fmt(flush), "", ""],
  [
    "ingest, 1,000 keys x 1 point per flush, through the backend",
    `${fmt(flushBackend)}; user loop ${median(loop).toFixed(2)} ms per flush`,
    "",
    "",
  ],
  [
    `read 1M points → ${sample.points.length} (x = step), median of ${READS}`,
    `${readStep.toFixed(1)} ms${spikeKept ? ", spike kept" : ", SPIKE LOST"}`,
    `${baseGroupBy.toFixed(1)} ms (GROUP BY)`,
    "<= 100 ms",
  ],
  [
    `read 1M points → 2,000 (x = wall), median of ${READS}`,
    `${readWall.toFixed(1)} ms`,
    `${baseScan.toFixed(1)} ms (all rows, no downsampling)`,
    "<= 100 ms",
  ],
  ["live read: last 100 points by cursor", `${readCursor.toFixed(2)} ms`, "", ""],
];
process.stdout.write("| measurement | store | row-per-point baseline | target |\n|---|---|---|---|\n");
for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`);
process.stdout.write(
  `\nNode ${process.version}, ${sqlitePackage} ${sqliteVersion()}, WAL, synchronous=NORMAL, load average ${loadavg()[0]?.toFixed(1)} at the end.\n`,
);
rmSync(root, { recursive: true, force: true });
