/**
 * The server killed -9 mid-ingest and away while the job goes on 150 steps (15 s at least: seven
 * send deadlines, three backoff caps), then restarted; PostgreSQL stopped until the server failed a
 * batch of the sync for it, then restarted: the job's loop goes on through all of it (it runs until
 * the drill is done, not for a step count guessed to outlast it) and the database ends equal to its
 * store, nothing duplicated or missing.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
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

/**
 * The server's ingest requests so far (its /metrics): batches applied, and those it failed (5xx).
 * A read the server drops (a reset connection while PostgreSQL restarts under a loaded machine) is
 * read again, within 30 s.
 */
async function ingest(url: string): Promise<{ applied: number; failed: number }> {
  let text = "";
  await waitFor(
    async () => {
      try {
        text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
        return true;
      } catch {
        return false;
      }
    },
    { timeoutMs: 30_000, what: `the server's /metrics at ${url}`, intervalMs: 200 },
  );
  let applied = 0;
  let failed = 0;
  for (const line of text.split("\n")) {
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (line.startsWith("rankscope_server_ingest_batches_total")) applied += value;
    if (line.startsWith("rankscope_server_requests_total") && /kind="ingest"/.test(line) && /status="5xx"/.test(line))
      failed += value;
  }
  return { applied, failed };
}

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
      let drillDone = "";
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
        // The job goes on past its 200 steps until the drill has seen everything it checks.
        drillDone = join(root, "drill-done");
        let progress = "";
        const running = runNode(
          [JOB],
          {
            RANKSCOPE_ROOT: root,
            RANKSCOPE_EXPERIMENT: "faults",
            RANKSCOPE_TRIAL: "long",
            JOB_STEPS: "200",
            JOB_UNTIL_FILE: drillDone,
            JOB_PAUSE_MS: "100",
            NO_COLOR: "1",
            ...env,
          },
          { raw: true, deadlineMs: 500_000, onStdout: (text) => (progress = text) },
        );
        const stepSeen = (): number =>
          Math.max(-1, ...[...progress.matchAll(/^step (\d+)$/gm)].map((m) => Number(m[1])));
        await waitFor(async () => stepSeen() >= 20 && (await points(pool)) > 0, {
          timeoutMs: 120_000,
          what: "the job to reach step 20 with points on the server",
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
        await waitFor(async () => stepSeen() >= atKill + 160 && (await ingest(server.url)).applied > 0, {
          timeoutMs: 200_000,
          what: "the job to go on, its sync delivering again, after the server came back",
        });
        // PostgreSQL restarted under the server and the sync: away until the server failed a batch
        // of the sync for it (the sync sends every 200 ms), then back.
        const before = await ingest(server.url);
        await pg.server.stopServer("fast");
        await waitFor(async () => (await ingest(server.url)).failed > before.failed, {
          timeoutMs: 120_000,
          what: `the server to fail a batch of the sync while PostgreSQL is down (server: ${server.output.slice(-1000)})`,
        });
        await pg.server.startServer();
        const atBack = stepSeen();
        const appliedAtBack = (await ingest(server.url)).applied;
        await waitFor(async () => stepSeen() >= atBack + 20 && (await ingest(server.url)).applied > appliedAtBack, {
          timeoutMs: 200_000,
          what: `the job to go on (at step ${stepSeen()}), its sync delivering again, after PostgreSQL came back (server: ${server.output.slice(-1000)})`,
        });
        writeFileSync(drillDone, "");
        const ended = await within(running, { timeoutMs: 400_000, what: "the job to finish" });
        assert.equal(ended.code, 0, ended.stderr.slice(-3000));
        const steps = Number(/"steps":(\d+)/.exec(ended.stdout)?.[1]);
        assert.ok(steps >= 200 && steps > atBack + 20, `the job ran every step (${ended.stdout})`);
        assert.match(ended.stderr, /the sync of .* failed/, "the outage was reported");
        check = await startTeamServer({ db, port: 0, log: false });
        try {
          await assertRunEqual(check, join(root, "faults", "long"));
        } catch (error) {
          // What the job's sync said (a batch left behind names why).
          assert.fail(`${String(error)}\nthe job's stderr: ${ended.stderr.slice(-4000)}`);
        }
      } finally {
        // The job ends (it was going on until the drill was done), also when a wait above failed.
        if (drillDone !== "") writeFileSync(drillDone, "");
        await server.kill();
        await check?.close();
        await pool.end();
      }
    },
  );
});
