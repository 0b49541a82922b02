/**
 * A job whose server is gone at its end (the rest counted and left for `rankscope sync`), and
 * `rankscope sync` twice and interrupted: the database ends equal to the store, value by value.
 * (Each test file must finish within the suite's 180 s: the 8 jobs at once are `team.test.ts`, the
 * server and database faults `faults.test.ts`.)
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, it } from "node:test";
import { StoreWriter } from "../../src/store/writer.js";
import { runNode, tempDir, waitFor, within } from "../helpers.js";
import { postgresForSuite, postgresMissing } from "../server/postgres.js";
import { assertRunEqual, serverWithTokens } from "../server/support.js";
import { freePort } from "../transport/support.js";
import { CLI, job, points } from "./support.js";

const skip = postgresMissing() ?? false;

describe("live sync: the server gone, rankscope sync", { skip }, () => {
  const pg = postgresForSuite();

  const LONG = { timeout: 170_000 };

  it("the server gone at the job's end: the job finishes, the rest is counted and left for rankscope sync, which completes it once", async () => {
    const { server, write } = await serverWithTokens(pg.server);
    try {
      const root = tempDir("rankscope-sync-gone-");
      const nobody = `http://127.0.0.1:${await freePort()}`;
      const ran = await job(
        root,
        "offline",
        {
          RANKSCOPE_SERVER_URL: nobody,
          RANKSCOPE_SERVER_TOKEN: write,
          RANKSCOPE_SYNC_INTERVAL_MS: "100",
          RANKSCOPE_SYNC_SEND_DEADLINE_MS: "300",
          RANKSCOPE_SYNC_FINISH_DEADLINE_MS: "1000",
        },
        40,
        5,
      );
      assert.equal(ran.code, 0, ran.stderr);
      assert.match(ran.stdout, /"steps":40/);
      assert.match(ran.stderr, /not everything of .*offline reached .* send it with rankscope sync/);
      const runDir = join(root, "faults", "offline");
      const first = await runNode([CLI, "sync", runDir, "--server", server.url, "--token", write], {}, { raw: true });
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /faults\/offline: [1-9]\d* point\(s\)/);
      await assertRunEqual(server, runDir);
      // The job's alert events came too (nonfinite at steps 13, 26, 39 on 8 keys, resolved at 14 and 27,
      // ended with the run for the 8 still NaN at its last step; its alert() at step 3).
      const alerts = await server.pool.query<{ rule: string; n: number }>(
        "SELECT rule, count(*)::int AS n FROM alerts GROUP BY rule ORDER BY rule",
      );
      assert.deepEqual(
        alerts.rows.map((r) => [r.rule, r.n]),
        [
          ["nonfinite", 48],
          ["user", 1],
        ],
      );
      const second = await runNode([CLI, "sync", runDir, "--server", server.url, "--token", write], {}, { raw: true });
      assert.equal(second.code, 0, second.stderr);
      assert.match(
        second.stdout,
        /0 point\(s\), 0 record\(s\), 0 file byte\(s\) sent in 0 batch\(es\) \(the server had it all\)/,
      );
      await assertRunEqual(server, runDir);
    } finally {
      await server.close();
    }
  });

  it("an interrupted rankscope sync (killed -9 after its first batch) completes when run again", LONG, async () => {
    const { server, write } = await serverWithTokens(pg.server);
    try {
      const root = tempDir("rankscope-sync-cut-");
      const w = StoreWriter.open({
        runDir: join(root, "big", "run"),
        role: "controller",
        rank: -1,
        rankName: "controller",
        experiment: "big",
        trial: "run",
      });
      const n = 600_000;
      const steps = Float64Array.from({ length: n }, (_, i) => i);
      for (const key of ["a", "b", "c"])
        w.writeSeries(
          key,
          steps,
          steps.map((s) => 1e12 + s),
          steps.map((s) => Math.sin(s / 1000) + key.charCodeAt(0)),
        );
      w.finish();
      const runDir = join(root, "big", "run");
      const child = spawn(process.execPath, [CLI, "sync", runDir, "--server", server.url, "--token", write], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      await waitFor(async () => (await points(server.pool)) > 0, {
        timeoutMs: 120_000,
        what: "the first batch of rankscope sync to be applied",
      });
      child.kill("SIGKILL");
      await within(exited, { timeoutMs: 10_000, what: "the killed sync to exit" });
      const partial = await points(server.pool);
      assert.ok(partial > 0 && partial < 3 * n, `the sync was cut half-way (${partial} of ${3 * n} points)`);
      const again = await runNode(
        [CLI, "sync", runDir, "--server", server.url, "--token", write],
        {},
        { raw: true, deadlineMs: 300_000 },
      );
      assert.equal(again.code, 0, again.stderr);
      assert.equal(await points(server.pool), 3 * n);
      await assertRunEqual(server, runDir);
    } finally {
      await server.close();
    }
  });
});
