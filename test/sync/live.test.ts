/**
 * Jobs syncing live to a team server over a real PostgreSQL, and the faults the issue names: the
 * server killed -9 mid-ingest and restarted, PostgreSQL restarted, the server unreachable for
 * 60 s, the server gone at the job's end (left for `rankscope sync`), `rankscope sync` twice and
 * interrupted. After each, the database equals the jobs' local stores value by value (nothing
 * duplicated, nothing missing), and the jobs' loops went on.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type pg from "pg";
import { StoreWriter } from "../../src/backends/store/writer.js";
import { sleep } from "../../src/core/retry.js";
import { createPool } from "../../src/server/db.js";
import { migrate } from "../../src/server/schema.js";
import { startTeamServer, type TeamServer } from "../../src/server/server.js";
import { createToken } from "../../src/server/tokens.js";
import { REPO_ROOT, runNode, tempDir, waitFor, within } from "../helpers.js";
import { Postgres, postgresMissing } from "../server/postgres.js";
import { assertRunEqual, serverWithTokens } from "../server/support.js";
import { freePort } from "../transport/support.js";

const skip = postgresMissing() ?? false;
const CLI = join(REPO_ROOT, "dist/cli/main.js");
const JOB = join(REPO_ROOT, "test/fixtures/sync-job.mjs");
const TEAM_JOB = join(REPO_ROOT, "test/fixtures/team-job.mjs");

/** A `rankscope server` child process on a fixed port (so it can be restarted there). */
class ServerProcess {
  child: ChildProcess | null = null;
  output = "";
  constructor(
    readonly db: string,
    readonly port: number,
  ) {}
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  async start(): Promise<void> {
    const child = spawn(process.execPath, [CLI, "server", "--db", this.db, "--port", String(this.port)], { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    child.stdout?.on("data", (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
    child.stderr?.on("data", (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
    await waitFor(async () => (await fetch(`${this.url}/readyz`).catch(() => null))?.ok === true, { timeoutMs: 60_000, what: `rankscope server on ${this.port} to be ready (${this.output.slice(-300)})`, intervalMs: 100 });
  }
  async kill(): Promise<void> {
    const child = this.child;
    if (child === null || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await within(exited, { timeoutMs: 10_000, what: "the server to die" });
    this.child = null;
  }
}

/** Start the sync job fixture; resolves with its result line once it exits. */
function job(root: string, trial: string, env: Record<string, string>, steps: number, pauseMs: number, deadlineMs = 300_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runNode([JOB], { RANKSCOPE_ROOT: root, RANKSCOPE_EXPERIMENT: "faults", RANKSCOPE_TRIAL: trial, JOB_STEPS: String(steps), JOB_PAUSE_MS: String(pauseMs), NO_COLOR: "1", ...env }, { raw: true, deadlineMs });
}

async function points(pool: pg.Pool): Promise<number> {
  const r = await pool.query<{ n: number | null }>("SELECT sum(n)::bigint AS n FROM series");
  return r.rows[0]?.n ?? 0;
}

describe("live sync and its faults", { skip }, () => {
  let pgServer: Postgres;
  before(async () => {
    pgServer = await Postgres.start();
  });
  after(async () => {
    await pgServer?.close();
  });

  // Minutes of work on 2 cores (80 processes; a real 60 s outage): longer than the suite's default test timeout.
  const LONG = { timeout: 900_000 };

  it("16 jobs of 4 process ranks each sync to one server: every series equals the job's store", LONG, async () => {
    const { server, write } = await serverWithTokens(pgServer);
    try {
      const root = tempDir("rankscope-sync-16-");
      const env = { RANKSCOPE_ROOT: root, RANKSCOPE_EXPERIMENT: "team", RANKSCOPE_SERVER_URL: server.url, RANKSCOPE_SERVER_TOKEN: write, RANKSCOPE_SYNC_INTERVAL_MS: "500", RANKSCOPE_SYNC_FINISH_DEADLINE_MS: "120000", NO_COLOR: "1" };
      // Started one after another (each once its 4 ranks run), then all 16 run their steps together.
      const go = join(root, "go");
      const jobs: Promise<{ code: number | null; stderr: string }>[] = [];
      for (let i = 0; i < 16; i++) {
        let ready = false;
        jobs.push(runNode([TEAM_JOB], { ...env, RANKSCOPE_TRIAL: `job${i}`, JOB_GO: go, JOB_STEPS: "6" }, { raw: true, deadlineMs: 900_000, onStdout: (text) => (ready = text.includes("ready")) }));
        await waitFor(() => ready, { timeoutMs: 300_000, what: `job ${i} to start its ranks` });
      }
      writeFileSync(go, "");
      const ended = await Promise.all(jobs);
      for (const [i, j] of ended.entries()) assert.equal(j.code, 0, `job ${i}: ${j.stderr.slice(-2000)}`);
      let total = 0;
      for (let i = 0; i < 16; i++) total += (await assertRunEqual(server, join(root, "team", `job${i}`))).points;
      assert.ok(total > 16 * 100, `compared ${total} points`);
      const kinds = await server.pool.query<{ kind: string }>("SELECT DISTINCT kind FROM keys ORDER BY kind");
      assert.deepEqual(kinds.rows.map((r) => r.kind), ["histogram", "sample", "scalar", "stream", "system"]);
      const ranks = await server.pool.query<{ n: number }>("SELECT count(DISTINCT rank)::int AS n FROM series");
      assert.equal(ranks.rows[0]?.n, 5, "the global line and 4 ranks");
    } finally {
      await server.close();
    }
  });

  it("the server gone at the job's end: the job finishes, the rest is counted and left for rankscope sync, which completes it once", async () => {
    const { server, write } = await serverWithTokens(pgServer);
    try {
      const root = tempDir("rankscope-sync-gone-");
      const nobody = `http://127.0.0.1:${await freePort()}`;
      const ran = await job(root, "offline", { RANKSCOPE_SERVER_URL: nobody, RANKSCOPE_SERVER_TOKEN: write, RANKSCOPE_SYNC_INTERVAL_MS: "100", RANKSCOPE_SYNC_SEND_DEADLINE_MS: "300", RANKSCOPE_SYNC_FINISH_DEADLINE_MS: "1000" }, 40, 5);
      assert.equal(ran.code, 0, ran.stderr);
      assert.match(ran.stdout, /"steps":40/);
      assert.match(ran.stderr, /not everything of .*offline reached .* send it with rankscope sync/);
      const runDir = join(root, "faults", "offline");
      const first = await runNode([CLI, "sync", runDir, "--server", server.url, "--token", write], {}, { raw: true });
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /faults\/offline: [1-9]\d* point\(s\)/);
      await assertRunEqual(server, runDir);
      const second = await runNode([CLI, "sync", runDir, "--server", server.url, "--token", write], {}, { raw: true });
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stdout, /0 point\(s\), 0 record\(s\), 0 file byte\(s\) sent in 0 batch\(es\) \(the server had it all\)/);
      await assertRunEqual(server, runDir);
    } finally {
      await server.close();
    }
  });

  it("an interrupted rankscope sync (killed -9 after its first batch) completes when run again", LONG, async () => {
    const { server, write } = await serverWithTokens(pgServer);
    try {
      const root = tempDir("rankscope-sync-cut-");
      const w = StoreWriter.open({ runDir: join(root, "big", "run"), role: "controller", rank: -1, rankName: "controller", experiment: "big", trial: "run" });
      const n = 600_000;
      const steps = Float64Array.from({ length: n }, (_, i) => i);
      for (const key of ["a", "b", "c"]) w.writeSeries(key, steps, steps.map((s) => 1e12 + s), steps.map((s) => Math.sin(s / 1000) + key.charCodeAt(0)));
      w.finish();
      const runDir = join(root, "big", "run");
      const child = spawn(process.execPath, [CLI, "sync", runDir, "--server", server.url, "--token", write], { stdio: ["ignore", "pipe", "pipe"] });
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      await waitFor(async () => (await points(server.pool)) > 0, { timeoutMs: 120_000, what: "the first batch of rankscope sync to be applied" });
      child.kill("SIGKILL");
      await within(exited, { timeoutMs: 10_000, what: "the killed sync to exit" });
      const partial = await points(server.pool);
      assert.ok(partial > 0 && partial < 3 * n, `the sync was cut half-way (${partial} of ${3 * n} points)`);
      const again = await runNode([CLI, "sync", runDir, "--server", server.url, "--token", write], {}, { raw: true, deadlineMs: 300_000 });
      assert.equal(again.code, 0, again.stderr);
      assert.equal(await points(server.pool), 3 * n);
      await assertRunEqual(server, runDir);
    } finally {
      await server.close();
    }
  });

  it("the server killed -9 mid-ingest, unreachable for 60 s and restarted; PostgreSQL restarted: the job goes on, the database ends equal", LONG, async () => {
    const db = await pgServer.createDatabase("faults");
    const pool = createPool({ url: db, max: 2 });
    await migrate(pool);
    const write = await createToken(pool, "proj", "write");
    const server = new ServerProcess(db, await freePort());
    let check: TeamServer | null = null;
    try {
      await server.start();
      const root = tempDir("rankscope-sync-faults-");
      const env = { RANKSCOPE_SERVER_URL: server.url, RANKSCOPE_SERVER_TOKEN: write, RANKSCOPE_SYNC_INTERVAL_MS: "200", RANKSCOPE_SYNC_SEND_DEADLINE_MS: "2000", RANKSCOPE_SYNC_FINISH_DEADLINE_MS: "120000" };
      let progress = "";
      const running = runNode([JOB], { RANKSCOPE_ROOT: root, RANKSCOPE_EXPERIMENT: "faults", RANKSCOPE_TRIAL: "long", JOB_STEPS: "900", JOB_PAUSE_MS: "100", NO_COLOR: "1", ...env }, { raw: true, deadlineMs: 500_000, onStdout: (text) => (progress = text) });
      const stepSeen = (): number => Math.max(-1, ...[...progress.matchAll(/^step (\d+)$/gm)].map((m) => Number(m[1])));
      await waitFor(async () => stepSeen() >= 50 && (await points(pool)) > 0, { timeoutMs: 120_000, what: "the job to reach step 50 with points on the server" });
      // Killed -9 while the sync sends a batch every 200 ms, and away for 60 s.
      await server.kill();
      const atKill = stepSeen();
      await sleep(60_000);
      assert.ok(stepSeen() >= atKill + 100, `the job's loop went on while the server was away (step ${atKill} → ${stepSeen()})`);
      await server.start();
      await waitFor(async () => stepSeen() >= atKill + 200, { timeoutMs: 200_000, what: "the job to go on after the server came back" });
      // PostgreSQL restarted under the server and the sync.
      await pgServer.stopServer("fast");
      await sleep(3_000);
      await pgServer.startServer();
      const ended = await within(running, { timeoutMs: 400_000, what: "the job to finish" });
      assert.equal(ended.code, 0, ended.stderr.slice(-3000));
      assert.match(ended.stdout, /"steps":900/);
      assert.match(ended.stderr, /the sync of .* failed/, "the outage was reported");
      check = await startTeamServer({ db, port: 0, log: false });
      await assertRunEqual(check, join(root, "faults", "long"));
    } finally {
      await server.kill();
      await check?.close();
      await pool.end();
    }
  });
});
