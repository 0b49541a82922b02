/**
 * The team server's Ranks view (issue 22): a real job — 4 thread ranks tracing their steps, one
 * of them slow at every step — writes its per-rank timings to its store; `RunSync` sends them to a
 * team server over a real PostgreSQL, and the server's Ranks view equals the store's, bit for bit,
 * through both `DashboardSource`s (and every other kind of data with them), over HTTP too. A resume
 * removes the timings at and after its step on the server as the store does.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { getOrCreateMetricLogger, spawnRanks } from "../../src/index.js";
import { closeStores, rankTiming } from "../../src/store/reader.js";
import { RunSync } from "../../src/sync/run-sync.js";
import { tempDir } from "../helpers.js";
import { postgresForSuite, postgresMissing } from "../server/postgres.js";
import { assertRunEqual, serverWithTokens } from "../server/support.js";
import type { StepPlan } from "../controller/stragglers/fixtures/straggler-rank.js";

const RANK_MODULE = new URL("../controller/stragglers/fixtures/straggler-rank.ts", import.meta.url);
/**
 * Virtual ms (the fixture's clock, see test/controller/stragglers/thread-ranks.test.ts): 1 s steps,
 * 20 s more for the slow rank, and a 10 s bar, above the lateness the 5 s flush deadline lets through.
 */
const STRAGGLERS = { tolerance: 0.5, minExcessMs: 10_000 };
const skip = postgresMissing() ?? false;

describe("per-rank timings on the team server", { skip }, () => {
  const pg = postgresForSuite();

  it(
    "a job's Ranks view on the server equals its store's, bit for bit, and names the same slow rank",
    { timeout: 150_000 },
    async () => {
      const { server, write, read } = await serverWithTokens(pg.server);
      try {
        // As a run lies under a root (root/experiment/trial), so the local runs list finds it.
        const runDir = join(tempDir("rankscope-sync-timings-"), "ranks", "t1");
        const logger = await getOrCreateMetricLogger({
          runDir,
          experiment: "ranks",
          trial: "t1",
          quiet: true,
          stragglers: STRAGGLERS,
        });
        await logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } });
        const group = await spawnRanks({
          module: RANK_MODULE,
          ranksPerReplica: 4,
          kind: "thread",
          processName: "Trainer",
          logger,
        });
        const slow = 3;
        for (let step = 0; step < 12; step++) {
          const plan: StepPlan = { baseMs: 1000, slowMs: 20_000, slow: [slow] };
          await group.fanout("trainStep", step, plan);
          await logger.flush(step);
        }
        const slowName = group.rankNames[slow] ?? "";
        await logger.shutdown();
        const local = rankTiming(runDir, { maxFlushes: 2000 });
        assert.equal(local.steps.length, 12, "the store holds a flush of timings per step");
        assert.equal(local.ranks.length, 4);

        const pass = await new RunSync({ runDir, url: server.url, token: write }).pass(true);
        assert.ok(pass.records >= 12, `the sync sent the 12 flushes of timings (records ${pass.records})`);
        // Every kind of data, the Ranks view (whole, and its newest 3 flushes) among them.
        await assertRunEqual(server, runDir);

        // What the dashboard asks the server: the slow rank named, with its host, at the newest flush.
        const answer = await fetch(`${server.url}/api/ranks?run=ranks/t1`, {
          headers: { Authorization: `Bearer ${read}` },
        });
        assert.equal(answer.status, 200);
        const view = (await answer.json()) as {
          available: boolean;
          slowest: { rankName: string; host: string }[];
          rows: unknown[];
        };
        assert.equal(view.available, true);
        assert.equal(view.rows.length, 4);
        assert.deepEqual(
          view.slowest.map((s) => s.rankName),
          [slowName],
          "the server's Ranks view names the slow rank, and nobody else",
        );
        assert.ok(
          view.slowest.every((s) => s.host.length > 0),
          "with its host",
        );

        // A second pass sends nothing again: the `timing` cursor is where the store ends.
        const again = await new RunSync({ runDir, url: server.url, token: write }).pass(true);
        assert.equal(again.records, 0);
        const stored = await server.pool.query<{ n: string }>("SELECT count(*) AS n FROM rank_timing");
        assert.equal(Number(stored.rows[0]?.n), 12, "one row per flush, none twice");

        // Restarted from a checkpoint at step 8, another rank now slow: steps 8–9 again, then 10.
        const resumed = await getOrCreateMetricLogger({
          runDir,
          experiment: "ranks",
          trial: "t1",
          quiet: true,
          stragglers: STRAGGLERS,
        });
        await resumed.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } }, { resumeStep: 8 });
        const again2 = await spawnRanks({
          module: RANK_MODULE,
          ranksPerReplica: 4,
          kind: "thread",
          processName: "Trainer",
          logger: resumed,
        });
        for (let step = 8; step < 11; step++) {
          await again2.fanout("trainStep", step, { baseMs: 1000, slowMs: 20_000, slow: [1] } satisfies StepPlan);
          await resumed.flush(step);
        }
        await resumed.shutdown();
        const afterResume = rankTiming(runDir, { maxFlushes: 2000 });
        assert.deepEqual(
          afterResume.steps,
          [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
          "the store: steps 8 and 9 replaced, 10 new, 11 gone",
        );
        await new RunSync({ runDir, url: server.url, token: write }).pass(true);
        // The server dropped its timings at and after step 8 and holds the resumed ones: the Ranks
        // view equals the store's again, and names the new slow rank.
        await assertRunEqual(server, runDir);
        const steps = await server.pool.query<{ step: number }>("SELECT step FROM rank_timing ORDER BY step");
        assert.deepEqual(
          steps.rows.map((r) => Number(r.step)),
          afterResume.steps,
        );
        const resumedView = (await (
          await fetch(`${server.url}/api/ranks?run=ranks/t1`, { headers: { Authorization: `Bearer ${read}` } })
        ).json()) as { slowest: { rankName: string }[] };
        assert.deepEqual(
          resumedView.slowest.map((s) => s.rankName),
          [again2.rankNames[1]],
          "the resumed run's slow rank",
        );
      } finally {
        closeStores();
        await server.close();
      }
    },
  );
});
