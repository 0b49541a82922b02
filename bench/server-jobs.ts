/**
 * The jobs of the team server's mixed-load benchmark (`SERVER_BENCH_MIXED=1`, bench/server.bench.ts),
 * in a process of their own so that their work does not delay the dashboard readers' clocks in the
 * benchmark's process. Each job writes its store as a training loop does (`MIXED_KEYS` keys at
 * `MIXED_STEPS_PER_S` steps per second, a flush every 200 ms) and syncs it live: a `RunSync` pass,
 * then the live sync's interval (1 s), as the sync thread does. After `MIXED_SECONDS` the writers
 * stop and one last full pass delivers the rest.
 *
 * The sync lag of a pass: from the newest flush it could see (committed before it started) to its
 * end, when the server had applied it. Prints one JSON line on stdout at the end.
 */
import { join } from "node:path";
import { GLOBAL_RANK } from "../src/store/schema.js";
import { StoreWriter } from "../src/store/writer.js";
import { ColumnBuilder } from "../src/store/columns.js";
import { RunSync } from "../src/sync/run-sync.js";

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const url = env("MIXED_URL");
const token = env("MIXED_TOKEN");
const root = env("MIXED_ROOT");
const jobs = Number(env("MIXED_JOBS"));
const keys = Number(env("MIXED_KEYS"));
const stepsPerS = Number(env("MIXED_STEPS_PER_S"));
const seconds = Number(env("MIXED_SECONDS"));
const FLUSH_MS = 200;
const INTERVAL_MS = 1000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Job {
  readonly writer: StoreWriter;
  readonly sync: RunSync;
  steps: number;
  /** When the newest flush was committed (ms, performance clock). */
  committedAt: number;
}

const started = performance.now();
const list: Job[] = Array.from({ length: jobs }, (_, i) => {
  const runDir = join(root, "live", `job${i}`);
  const writer = StoreWriter.open({
    runDir,
    role: "controller",
    rank: GLOBAL_RANK,
    rankName: "controller",
    experiment: "live",
    trial: `job${i}`,
  });
  return { writer, sync: new RunSync({ runDir, url, token }), steps: 0, committedAt: 0 };
});

/** Write the steps due by now: the loop's flushes, each job's in one transaction. */
function flush(job: Job): void {
  const due = Math.floor(((performance.now() - started) / 1000) * stepsPerS);
  if (due <= job.steps) return;
  const b = new ColumnBuilder();
  for (let s = job.steps; s < due; s++)
    for (let k = 0; k < keys; k++) b.add(`train/k${k}`, GLOBAL_RANK, s, Date.now(), Math.sin(s / 50 + k), "mean");
  job.writer.write({ scalarColumns: b.build() });
  job.steps = due;
  job.committedAt = performance.now();
}

let writing = true;
const writers = (async () => {
  while (writing) {
    for (const job of list) flush(job);
    await sleep(FLUSH_MS);
  }
})();

const lags: number[] = [];
let failed = 0;
const syncs = list.map(async (job, i) => {
  await sleep((INTERVAL_MS * i) / jobs);
  while (writing) {
    const seen = job.committedAt;
    try {
      await job.sync.pass();
      if (seen > 0) lags.push(performance.now() - seen);
    } catch {
      failed++;
    }
    await sleep(INTERVAL_MS);
  }
});

await sleep(seconds * 1000);
writing = false;
await writers;
await Promise.all(syncs);
for (const job of list) job.writer.finish();
const drainStart = performance.now();
await Promise.all(list.map((job) => job.sync.pass(true)));
const drainMs = performance.now() - drainStart;
process.stdout.write(
  `${JSON.stringify({
    lags,
    failed,
    drainMs,
    points: list.reduce((n, j) => n + j.steps * keys, 0),
    sent: list.reduce((n, j) => n + j.sync.totals.points, 0),
    batches: list.reduce((n, j) => n + j.sync.totals.batches, 0),
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
  })}\n`,
);
