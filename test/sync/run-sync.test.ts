/**
 * A run's store sent to a real team server over a real PostgreSQL by `RunSync` (what the job's
 * live sync and `rankscope sync` run): everything a run holds arrives equal, value by value; a
 * second sync changes nothing; an interrupted one completes; a resumed run is mirrored.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { RunSync } from "../../src/sync/run-sync.js";
import { tempDir } from "../helpers.js";
import { Postgres, postgresMissing } from "../server/postgres.js";
import { assertRunEqual, serverWithTokens } from "../server/support.js";
import { openRun, seedFinishedRun } from "../ui/seed.js";

const skip = postgresMissing() ?? false;

describe("RunSync to a team server", { skip }, () => {
  let pg: Postgres;
  before(async () => {
    pg = await Postgres.start();
  });
  after(async () => {
    await pg?.close();
  });

  it("sends every kind of data of a run (alert events too), equal value by value, and a second sync changes nothing", async () => {
    const { server, write } = await serverWithTokens(pg);
    try {
      const root = tempDir("rankscope-sync-");
      const runDir = seedFinishedRun(root, "exp", "base", 120, true);
      const sync = new RunSync({ runDir, url: server.url, token: write });
      const first = await sync.pass(true);
      assert.ok(first.points > 0 && first.records > 0 && first.fileBytes > 0, JSON.stringify(first));
      const { points } = await assertRunEqual(server, runDir);
      assert.ok(points > 600, `compared ${points} points`);
      const alerts = await server.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM alerts");
      assert.equal(alerts.rows[0]?.n, 4, "the run's four alert events are on the server");
      const chunks = await server.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM chunks");
      const again = await new RunSync({ runDir, url: server.url, token: write }).pass(true);
      assert.deepEqual(
        again,
        { batches: 0, points: 0, records: 0, fileBytes: 0, complete: true },
        "a second sync sends nothing",
      );
      const after2 = await server.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM chunks");
      assert.equal(after2.rows[0]?.n, chunks.rows[0]?.n);
      await assertRunEqual(server, runDir);
    } finally {
      await server.close();
    }
  });

  it("sends a step the store wrote again after it was sent (two writers of one line), and mirrors a resumed run", async () => {
    const { server, write } = await serverWithTokens(pg);
    try {
      const root = tempDir("rankscope-sync-rewrite-");
      const w = openRun(root, "exp", "rewrite");
      w.write({
        scalars: [0, 1, 2, 3].map((step) => ({ key: "loss", step, wall: 1000 + step, value: step, rank: 0 })),
        samples: [{ key: "s", step: 3, wall: 1, records: [{ reward: 1 }] }],
      });
      const sync = new RunSync({ runDir: w.options.runDir, url: server.url, token: write });
      await sync.pass();
      // Another writer of rank 0 writes step 2 and 3 again, and the run goes on.
      w.write({ scalars: [2, 3, 4].map((step) => ({ key: "loss", step, wall: 2000 + step, value: -step, rank: 0 })) });
      await sync.pass();
      await assertRunEqual(server, w.options.runDir);
      w.finish();
      // The job restarts from step 2: the store drops steps >= 2, the run logs them again.
      const again = openRun(root, "exp", "rewrite");
      again.close();
      const { StoreWriter } = await import("../../src/store/writer.js");
      const resumed = StoreWriter.open({
        runDir: w.options.runDir,
        role: "controller",
        rank: -1,
        rankName: "controller",
        experiment: "exp",
        trial: "rewrite",
        resumeStep: 2,
      });
      resumed.write({ scalars: [2, 3].map((step) => ({ key: "loss", step, wall: 3000 + step, value: 10 * step })) });
      resumed.finish();
      await sync.pass(true);
      await assertRunEqual(server, w.options.runDir);
    } finally {
      await server.close();
    }
  });
});
