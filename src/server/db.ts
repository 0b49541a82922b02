/**
 * The server's connection pool (node-postgres): bounded, every connection with a statement
 * timeout and a lock timeout, so no request holds a connection or a lock forever; and the one
 * way to run work in a transaction.
 */
import type pg from "pg";
import { requireOptional } from "../core/optional-packages.js";

/** node-postgres: an optional peer dependency of rankscope, needed by `rankscope server` only. */
const postgres = requireOptional<typeof import("pg")>("server", "pg");

/** How the pool is sized and bounded. */
interface PoolOptions {
  /** `postgres://user:password@host:port/database` (also `RANKSCOPE_DB_URL`). */
  readonly url: string;
  /** Connections at most (default 10). */
  readonly max?: number;
  /** Longest a statement may run before PostgreSQL cancels it (default 30 s). */
  readonly statementTimeoutMs?: number;
  /** Longest a request waits for a free connection (default 10 s). */
  readonly connectTimeoutMs?: number;
}

/** Every float8 comes back as a JS number, int8 (counts, ids) as a number too: ids stay below 2^53. */
postgres.types.setTypeParser(postgres.types.builtins.INT8, (v) => Number(v));

/** A bounded pool with timeouts on every connection. */
export function createPool(options: PoolOptions): pg.Pool {
  const statementTimeout = options.statementTimeoutMs ?? 30_000;
  const pool = new postgres.Pool({
    connectionString: options.url,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: statementTimeout,
    lock_timeout: statementTimeout,
    idle_in_transaction_session_timeout: statementTimeout * 2,
    application_name: "rankscope-server",
  });
  // An idle connection's error (the database restarted) must not crash the server: the pool drops
  // that connection and the next request opens a new one.
  pool.on("error", () => undefined);
  return pool;
}

/** Run `fn` in a transaction on one connection: committed when it resolves, rolled back when it throws. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query("BEGIN");
    const result = await fn(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    try {
      await client.query("ROLLBACK");
    } catch {
      broken = true;
    }
    throw error;
  } finally {
    client.release(broken);
  }
}

/** A PostgreSQL error's SQLSTATE (`23505`…), or "" for anything else. */
export function sqlState(error: unknown): string {
  return error instanceof Error && "code" in error && typeof error.code === "string" ? error.code : "";
}
