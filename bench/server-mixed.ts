/**
 * Part 4 of bench/server.bench.ts (`SERVER_BENCH_MIXED=1`, alone): dashboard reads while jobs sync
 * live. `SERVER_BENCH_JOBS` jobs (default 16, in a child process: bench/server-jobs.ts), each
 * writing 128 keys at 25 steps/s and syncing every second, for `SERVER_BENCH_SECONDS` (default
 * 60); meanwhile 4 dashboard readers poll as the dashboard does: every second each of its 4 live
 * runs' 32 on-screen lines after their cursors (one `/api/lines` per run, at once), and the runs
 * list every 5 s. Reports each endpoint's p50/p99, the sync lag, whether every point arrived, and
 * where the server's time went (bench/server-probe.mjs: event-loop delay, pool wait and
 * connection time per pool).
 */
import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type pg from "pg";

const JOBS_FILE = fileURLToPath(new URL("./server-jobs.ts", import.meta.url));
const KEYS = 128;
const STEPS_PER_S = 25;
const READERS = 4;
const RUNS_PER_READER = 4;
const LINES_PER_RUN = 32;

/** The `q`-th quantile (0–1) of `xs`, nearest rank. */
function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? NaN;
}

const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
/** `p50 / p99 / max ms (n)` of samples in ms. */
export const spread = (xs: readonly number[]): string =>
  `p50 ${ms(quantile(xs, 0.5))}, p99 ${ms(quantile(xs, 0.99))}, max ${ms(Math.max(...xs))} ms (${xs.length})`;

interface JobsReport {
  lags: number[];
  failed: number;
  drainMs: number;
  points: number;
  sent: number;
  batches: number;
  /** The jobs' process's CPU (ms). */
  cpuMs: number;
}

interface ProbeReport {
  loop: { p50: number; p99: number; max: number };
  pools: Record<string, { wait: number[]; held: number[] }>;
}

/** The jobs' process: resolves with its report once it has written and delivered everything. */
function runJobs(url: string, token: string, root: string, jobs: number, seconds: number): Promise<JobsReport> {
  const child = spawn(process.execPath, ["--import", "tsx", JOBS_FILE], {
    env: {
      ...process.env,
      MIXED_URL: url,
      MIXED_TOKEN: token,
      MIXED_ROOT: root,
      MIXED_JOBS: String(jobs),
      MIXED_KEYS: String(KEYS),
      MIXED_STEPS_PER_S: String(STEPS_PER_S),
      MIXED_SECONDS: String(seconds),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString()));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`the jobs' process exited with ${String(code)}`));
      try {
        resolve(JSON.parse(out.trim().split("\n").pop() ?? "") as JobsReport);
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  });
}

/** One dashboard: polls its runs' lines every second and the runs list every 5 s, until `stop`. */
async function reader(
  url: string,
  token: string,
  runs: readonly string[],
  times: { lines: number[]; runs: number[]; errors: Map<string, number> },
  stop: AbortSignal,
): Promise<void> {
  // A line's cursor as the server gives it (a string), sent back as `after`: only newer points come.
  const cursors = new Map(runs.map((r) => [r, Array.from({ length: LINES_PER_RUN }, (): string | null => null)]));
  const get = async (path: string, into: number[]): Promise<unknown> => {
    const t = performance.now();
    try {
      const answer = await fetch(`${url}${path}`, { headers: { Authorization: `Bearer ${token}` } });
      const text = await answer.text();
      into.push(performance.now() - t);
      if (!answer.ok) {
        const why = `${answer.status} ${text.slice(0, 80)}`;
        times.errors.set(why, (times.errors.get(why) ?? 0) + 1);
        return null;
      }
      return JSON.parse(text);
    } catch (error) {
      const why = String(error);
      times.errors.set(why, (times.errors.get(why) ?? 0) + 1);
      return null;
    }
  };
  let tick = 0;
  while (!stop.aborted) {
    const next = performance.now() + 1000;
    const polls = runs.map(async (run) => {
      const own = cursors.get(run) ?? [];
      const lines = own.map((after, k) => [`train/k${k}`, null, after]);
      const body = await get(
        `/api/lines?run=${encodeURIComponent(run)}&lines=${encodeURIComponent(JSON.stringify(lines))}`,
        times.lines,
      );
      const answers = (body as { lines?: { cursor?: string | null }[] } | null)?.lines ?? [];
      answers.forEach((a, k) => {
        if (typeof a.cursor === "string") own[k] = a.cursor;
      });
    });
    if (tick++ % 5 === 0) polls.push(get("/api/runs", times.runs).then(() => undefined));
    await Promise.all(polls);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
  }
}

/** The mixed load against a server started with bench/server-probe.mjs; rows of the table. */
export async function mixedLoad(options: {
  url: string;
  pool: pg.Pool;
  write: string;
  read: string;
  root: string;
  stopServer: () => Promise<void>;
  probeOut: string;
  /** CPU (ms) so far of this process (the readers), the server and PostgreSQL. */
  cpu: () => { jobs: number; server: number; postgres: number };
}): Promise<string[][]> {
  const cpu0 = options.cpu();
  const wall0 = performance.now();
  const jobs = Number(process.env.SERVER_BENCH_JOBS ?? 16);
  const seconds = Number(process.env.SERVER_BENCH_SECONDS ?? 60);
  const load = loadavg()[0] ?? NaN;
  const jobsDone = runJobs(options.url, options.write, options.root, jobs, seconds);
  const times = { lines: [] as number[], runs: [] as number[], errors: new Map<string, number>() };
  const stop = new AbortController();
  // The readers open their dashboards once the runs exist (their first batches), a few seconds in.
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const readers = Array.from({ length: READERS }, (_, r) =>
    reader(
      options.url,
      options.read,
      Array.from({ length: RUNS_PER_READER }, (_, i) => `live/job${(r * RUNS_PER_READER + i) % jobs}`),
      times,
      stop.signal,
    ),
  );
  const report = await jobsDone;
  stop.abort();
  await Promise.all(readers);
  const cpu1 = options.cpu();
  const wallS = (performance.now() - wall0) / 1000;
  const stored = await options.pool.query<{ n: number | null }>(
    "SELECT sum(s.n)::bigint AS n FROM series s JOIN keys k ON k.id = s.key_id JOIN runs r ON r.id = k.run_id WHERE r.experiment = 'live'",
  );
  await options.stopServer();
  const probe = JSON.parse(readFileSync(options.probeOut, "utf8")) as ProbeReport;
  const rows: string[][] = [
    [
      `mixed load: ${jobs} jobs × ${KEYS} keys × ${STEPS_PER_S} steps/s syncing live for ${seconds} s, ${READERS} dashboards polling (load average ${load.toFixed(1)} at the start)`,
      `${report.points.toLocaleString("en-US")} points written, ${Number(stored.rows[0]?.n ?? 0).toLocaleString("en-US")} stored, ${report.batches} batches`,
      Number(stored.rows[0]?.n ?? 0) === report.points ? "every point arrived" : "POINTS MISSING",
    ],
    [
      "… dashboard reads: /api/lines",
      spread(times.lines),
      times.errors.size === 0
        ? "no failed reads"
        : `failed reads: ${[...times.errors].map(([why, n]) => `${n} × ${why}`).join("; ")}`,
    ],
    ["… dashboard reads: /api/runs", spread(times.runs), "target: reads p99 ≤ 1 s"],
    [
      "… sync lag: newest flush a pass could see → applied",
      spread(report.lags),
      `${report.failed} failed passes; the last pass after the writers stopped: ${ms(report.drainMs)} ms`,
    ],
    [
      "… the server's event-loop delay",
      `p50 ${ms(probe.loop.p50)}, p99 ${ms(probe.loop.p99)}, max ${ms(probe.loop.max)} ms`,
      "monitorEventLoopDelay: how late its 10 ms timer fired",
    ],
    [
      "… CPU in the run (s): server, PostgreSQL, the jobs, the readers",
      [cpu1.server - cpu0.server, cpu1.postgres - cpu0.postgres, report.cpuMs, cpu1.jobs - cpu0.jobs]
        .map((x) => (x / 1000).toFixed(1))
        .join(", "),
      `${wallS.toFixed(0)} s of wall clock: the 2 cores could give ${(2 * wallS).toFixed(0)} CPU-s to all processes`,
    ],
  ];
  for (const [name, s] of Object.entries(probe.pools).sort()) {
    rows.push([`… pool ${name}: wait for a connection`, spread(s.wait), ""]);
    rows.push([`… pool ${name}: connection held (query, or a batch's transaction)`, spread(s.held), ""]);
  }
  return rows;
}
