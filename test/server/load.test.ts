/**
 * The team server with ingest saturated (issue 38): the dashboard's reads do not wait behind ingest
 * transactions, and ingest takes no more than its own connections however many batches arrive at
 * once. The batches are held in PostgreSQL (an outside transaction locks the runs table, so each
 * batch's transaction waits there holding its connection) while a user reads, so what is asserted
 * is structural, not a time: the read is answered while every ingest connection is held.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { connect } from "node:net";
import { describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import pg from "pg";
import { WIRE_VERSION, encodeBatch } from "../../src/sync/wire.js";
import { waitFor } from "../helpers.js";
import { postgresForSuite, postgresMissing } from "./postgres.js";
import { createPostgresSource } from "../../src/server/pg-source.js";
import { projectId, serverWithTokens } from "./support.js";

const skip = postgresMissing() ?? false;

/** A gzipped batch of one scalar series of `run`, `loss`: steps `first`…`first + n - 1`, continuing from step `first - 1`. */
function batch(run: string, first = 0, n = 10): Buffer {
  const steps = Float64Array.from({ length: n }, (_, i) => first + i);
  return gzipSync(
    encodeBatch({
      header: {
        v: WIRE_VERSION,
        run,
        series: [
          {
            kind: "scalar",
            key: "loss",
            reduce: "mean",
            rank: -1,
            after: first === 0 ? null : first - 1,
            cursor: first + n - 1,
            n,
          },
        ],
        records: [],
        files: [],
      },
      columns: [{ steps, walls: steps.map((s) => 1_700_000_000_000 + s), values: steps.map((s) => s / 10) }],
      fileBytes: [],
    }),
  );
}

async function send(url: string, token: string, run: string, first = 0, n = 10): Promise<number> {
  const answer = await fetch(`${url}/api/ingest/v1/batch`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Encoding": "gzip" },
    body: new Uint8Array(batch(run, first, n)),
  });
  await answer.text();
  return answer.status;
}

async function get(url: string, path: string, token?: string): Promise<{ status: number; text: string }> {
  const answer = await fetch(
    `${url}${path}`,
    token === undefined ? {} : { headers: { Authorization: `Bearer ${token}` } },
  );
  return { status: answer.status, text: await answer.text() };
}

/** A metric's value on `/metrics` (the line that starts with `series`, labels included). */
async function metric(url: string, series: string): Promise<number | undefined> {
  const line = (await get(url, "/metrics")).text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("team server under ingest load", { skip }, () => {
  const pg_ = postgresForSuite();

  it("answers the dashboard while every ingest connection is held, and works on no more batches than it has ingest connections", async () => {
    const ingestPoolSize = 2;
    const { server, db, write, read } = await serverWithTokens(pg_.server, { poolSize: 2, ingestPoolSize });
    const blocker = new pg.Client({ connectionString: db });
    await blocker.connect();
    try {
      assert.equal(await send(server.url, write, "exp/seen"), 200);
      // Every batch's transaction now waits in PostgreSQL, holding its connection, until COMMIT.
      await blocker.query("BEGIN");
      await blocker.query("LOCK TABLE runs IN SHARE MODE");
      const batches = 6;
      const sent = Array.from({ length: batches }, (_, i) => send(server.url, write, `exp/job${i}`));
      await waitFor(
        async () =>
          (await metric(server.url, 'rankscope_server_ingest_batches_in_progress{state="active"}')) ===
            ingestPoolSize &&
          (await metric(server.url, 'rankscope_server_ingest_batches_in_progress{state="waiting"}')) ===
            batches - ingestPoolSize,
        { timeoutMs: 20_000, what: `${ingestPoolSize} batches worked on and the rest waiting` },
      );
      // Ingest holds exactly its own connections, each waiting on the lock.
      const held = await blocker.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'rankscope-server-ingest' AND wait_event_type = 'Lock'",
      );
      assert.equal(held.rows[0]?.n, ingestPoolSize, "ingest connections waiting in PostgreSQL");
      assert.equal(await metric(server.url, 'rankscope_server_db_pool_connections{pool="ingest",state="total"}'), 2);

      // The dashboard reads meanwhile: the runs list and a chart's line, answered in full.
      const runs = await get(server.url, "/api/runs", read);
      assert.equal(runs.status, 200, runs.text);
      assert.match(runs.text, /"exp\/seen"/);
      const line = await get(
        server.url,
        `/api/lines?run=exp/seen&lines=${encodeURIComponent(JSON.stringify([["loss", null, null]]))}`,
        read,
      );
      assert.equal(line.status, 200, line.text);
      assert.match(line.text, /"steps":\[0,1,2,3,4,5,6,7,8,9\]/);
      assert.equal(
        await metric(server.url, 'rankscope_server_ingest_batches_in_progress{state="active"}'),
        ingestPoolSize,
        "ingest was still held while the dashboard read",
      );

      await blocker.query("COMMIT");
      assert.deepEqual(await Promise.all(sent), Array<number>(batches).fill(200));
      const stored = await server.pool.query<{ n: number }>("SELECT sum(n)::int AS n FROM series");
      assert.equal(stored.rows[0]?.n, (batches + 1) * 10, "every point of every batch stored");
      // The metrics tell each pool's waits apart.
      assert.ok(((await metric(server.url, 'rankscope_server_db_pool_wait_seconds_count{pool="read"}')) ?? 0) > 0);
      assert.equal(await metric(server.url, 'rankscope_server_db_pool_wait_seconds_count{pool="ingest"}'), batches + 1);
    } finally {
      await blocker.end().catch(() => undefined);
      await server.close();
    }
  });

  it("gives a batch's ingest slot back when its client goes away mid-body, so the next batches are worked on", async () => {
    const { server, write } = await serverWithTokens(pg_.server, { ingestPoolSize: 1 });
    try {
      // Half of a gzipped batch, then the client is gone (a sync killed, a connection reset).
      const body = batch("exp/abandoned", 0, 50_000);
      const socket = connect(Number(new URL(server.url).port), "127.0.0.1");
      await once(socket, "connect");
      socket.write(
        `POST /api/ingest/v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${write}\r\n` +
          `Content-Encoding: gzip\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      socket.write(body.subarray(0, Math.floor(body.length / 2)));
      await waitFor(
        async () => (await metric(server.url, 'rankscope_server_ingest_batches_in_progress{state="active"}')) === 1,
        { timeoutMs: 20_000, what: "the half-sent batch to take the one ingest slot" },
      );
      socket.destroy();
      await waitFor(
        async () => (await metric(server.url, 'rankscope_server_ingest_batches_in_progress{state="active"}')) === 0,
        { timeoutMs: 20_000, what: "the abandoned batch's slot to be given back" },
      );
      assert.equal(await send(server.url, write, "exp/next"), 200, "the next batch is worked on");
      const stored = await server.pool.query<{ n: number }>("SELECT coalesce(sum(n), 0)::int AS n FROM series");
      assert.equal(stored.rows[0]?.n, 10, "the next batch stored, nothing of the abandoned one");
    } finally {
      await server.close();
    }
  });

  it("answers a live chart's read whole when ingest merges the line's chunks between the read's two queries", async () => {
    const { server, write } = await serverWithTokens(pg_.server);
    try {
      assert.equal(await send(server.url, write, "exp/live", 0, 10), 200);
      // Between the read's lookup of the chunks and its fetch of their blobs, the job sends 16
      // more small batches: the server merges the line's small chunks into a full one.
      let raced = false;
      const query = async (text: string, values?: unknown[]): Promise<pg.QueryResult> => {
        if (!raced && text.startsWith("SELECT id, steps, walls, vals FROM chunks")) {
          raced = true;
          for (let i = 0; i < 16; i++) assert.equal(await send(server.url, write, "exp/live", 10 + i, 1), 200);
        }
        return server.pool.query(text, values);
      };
      const racing: pg.Pool = Object.assign(Object.create(server.pool), { query });
      const source = createPostgresSource(racing, await projectId(server));
      const series = await source.series(await source.resolveRun("exp/live", true), "loss", { maxPoints: 1000 });
      assert.ok(raced, "the merge happened inside the read");
      assert.deepEqual(
        series.steps,
        Array.from({ length: 26 }, (_, i) => i),
      );
    } finally {
      await server.close();
    }
  });
});
