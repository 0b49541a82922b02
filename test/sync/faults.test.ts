/**
 * The server killed -9 mid-ingest and away while the job goes on 150 steps (15 s at least: seven
 * send deadlines, three backoff caps), then restarted; PostgreSQL restarted: the job's loop goes on
 * and the database ends equal to its store, nothing duplicated or missing.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { sleep } from "../../src/core/retry.js";
import { createPool } from "../../src/server/db.js";
import { migrate } from "../../src/server/schema.js";
import { startTeamServer, type TeamServer } from "../../src/server/server.js";
import { createToken } from "../../src/server/tokens.js";
import { runNode, tempDir, waitFor, within } from "../helpers.js";
import { postgresForSuite, postgresMissing } from "../server/postgres.js";
import { assertRunEqual } from "../server/support.js";
import { freePort } from "../transport/support.js";
import { JOB, ServerProcess, points } from "./support.js";

const skip = postgresMissing() ?? false;

describe("live sync through server and database faults", { skip }, () => {
  const pg = postgresForSuite();

  const LONG = { timeout: 170_000 };

  it(
    "the server killed -9 mid-ingest, unreachable for 150 steps (15 s) and restarted; PostgreSQL restarted: the job goes on, the database ends equal",
    LONG,
    async () => {
      const db = await pg.server.createDatabase("faults");
      const pool = createPool({ url: db, max: 2 });
      await migrate(pool);
      const write = await createToken(pool, "proj", "write");
      const server = new ServerProcess(db, await freePort());
      let check: TeamServer | null = null;
      try {
        await server.start();
        const root = tempDir("rankscope-sync-faults-");
        const env = {
          RANKSCOPE_SERVER_URL: server.url,
          RANKSCOPE_SERVER_TOKEN: write,
          RANKSCOPE_SYNC_INTERVAL_MS: "200",
          RANKSCOPE_SYNC_SEND_DEADLINE_MS: "2000",
          RANKSCOPE_SYNC_FINISH_DEADLINE_MS: "120000",
        };
        let progress = "";
        const running = runNode(
          [JOB],
          {
            RANKSCOPE_ROOT: root,
            RANKSCOPE_EXPERIMENT: "faults",
            RANKSCOPE_TRIAL: "long",
            JOB_STEPS: "400",
            JOB_PAUSE_MS: "100",
            NO_COLOR: "1",
            ...env,
          },
          { raw: true, deadlineMs: 500_000, onStdout: (text) => (progress = text) },
        );
        const stepSeen = (): number =>
          Math.max(-1, ...[...progress.matchAll(/^step (\d+)$/gm)].map((m) => Number(m[1])));
        await waitFor(async () => stepSeen() >= 50 && (await points(pool)) > 0, {
          timeoutMs: 120_000,
          what: "the job to reach step 50 with points on the server",
        });
        // Killed -9 while the sync sends a batch every 200 ms, and away while the job's loop goes on
        // 150 steps (at 100 ms a step, 15 s at least: seven 2 s send deadlines, each pass failing,
        // and past the retries' 5 s backoff cap). A loop held up by the outage never gets there.
        await server.kill();
        const atKill = stepSeen();
        await waitFor(() => stepSeen() >= atKill + 150, {
          timeoutMs: 120_000,
          what: `the job's loop to go on 150 steps while the server is away (from step ${atKill})`,
        });
        await server.start();
        await waitFor(async () => stepSeen() >= atKill + 200, {
          timeoutMs: 200_000,
          what: "the job to go on after the server came back",
        });
        // PostgreSQL restarted under the server and the sync.
        await pg.server.stopServer("fast");
        await sleep(3_000);
        await pg.server.startServer();
        const ended = await within(running, { timeoutMs: 400_000, what: "the job to finish" });
        assert.equal(ended.code, 0, ended.stderr.slice(-3000));
        assert.match(ended.stdout, /"steps":400/);
        assert.match(ended.stderr, /the sync of .* failed/, "the outage was reported");
        check = await startTeamServer({ db, port: 0, log: false });
        await assertRunEqual(check, join(root, "faults", "long"));
      } finally {
        await server.kill();
        await check?.close();
        await pool.end();
      }
    },
  );
});
