/**
 * `npm run bench -- runs`: the runs list at a team's scale (issue 25, item 5) on both dashboard
 * sources — a local root of 10,000 real run stores (`rankscope ui`, the run index) and a team
 * server whose project holds 10,000 runs in a real PostgreSQL. Measured over HTTP in this process:
 * `/api/runs` with a filter (a page of 100 rows, tags + parameter comparisons, and text), without
 * one, and sorted by a metric; and the event loop's longest hold (perf_hooks
 * `monitorEventLoopDelay`, and the same in CPU time) while the local index is first read, while a
 * full refresh pass runs, and while the requests are served. Targets: ≤ 200 ms a list, no hold over 100 ms. The peer is the
 * index's first read of every store: what each request cost before the index (issue 25 measured
 * 0.41–0.71 s at 300 runs).
 *
 * The local runs are 8 stores written by the real writer, copied (test/ui/seed.ts); the team
 * server's are run rows inserted as the sync writes them (no series).
 */
import { rmSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { startDashboard } from "../src/ui/server.js";
import { createStoreSource } from "../src/ui/store-source.js";
import { tempDir } from "../test/helpers.js";
import { Postgres, postgresMissing } from "../test/server/postgres.js";
import { insertRunRows, serverWithTokens } from "../test/server/support.js";
import { manyRunSpec, seedManyRuns } from "../test/ui/seed.js";
import { median, printTable } from "./harness.js";

const RUNS = 10_000;
const REPEATS = 15;

const QUERIES: [string, string][] = [
  ["filter: tag + group + 2 params", "tag=rare&group=g0&param=lr%3C0.01&param=opt%3Dsgd&limit=100"],
  ["filter: text", "q=r0012&limit=100"],
  ["no filter, newest first", "limit=100"],
  ["filter + sort by param, page 50", "param=opt%3Dadam&sort=-param:lr&offset=5000&limit=100"],
];
const LOCAL_ONLY: [string, string][] = [
  ["filter: metric + summary", "metric=loss%3C2&sort=metric:loss&summary=1&limit=100"],
];

/**
 * The longest hold of this process's event loop while `work` runs, in ms: by the wall clock
 * (`monitorEventLoopDelay`, which on a loaded machine also counts the time the process waited for
 * a CPU), and in CPU time — the most CPU the process used between two ticks of a 1 ms timer,
 * i.e. the longest stretch of work that did not yield, whatever the load (it counts libuv's
 * threads too, so it can only overstate).
 */
async function longestHold<T>(
  work: () => Promise<T>,
): Promise<{ value: T; holdMs: number; cpuHoldMs: number; cpuMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  const start = process.cpuUsage();
  let last = start;
  let cpuHold = 0;
  const ticker = setInterval(() => {
    const now = process.cpuUsage();
    cpuHold = Math.max(cpuHold, now.user + now.system - last.user - last.system);
    last = now;
  }, 1);
  h.enable();
  try {
    const value = await work();
    const end = process.cpuUsage(start);
    return { value, holdMs: h.max / 1e6, cpuHoldMs: cpuHold / 1000, cpuMs: (end.user + end.system) / 1000 };
  } finally {
    clearInterval(ticker);
    h.disable();
  }
}

async function timed(url: string, headers: Record<string, string>): Promise<{ ms: number; total: number }> {
  const t0 = performance.now();
  const answer = await fetch(url, { headers });
  const body = (await answer.json()) as { total: number; indexing?: unknown };
  if (answer.status !== 200) throw new Error(`${url}: ${answer.status} ${JSON.stringify(body)}`);
  return { ms: performance.now() - t0, total: body.total };
}

async function measureQueries(
  base: string,
  queries: [string, string][],
  headers: Record<string, string>,
  source: string,
): Promise<(string | number)[][]> {
  const rows: (string | number)[][] = [];
  for (const [name, query] of queries) {
    const {
      value: times,
      holdMs,
      cpuHoldMs,
      cpuMs,
    } = await longestHold(async () => {
      const out: number[] = [];
      let total = 0;
      for (let i = 0; i < REPEATS; i++) {
        const r = await timed(`${base}/api/runs?${query}`, headers);
        out.push(r.ms);
        total = r.total;
      }
      return { out, total };
    });
    const sorted = [...times.out].sort((a, b) => a - b);
    rows.push([
      source,
      name,
      times.total,
      median(sorted),
      sorted[sorted.length - 1] ?? NaN,
      cpuMs / REPEATS,
      holdMs,
      cpuHoldMs,
    ]);
  }
  return rows;
}

async function local(): Promise<{ rows: (string | number)[][]; holds: (string | number)[][] }> {
  const root = tempDir("rankscope-bench-runs-");
  try {
    const t0 = performance.now();
    seedManyRuns(root, RUNS);
    const seedS = (performance.now() - t0) / 1000;
    const source = createStoreSource(root);
    const dashboard = await startDashboard({ root, port: 0, source });
    try {
      // The first read of 10,000 stores, driven by requests as a browser would (every 100 ms).
      const first = await longestHold(async () => {
        const start = performance.now();
        for (;;) {
          const answer = await fetch(`${dashboard.url}api/runs?limit=1`);
          const body = (await answer.json()) as { indexing?: unknown };
          if (body.indexing === undefined) return performance.now() - start;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      });
      const full = await longestHold(async () => {
        const start = performance.now();
        await source.index.refreshAll();
        return performance.now() - start;
      });
      const base = dashboard.url.replace(/\/$/, "");
      const rows = await measureQueries(base, [...QUERIES, ...LOCAL_ONLY], {}, "local root");
      const holds = [
        ["local root", `seed ${RUNS} runs (copies)`, seedS * 1000, "—", "—", "—"],
        [
          "local root",
          "first read of every store (the peer: a request before the index)",
          first.value,
          first.cpuMs,
          first.holdMs,
          first.cpuHoldMs,
        ],
        ["local root", "full refresh pass (stat every run)", full.value, full.cpuMs, full.holdMs, full.cpuHoldMs],
      ];
      return { rows, holds };
    } finally {
      await dashboard.close();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

async function team(): Promise<(string | number)[][]> {
  const pg = await Postgres.start();
  try {
    const t = await serverWithTokens(pg);
    try {
      await insertRunRows(
        t.server,
        Array.from({ length: RUNS }, (_, i) => manyRunSpec(i)),
      );
      await t.server.pool.query("ANALYZE runs");
      return await measureQueries(
        t.server.url,
        QUERIES,
        { Authorization: `Bearer ${t.read}` },
        "team server (PostgreSQL)",
      );
    } finally {
      await t.server.close();
    }
  } finally {
    await pg.close();
  }
}

process.stdout.write(
  `${RUNS.toLocaleString("en-US")} runs; ${REPEATS} requests per query; ${cpus().length} CPUs, load ${loadavg()[0]?.toFixed(2)}\n\n`,
);
const l = await local();
printTable(["source", "phase", "wall ms", "CPU ms", "longest hold, wall ms", "longest hold, CPU ms"], l.holds);
const rows = [...l.rows];
const missing = postgresMissing();
if (missing === null) rows.push(...(await team()));
else process.stdout.write(`(team server skipped: ${missing})\n`);
printTable(
  [
    "source",
    "/api/runs",
    "runs matched",
    "median wall ms",
    "max wall ms",
    "CPU ms / request (this process)",
    "longest hold, wall ms",
    "longest hold, CPU ms",
  ],
  rows,
);
const firstReadCpu = Number(l.holds[1]?.[3]);
const filteredCpu = Number(l.rows[0]?.[5]);
process.stdout.write(
  `A filtered page from the index vs. reading every store, in CPU: ${(firstReadCpu / filteredCpu).toFixed(0)}× less (targets: ≤ 200 ms a list, no hold over 100 ms). Wall figures count the time waiting for a CPU: compare them only on a quiet machine.\n`,
);
