/**
 * 8 jobs of a controller and 4 process ranks each, every kind of data, syncing live to one team
 * server over a real PostgreSQL: every series in the database equals the job's store, value by value.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { CONTROLLER_RANK, GLOBAL_RANK } from "../../src/store/read-types.js";
import { runNode, tempDir, waitFor } from "../helpers.js";
import { postgresForSuite, postgresMissing } from "../server/postgres.js";
import { assertRunEqual, serverWithTokens } from "../server/support.js";
import { TEAM_JOB } from "./support.js";

const skip = postgresMissing() ?? false;

describe("8 jobs syncing to one team server", { skip }, () => {
  const pg = postgresForSuite();

  const LONG = { timeout: 170_000 };
  // Eight jobs, 40 processes, write to the server at once; 16 cost the suite twice the CPU
  // (78 s of its 557) for no path the eight do not take.
  const JOBS = 8;

  it("8 jobs of 4 process ranks each sync to one server: every series equals the job's store", LONG, async () => {
    const { server, write } = await serverWithTokens(pg.server);
    try {
      const root = tempDir("rankscope-sync-team-");
      const env = {
        RANKSCOPE_ROOT: root,
        RANKSCOPE_EXPERIMENT: "team",
        RANKSCOPE_SERVER_URL: server.url,
        RANKSCOPE_SERVER_TOKEN: write,
        RANKSCOPE_SYNC_INTERVAL_MS: "500",
        RANKSCOPE_SYNC_FINISH_DEADLINE_MS: "120000",
        NO_COLOR: "1",
      };
      // Started one after another (each once its 4 ranks run), then all 8 run their steps together.
      const go = join(root, "go");
      const jobs: Promise<{ code: number | null; stderr: string }>[] = [];
      for (let i = 0; i < JOBS; i++) {
        let ready = false;
        jobs.push(
          runNode(
            [TEAM_JOB],
            { ...env, RANKSCOPE_TRIAL: `job${i}`, JOB_GO: go, JOB_STEPS: "4" },
            { raw: true, deadlineMs: 900_000, onStdout: (text) => (ready = text.includes("ready")) },
          ),
        );
        await waitFor(() => ready, { timeoutMs: 300_000, what: `job ${i} to start its ranks` });
      }
      writeFileSync(go, "");
      const ended = await Promise.all(jobs);
      for (const [i, j] of ended.entries()) assert.equal(j.code, 0, `job ${i}: ${j.stderr.slice(-2000)}`);
      let total = 0;
      for (let i = 0; i < JOBS; i++) {
        try {
          total += (await assertRunEqual(server, join(root, "team", `job${i}`))).points;
        } catch (error) {
          // What the job said of its sync (it exited 0 either way).
          assert.fail(`${String(error)}\njob ${i}'s stderr: ${ended[i]?.stderr.slice(-3000)}`);
        }
      }
      assert.ok(total > JOBS * 100, `compared ${total} points`);
      const kinds = await server.pool.query<{ kind: string }>("SELECT DISTINCT kind FROM keys ORDER BY kind");
      assert.deepEqual(
        kinds.rows.map((r) => r.kind),
        ["histogram", "sample", "scalar", "stream", "system"],
      );
      const ranks = await server.pool.query<{ rank: number }>("SELECT DISTINCT rank FROM series ORDER BY rank");
      assert.deepEqual(
        ranks.rows.map((r) => r.rank),
        [CONTROLLER_RANK, GLOBAL_RANK, 0, 1, 2, 3],
        "the controller's line, the global line and 4 ranks",
      );
    } finally {
      await server.close();
    }
  });
});
