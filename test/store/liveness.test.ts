/**
 * A killed run does not stay `running` (issue 24, item 3): a run whose processes were all killed
 * reads `crashed` — in the read API, `rankscope runs` and the dashboard's `/api/runs` — as soon as
 * the last one is gone (same host: its pid), or once its writers' heartbeats are older than the
 * bound (another host). Real processes, a real SIGKILL, the built CLI, the real dashboard server.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sqliteDriver } from "../../src/store/sqlite.js";
import { before, describe, test } from "node:test";
import { closeStores, runInfo } from "../../src/store/reader.js";
import { writerGone } from "../../src/store/liveness.js";
import { GLOBAL_RANK, HEARTBEAT_STALE_MS, SCHEMA_VERSION } from "../../src/store/schema.js";
import { StoreWriter } from "../../src/store/writer.js";
import { startDashboard } from "../../src/ui/server.js";
import { runNode, tempDir, waitFor } from "../helpers.js";
import { isAlive } from "../transport/support.js";

/** better-sqlite3's `Database` class, of the build this Node.js runs. */
const Database = sqliteDriver();

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const CLI = join(REPO, "dist", "cli", "main.js");
const KILLED_JOB = fileURLToPath(new URL("./fixtures/killed-job.mjs", import.meta.url));

before(() => {
  if (!existsSync(CLI)) spawnSync("npm", ["run", "build", "--silent"], { cwd: REPO, stdio: "inherit" });
});

describe("a killed run", () => {
  test("kill -9 the controller: once its processes are gone, the read API, `rankscope runs` and the dashboard say crashed, with no rank wrongly named lost", async () => {
    const root = tempDir();
    const runDir = join(root, "killed", "t");
    let pids: number[] = [];
    const result = await runNode(
      [KILLED_JOB, runDir],
      {},
      {
        raw: true,
        onStdout: (out, child) => {
          const ready = /ready (\{.*\})\n/.exec(out);
          if (ready === null || pids.length > 0) return;
          pids = (JSON.parse(ready[1] as string) as { ranks: number[] }).ranks;
          child.kill("SIGKILL");
        },
      },
    );
    assert.equal(result.signal, "SIGKILL", `the job was killed (it printed: ${result.stdout}${result.stderr})`);
    assert.equal(pids.length, 2);
    // Its ranks exit when their IPC channel closes; the run is dead once they are gone.
    await waitFor(() => pids.every((pid) => !isAlive(pid)), {
      timeoutMs: 20_000,
      what: "the killed controller's ranks to exit",
    });

    const run = runInfo(runDir);
    assert.equal(run.status, "crashed");
    assert.deepEqual(
      run.lostRanks,
      [],
      "the ranks ended by themselves; the controller's own per-rank writer is not a lost rank",
    );
    assert.ok(run.endedAt !== null && run.startedAt !== null && run.endedAt >= run.startedAt);
    closeStores();

    const cli = spawnSync(process.execPath, [CLI, "runs", "--root", root], { encoding: "utf8", timeout: 60_000 });
    assert.equal(cli.status, 0, cli.stderr);
    assert.match(cli.stdout, /^killed\s+t\s+crashed\s/m, cli.stdout);

    const dashboard = await startDashboard({ root, port: 0 });
    try {
      const answer = (await (await fetch(new URL("/api/runs", dashboard.url))).json()) as {
        runs: { id: string; status: string }[];
      };
      assert.deepEqual(
        answer.runs.map((r) => `${r.id}:${r.status}`),
        ["killed/t:crashed"],
      );
    } finally {
      await dashboard.close();
    }
  });

  test("a rank writer whose process died is a lost rank; the run stays running while another writer lives", async () => {
    const runDir = tempDir();
    const controller = StoreWriter.open({
      runDir,
      role: "controller",
      rank: GLOBAL_RANK,
      rankName: "Controller",
      experiment: "e",
      trial: "t",
    });
    const crashed = await runNode(
      [fileURLToPath(new URL("./fixtures/rank-writer.ts", import.meta.url)), runDir, "3", "2", "crash"],
      {},
    );
    assert.equal(crashed.code, 0, crashed.stderr);
    const live = runInfo(runDir);
    assert.equal(live.status, "running", "the controller (this process) is alive");
    assert.deepEqual(
      live.lostRanks?.map((l) => `${l.rank}:${l.rankName}:${l.step}`),
      ["3:Trainer_0_r3:null"],
    );
    controller.finish();
    const ended = runInfo(runDir);
    assert.equal(ended.status, "finished", "every writer ended or died, none of them the controller");
    assert.equal(ended.lostRanks?.length, 1);
    closeStores();
  });

  test("the heartbeat rule: a writer on another host is dead once its heartbeat is older than the bound; on this host its pid decides", () => {
    const beat = 1_000_000;
    const elsewhere = { pid: process.pid, host: "another-host.example", startedAt: beat - 5000, heartbeatAt: beat };
    assert.equal(writerGone(elsewhere, beat + HEARTBEAT_STALE_MS), false, "within the bound");
    assert.equal(writerGone(elsewhere, beat + HEARTBEAT_STALE_MS + 1), true, "past the bound");
    const here = { pid: process.pid, host: hostname(), startedAt: Date.now(), heartbeatAt: beat };
    assert.equal(
      writerGone(here, beat + 10 * HEARTBEAT_STALE_MS),
      false,
      "this process lives, whatever its heartbeat says",
    );
    // A pid that now belongs to a process started after the writer registered (reused): dead.
    assert.equal(writerGone({ ...here, startedAt: Date.now() - 3_600_000 * 24 * 365 }), true);
    // An older writer (no host, no heartbeat): never judged dead.
    assert.equal(writerGone({ pid: 1, host: null, startedAt: null, heartbeatAt: null }), false);
  });

  test("a live writer notes its heartbeat; a version-1 store gets the new columns and tables from the next writer", async () => {
    const runDir = tempDir();
    const writer = StoreWriter.open({
      runDir,
      role: "controller",
      rank: GLOBAL_RANK,
      rankName: "Controller",
      experiment: "e",
      trial: "t",
    });
    const db = new Database(join(runDir, "metrics.db"), { readonly: true });
    const first = db.prepare("SELECT heartbeat_at AS h FROM writers").get() as { h: number };
    writer.heartbeat();
    await waitFor(
      () =>
        (db.prepare("SELECT heartbeat_at AS h FROM writers").get() as { h: number }).h > first.h ||
        (writer.heartbeat(), false),
      { timeoutMs: 5000, what: "a newer heartbeat" },
    );
    db.close();
    writer.finish();

    // A store as version 1 wrote it: no host, no heartbeat, no lost_ranks.
    const old = tempDir();
    StoreWriter.open({
      runDir: old,
      role: "controller",
      rank: GLOBAL_RANK,
      rankName: "Controller",
      experiment: "e",
      trial: "t",
    }).close();
    const raw = new Database(join(old, "metrics.db"));
    raw.exec(
      "DROP TABLE lost_ranks; ALTER TABLE writers DROP COLUMN host; ALTER TABLE writers DROP COLUMN heartbeat_at; PRAGMA user_version = 1",
    );
    raw.close();
    assert.equal(runInfo(old).status, "running", "a version-1 writer that did not finish: no heartbeat to judge it by");
    closeStores();
    StoreWriter.open({ runDir: old, role: "rank", rank: 0, rankName: "r0", experiment: "e", trial: "t" }).finish();
    const upgraded = new Database(join(old, "metrics.db"), { readonly: true });
    assert.equal(upgraded.pragma("user_version", { simple: true }), SCHEMA_VERSION);
    assert.deepEqual(
      (upgraded.prepare("SELECT name FROM pragma_table_info('writers')").all() as { name: string }[])
        .map((c) => c.name)
        .slice(-2),
      ["host", "heartbeat_at"],
    );
    upgraded.close();
  });
});
