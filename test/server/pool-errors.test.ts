/**
 * A connection the server holds between two queries (a transaction's client while its request
 * inflates or decodes) whose backend PostgreSQL ends — a restart, an administrator's
 * `pg_terminate_backend` — must not end the server: the client's error is heard, its next query
 * fails (the request with it), and the pool goes on with a new connection.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import pg from "pg";
import { createPool } from "../../src/server/db.js";
import { waitFor } from "../helpers.js";
import { postgresForSuite, postgresMissing } from "./postgres.js";

const skip = postgresMissing() ?? false;

describe("the server's pools when PostgreSQL ends a connection", { skip }, () => {
  const postgres = postgresForSuite();

  it("a checked-out connection's backend ended between queries: no uncaught error, the next query fails, the pool recovers", async () => {
    const url = await postgres.server.createDatabase("pool_errors");
    const pool = createPool({ url, max: 2 });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const client = await pool.connect();
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid;
      // Ended while the client is checked out and idle: without a listener of the pool's own on
      // every connection, its 'error' is uncaught and ends this process (as it ended the server).
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
      // pg's Client marks itself unqueryable as it emits the error.
      await waitFor(() => Reflect.get(client, "_queryable") === false, {
        timeoutMs: 10_000,
        what: "the held client to hear its backend end",
      });
      await assert.rejects(client.query("SELECT 1"), "the held client's next query fails");
      client.release(true);
      assert.equal((await pool.query<{ one: number }>("SELECT 1 AS one")).rows[0]?.one, 1, "the pool goes on");
    } finally {
      await admin.end();
      await pool.end();
    }
  });
});
