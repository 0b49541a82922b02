/**
 * "Servers are stateless behind a load balancer", shown rather than promised: two `rankscope
 * server` processes (the built CLI) started at once on one fresh PostgreSQL database, Debian's
 * HAProxy in front of them with the configuration docs/server.md shows (round robin, health
 * checks on /readyz), three jobs syncing live through HAProxy. One server is killed -9 while the
 * jobs sync through both; the jobs finish through the other. Through the balancer afterwards, every
 * point each job recorded is there exactly once with the value it had, the jobs reported nothing
 * left behind, and the dashboard's endpoints answered throughout.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { join } from "node:path";
import { describe, it } from "node:test";
import { registerDrain } from "../../src/core/lifecycle.js";
import { createPool } from "../../src/server/db.js";
import { startTeamServer, type TeamServer } from "../../src/server/server.js";
import { createToken } from "../../src/server/tokens.js";
import { WIRE_VERSION, encodeBatch } from "../../src/sync/wire.js";
import { REPO_ROOT, runNode, tempDir, waitFor, within, type ChildResult } from "../helpers.js";
import { ServerProcess } from "../sync/support.js";
import { freePort } from "../transport/support.js";
import { postgresForSuite, postgresMissing } from "./postgres.js";
import { assertRunEqual } from "./support.js";

function haproxyMissing(): string | null {
  try {
    execFileSync("haproxy", ["-v"], { stdio: "ignore" });
    return null;
  } catch {
    return "HAProxy is not installed (Debian: apt-get install haproxy, or bash scripts/install-system-deps.sh)";
  }
}

const skip = postgresMissing() ?? haproxyMissing() ?? false;

const JOB = join(REPO_ROOT, "test/fixtures/balancer-job.mjs");
/** Each job's steps at least; it goes on until it went on AFTER_KILL steps past the kill. */
const STEPS = 100;
const AFTER_KILL = 60;
const KEYS = 4;
const JOBS = 3;

/**
 * docs/server.md's HAProxy configuration (its ```haproxy block, read from the page, so the page
 * shows what runs) on the test's ports: its `bind` on `port`, its `server` lines replaced by
 * `servers`; and a stats page (CSV) on `statsPort`.
 */
function haproxyConfig(port: number, statsPort: number, servers: readonly number[]): string {
  const page = readFileSync(join(REPO_ROOT, "docs/server.md"), "utf8");
  const block = /^```haproxy\n([\s\S]*?)^```$/m.exec(page)?.[1];
  assert.ok(block !== undefined, "docs/server.md shows an HAProxy configuration");
  const lines = block.split("\n").filter((l) => !/^\s*server /.test(l));
  assert.ok(
    lines.some((l) => /^\s*bind :\d+/.test(l)),
    "the configuration binds a port",
  );
  assert.equal(lines.filter((l) => /^\S/.test(l)).at(-1), "backend servers", "its last section is the backend");
  return [
    ...lines.map((l) => l.replace(/^(\s*)bind :\d+/, `$1bind 127.0.0.1:${port}`)),
    ...servers.map((p, i) => `  server s${i} 127.0.0.1:${p} check`),
    "listen stats",
    `  bind 127.0.0.1:${statsPort}`,
    "  stats enable",
    "  stats uri /stats",
    "",
  ].join("\n");
}

/** HAProxy in the foreground (`-db`) on a free port, in front of `servers`. */
async function startHaproxy(
  servers: readonly number[],
): Promise<{ url: string; stats: string; child: ChildProcess; output: () => string }> {
  const port = await freePort();
  const statsPort = await freePort();
  const config = join(tempDir("rankscope-haproxy-"), "haproxy.cfg");
  writeFileSync(config, haproxyConfig(port, statsPort, servers));
  execFileSync("haproxy", ["-c", "-q", "-f", config], { stdio: ["ignore", "ignore", "pipe"], timeout: 30_000 });
  const child = spawn("haproxy", ["-db", "-f", config], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-10_000)));
  child.stderr?.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-10_000)));
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`HAProxy exited: ${out.slice(-1000)}`);
      return (await fetch(`${url}/readyz`).catch(() => null))?.ok === true;
    },
    { timeoutMs: 60_000, what: `HAProxy on ${port} to pass requests to a ready server (${out.slice(-300)})` },
  );
  return { url, stats: `http://127.0.0.1:${statsPort}/stats;csv`, child, output: () => out };
}

/** HAProxy's stats (its CSV) of each server of the backend and the backend itself, by name (`s0`, `BACKEND`). */
async function balancerStats(url: string): Promise<Map<string, Record<string, string>>> {
  const text = await (await fetch(url, { signal: AbortSignal.timeout(30_000) })).text();
  const [head = "", ...rows] = text.replace(/^# /, "").trim().split("\n");
  const names = head.split(",");
  const out = new Map<string, Record<string, string>>();
  for (const row of rows) {
    const cells = row.split(",");
    const fields = Object.fromEntries(names.map((n, i) => [n, cells[i] ?? ""]));
    if (fields["pxname"] === "servers") out.set(fields["svname"] ?? "", fields);
  }
  return out;
}

/** The counters a reader of the test's output wants: requests, errors, retries, redispatches, state. */
function describeStats(stats: Map<string, Record<string, string>>): string {
  return [...stats]
    .map(
      ([name, f]) =>
        `${name}: ${["status", "stot", "econ", "eresp", "wretr", "wredis", "hrsp_2xx", "hrsp_5xx"].map((n) => `${n}=${f[n] ?? ""}`).join(" ")}`,
    )
    .join("; ");
}

/** One Prometheus metric of one server, summed over its labels. */
async function metric(url: string, name: string): Promise<number> {
  const answer = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(30_000) });
  let total = 0;
  for (const line of (await answer.text()).split("\n"))
    if (line.startsWith(name)) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  return total;
}

/** One request of the dashboard's poller: where, when (before or after the kill), and its status (0: no answer). */
interface Poll {
  path: string;
  /** Answered (or failed) after the kill: a request waiting on the killed server counts here. */
  afterKill: boolean;
  status: number;
  why: string;
}

/**
 * Polls `/healthz` and `/api/runs` through the balancer, as an open dashboard does, until
 * stopped; every answer is kept.
 */
function pollDashboard(
  url: string,
  token: string,
  killed: () => boolean,
): { stop: () => Promise<void>; polls: Poll[] } {
  const polls: Poll[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      for (const path of ["/healthz", "/api/runs"]) {
        try {
          const answer = await fetch(`${url}${path}`, {
            headers: { Authorization: `Bearer ${token}` },
            signal: AbortSignal.timeout(30_000),
          });
          const text = await answer.text();
          polls.push({ path, afterKill: killed(), status: answer.status, why: text.slice(0, 200) });
        } catch (error) {
          polls.push({ path, afterKill: killed(), status: 0, why: String(error) });
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return {
    polls,
    stop: async () => {
      running = false;
      await within(loop, { timeoutMs: 60_000, what: "the dashboard poller to stop" });
    },
  };
}

/** A gzipped batch of one global scalar series `key` continuing from step `after` with `steps`. */
function scalarBatch(run: string, key: string, after: number | null, steps: number[]): Buffer {
  const s = Float64Array.from(steps);
  return gzipSync(
    encodeBatch({
      header: {
        v: WIRE_VERSION,
        run,
        series: [{ kind: "scalar", key, reduce: "mean", rank: -1, after, cursor: steps.at(-1) ?? 0, n: steps.length }],
        records: [],
        files: [],
      },
      columns: [{ steps: s, walls: s.map((x) => 1_700_000_000_000 + x), values: s.map((x) => x * 10) }],
      fileBytes: [],
    }),
  );
}

/** POST a batch to one server; its status and answer. */
async function send(url: string, token: string, body: Buffer): Promise<{ status: number; answer: unknown }> {
  const r = await fetch(`${url}/api/ingest/v1/batch`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Encoding": "gzip" },
    body: new Uint8Array(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: r.status, answer: await r.json().catch(() => null) };
}

describe("two servers behind a load balancer", { skip }, () => {
  const postgres = postgresForSuite();

  it(
    "one of two rankscope servers behind HAProxy killed -9 while three jobs sync: nothing lost or doubled, the dashboard answers throughout",
    { timeout: 600_000 },
    async (t) => {
      const db = await postgres.server.createDatabase("balanced");
      const servers = [new ServerProcess(db, await freePort()), new ServerProcess(db, await freePort())];
      let balancer: ChildProcess | null = null;
      // Whatever this test started is killed if the test process ends early (a failure, a timeout).
      const unregister = registerDrain({
        name: "the balancer test's servers and HAProxy",
        exit: () => {
          for (const child of [balancer, ...servers.map((s) => s.child)]) child?.kill("SIGKILL");
        },
      });
      const pool = createPool({ url: db, max: 2 });
      let check: TeamServer | null = null;
      let jobsDone = "";
      try {
        // Both at once on a fresh database: each migrates when it starts (under the advisory lock).
        await Promise.all(servers.map((s) => s.start()));
        const write = await createToken(pool, "proj", "write");
        const read = await createToken(pool, "proj", "read");
        const haproxy = await startHaproxy(servers.map((s) => s.port));
        balancer = haproxy.child;

        let killed = false;
        const dashboard = pollDashboard(haproxy.url, read, () => killed);
        const root = tempDir("rankscope-balanced-");
        jobsDone = join(root, "jobs-done");
        const progress: string[] = Array.from({ length: JOBS }, () => "");
        const jobs: Promise<ChildResult>[] = [];
        for (let j = 0; j < JOBS; j++) {
          jobs.push(
            runNode(
              [JOB],
              {
                RANKSCOPE_ROOT: root,
                RANKSCOPE_EXPERIMENT: "balanced",
                RANKSCOPE_TRIAL: `job${j}`,
                RANKSCOPE_SERVER_URL: haproxy.url,
                RANKSCOPE_SERVER_TOKEN: write,
                RANKSCOPE_SYNC_INTERVAL_MS: "200",
                RANKSCOPE_SYNC_FINISH_DEADLINE_MS: "240000",
                JOB_STEPS: String(STEPS),
                JOB_UNTIL_FILE: jobsDone,
                JOB_KEYS: String(KEYS),
                JOB_BASE: String(j * 1_000_000),
                JOB_PAUSE_MS: "60",
                NO_COLOR: "1",
              },
              { raw: true, deadlineMs: 500_000, onStdout: (text) => (progress[j] = text) },
            ),
          );
        }
        const stepOf = (j: number): number =>
          Math.max(-1, ...[...(progress[j] ?? "").matchAll(/^step (\d+)$/gm)].map((m) => Number(m[1])));

        // Both servers take batches (the balancer shares the jobs' syncs between them) before one dies.
        await waitFor(
          async () =>
            [0, 1, 2].every((j) => stepOf(j) >= 60) &&
            (await metric(servers[0]?.url ?? "", "rankscope_server_ingest_batches_total")) > 0 &&
            (await metric(servers[1]?.url ?? "", "rankscope_server_ingest_batches_total")) > 0,
          { timeoutMs: 240_000, what: "every job past step 60, with batches applied on both servers" },
        );
        // Frozen (SIGSTOP) until HAProxy's health checks mark it down with requests of the jobs'
        // syncs or the dashboard still waiting on it, then killed -9: the kill lands with requests
        // in flight (unread, or a batch in an open transaction), not between two of them.
        const victim = servers[0]?.child?.pid;
        assert.ok(victim !== undefined);
        process.kill(victim, "SIGSTOP");
        const inFlight = await waitFor(
          async () => {
            const s0 = (await balancerStats(haproxy.stats)).get("s0");
            const waiting = Number(s0?.["scur"] ?? 0);
            return s0?.["status"]?.startsWith("DOWN") === true && waiting > 0 ? waiting : 0;
          },
          { timeoutMs: 60_000, what: "the frozen server marked down with requests in flight on it", intervalMs: 100 },
        );
        const atKill = [0, 1, 2].map(stepOf);
        await servers[0]?.kill();
        killed = true;
        // The jobs go on through the other server, each AFTER_KILL steps past the kill, then end.
        await waitFor(() => [0, 1, 2].every((j) => stepOf(j) >= (atKill[j] ?? 0) + AFTER_KILL), {
          timeoutMs: 240_000,
          what: `every job ${AFTER_KILL} steps past the kill (at steps ${atKill.join(", ")})`,
        });
        writeFileSync(jobsDone, "");

        const results = await within(Promise.all(jobs), { timeoutMs: 500_000, what: "the jobs to finish" });
        const stepsOf: number[] = [];
        for (const [j, r] of results.entries()) {
          assert.equal(r.code, 0, `job${j}: ${r.stderr.slice(-3000)}`);
          const steps = Number(/"steps":(\d+)/.exec(r.stdout)?.[1]);
          assert.ok(steps >= STEPS && steps > (atKill[j] ?? 0) + AFTER_KILL, `job${j} ran every step: ${r.stdout}`);
          stepsOf.push(steps);
          assert.doesNotMatch(r.stderr, /not everything of/, `job${j} left nothing for rankscope sync`);
        }

        // Every point of every job, through the balancer (the remaining server), exactly once and equal.
        const get = async (path: string): Promise<unknown> => {
          const answer = await fetch(`${haproxy.url}${path}`, {
            headers: { Authorization: `Bearer ${read}` },
            signal: AbortSignal.timeout(30_000),
          });
          assert.equal(answer.status, 200, `${path}: ${answer.status}`);
          return answer.json();
        };
        for (let j = 0; j < JOBS; j++) {
          const expectedSteps = Array.from({ length: stepsOf[j] ?? 0 }, (_, s) => s);
          for (let k = 0; k < KEYS; k++) {
            const key = `train/m${k}`;
            const series = await get(
              `/api/series?run=${encodeURIComponent(`balanced/job${j}`)}&key=${encodeURIComponent(key)}&maxPoints=2000`,
            );
            assert.ok(typeof series === "object" && series !== null && "steps" in series && "values" in series);
            assert.deepEqual(series.steps, expectedSteps, `job${j} ${key}: every step once, in order`);
            assert.deepEqual(
              series.values,
              expectedSteps.map((s) => j * 1_000_000 + k * 100_000 + s),
              `job${j} ${key}: the values recorded`,
            );
          }
        }
        const runs = await get("/api/runs");
        assert.ok(typeof runs === "object" && runs !== null && "runs" in runs && Array.isArray(runs.runs));
        assert.deepEqual(
          runs.runs.map((r: unknown) => (typeof r === "object" && r !== null && "id" in r ? r.id : null)).sort(),
          Array.from({ length: JOBS }, (_, j) => `balanced/job${j}`),
          "the runs list holds the three runs",
        );
        // And the database equals each job's store in full (every series, times included).
        check = await startTeamServer({ db, port: 0, log: false });
        for (let j = 0; j < JOBS; j++) await assertRunEqual(check, join(root, "balanced", `job${j}`));

        // The dashboard answered before, during and after the kill, every request of it.
        await waitFor(() => dashboard.polls.filter((p) => p.afterKill).length >= 4, {
          timeoutMs: 60_000,
          what: "the dashboard's polls after the kill",
        });
        await dashboard.stop();
        for (const path of ["/healthz", "/api/runs"]) {
          for (const afterKill of [false, true]) {
            const mine = dashboard.polls.filter((p) => p.path === path && p.afterKill === afterKill);
            assert.ok(mine.length > 0, `${path} was answered ${afterKill ? "after" : "before"} the kill`);
            const failed = mine.filter((p) => p.status !== 200);
            assert.deepEqual(
              failed,
              [],
              `${path}, answers ${afterKill ? "after" : "before"} the kill: ${failed.length} of ${mine.length} requests failed`,
            );
          }
        }
        assert.equal(servers[1]?.child?.exitCode, null, "the other server still runs");
        // What the kill cost, for the record (not asserted: it depends on where the kill fell).
        const syncFailures = results.map((r) => r.stderr.match(/the sync of .* failed/g)?.length ?? 0);
        t.diagnostic(
          `jobs' steps at the kill: ${atKill.join(", ")}; sync passes that failed: ${syncFailures.join(", ")}`,
        );
        t.diagnostic(`requests in flight on the killed server: ${inFlight}`);
        t.diagnostic(`HAProxy: ${describeStats(await balancerStats(haproxy.stats))}`);
      } finally {
        // The jobs end (they go on until told), also when a wait above failed.
        if (jobsDone !== "") writeFileSync(jobsDone, "");
        balancer?.kill("SIGKILL");
        await Promise.all(servers.map((s) => s.kill()));
        await check?.close();
        await pool.end();
        unregister();
      }
    },
  );
  it("a batch one server stored but whose answer was lost, sent again to the other server, is stored once", async () => {
    const db = await postgres.server.createDatabase("resent");
    const [a, b] = await Promise.all([
      startTeamServer({ db, port: 0, log: false }),
      startTeamServer({ db, port: 0, log: false }),
    ]);
    try {
      const write = await createToken(a.pool, "proj", "write");
      const read = await createToken(a.pool, "proj", "read");
      const first = scalarBatch("resent/run", "loss", null, [0, 1, 2, 3, 4]);
      const second = scalarBatch("resent/run", "loss", 4, [5, 6, 7]);
      assert.deepEqual(await send(a.url, write, first), {
        status: 200,
        answer: { points: 5, records: 0, fileBytes: 0, refused: [] },
      });
      // The answer lost on the way back (server a died): the sync sends the batch again, the balancer
      // to b; then the next one, to either.
      assert.deepEqual(await send(b.url, write, first), {
        status: 200,
        answer: { points: 0, records: 0, fileBytes: 0, refused: [] },
      });
      assert.deepEqual(await send(a.url, write, second), {
        status: 200,
        answer: { points: 3, records: 0, fileBytes: 0, refused: [] },
      });
      assert.deepEqual(await send(b.url, write, second), {
        status: 200,
        answer: { points: 0, records: 0, fileBytes: 0, refused: [] },
      });
      for (const server of [a, b]) {
        const answer = await fetch(`${server.url}/api/series?run=resent/run&key=loss`, {
          headers: { Authorization: `Bearer ${read}` },
          signal: AbortSignal.timeout(30_000),
        });
        const series: unknown = await answer.json();
        assert.ok(typeof series === "object" && series !== null && "steps" in series && "values" in series);
        assert.deepEqual(series.steps, [0, 1, 2, 3, 4, 5, 6, 7], "every step once");
        assert.deepEqual(series.values, [0, 10, 20, 30, 40, 50, 60, 70]);
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
