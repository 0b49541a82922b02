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
import { seedFinishedRun } from "../ui/seed.js";

const skip = postgresMissing() ?? false;

describe("RunSync to a team server", { skip }, () => {
  let pg: Postgres;
  before(async () => {
    pg = await Postgres.start();
  });
  after(async () => {
    await pg?.close();
  });

  it("sends every kind of data of a run, equal value by value, and a second sync changes nothing", async () => {
    const { server, write } = await serverWithTokens(pg);
    try {
      const root = tempDir("rankscope-sync-");
      const runDir = seedFinishedRun(root);
      const sync = new RunSync({ runDir, url: server.url, token: write });
      const first = await sync.pass(true);
      assert.ok(first.points > 0 && first.records > 0 && first.fileBytes > 0, JSON.stringify(first));
      const { points } = await assertRunEqual(server, runDir);
      assert.ok(points > 600, `compared ${points} points`);
      const chunks = await server.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM chunks");
      const again = await new RunSync({ runDir, url: server.url, token: write }).pass(true);
      assert.deepEqual(again, { batches: 0, points: 0, records: 0, fileBytes: 0, complete: true }, "a second sync sends nothing");
      const after2 = await server.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM chunks");
      assert.equal(after2.rows[0]?.n, chunks.rows[0]?.n);
      await assertRunEqual(server, runDir);
    } finally {
      await server.close();
    }
  });
});
