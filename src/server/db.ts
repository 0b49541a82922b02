/**
 * The server's connection pools (node-postgres): bounded, every connection with a statement
 * timeout and a lock timeout, so no request holds a connection or a lock forever, each telling
 * how long a connection was waited for and held (the server's metrics); and the one way to run
 * work in a transaction.
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
  /** PostgreSQL's `application_name` of its connections (default `rankscope-server`). */
  readonly name?: string;
  readonly observer?: PoolObserver;
}

/** What a pool tells of its use. */
export interface PoolObserver {
  /** A connection was handed out after `seconds` of waiting for it. */
  waited(seconds: number): void;
  /** A connection went back to the pool after being held `seconds` (a query, or a transaction). */
  held(seconds: number): void;
}

type ConnectCallback = (
  err: Error | undefined,
  client: pg.PoolClient | undefined,
  done: (release?: unknown) => void,
) => void;

/** A pool that times each wait for a connection and each connection's use (`query` connects through `connect` too). */
class ObservedPool extends postgres.Pool {
  private readonly since = new WeakMap<pg.PoolClient, number>();

  constructor(
    config: pg.PoolConfig,
    private readonly observer: PoolObserver,
  ) {
    super(config);
    this.on("release", (_error, client) => {
      const at = this.since.get(client);
      this.since.delete(client);
      if (at !== undefined) observer.held((performance.now() - at) / 1000);
    });
  }

  private got(asked: number, client: pg.PoolClient): void {
    const now = performance.now();
    this.since.set(client, now);
    this.observer.waited((now - asked) / 1000);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<pg.PoolClient> | void {
    const asked = performance.now();
    if (callback === undefined)
      return super.connect().then((client) => {
        this.got(asked, client);
        return client;
      });
    super.connect((error, client, done) => {
      if (error === undefined && client !== undefined) this.got(asked, client);
      callback(error, client, done);
    });
  }
}

/** Every float8 comes back as a JS number, int8 (counts, ids) as a number too: ids stay below 2^53. */
postgres.types.setTypeParser(postgres.types.builtins.INT8, (v) => Number(v));

/** A bounded pool with timeouts on every connection. */
export function createPool(options: PoolOptions): pg.Pool {
  const statementTimeout = options.statementTimeoutMs ?? 30_000;
  const config: pg.PoolConfig = {
    connectionString: options.url,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: statementTimeout,
    lock_timeout: statementTimeout,
    idle_in_transaction_session_timeout: statementTimeout * 2,
    application_name: options.name ?? "rankscope-server",
  };
  const pool = options.observer === undefined ? new postgres.Pool(config) : new ObservedPool(config, options.observer);
  // An idle connection's error (the database restarted) must not crash the server: the pool drops
  // that connection and the next request opens a new one.
  pool.on("error", () => undefined);
  // Nor one of a connection checked out between two queries (a transaction's client while the
  // request inflates or decodes): pg-pool listens only while a connection is idle, and a client's
  // 'error' with no listener ended the whole server when PostgreSQL restarted under load. The
  // client's next query fails instead, and the request with it (a 5xx its sender retries).
  pool.on("connect", (client) => client.on("error", () => undefined));
  return pool;
}

/** The server's two pools, `read` (the dashboard, the API, token checks) and `ingest`, and how to close both. */
export function createServerPools(options: {
  readonly url: string;
  readonly readMax: number;
  readonly ingestMax: number;
  readonly statementTimeoutMs: number;
  readonly observer: (pool: "read" | "ingest") => PoolObserver;
}): { read: pg.Pool; ingest: pg.Pool; end: () => Promise<void> } {
  const { url, statementTimeoutMs } = options;
  const read = createPool({ url, max: options.readMax, statementTimeoutMs, observer: options.observer("read") });
  const ingest = createPool({
    url,
    max: options.ingestMax,
    statementTimeoutMs,
    name: "rankscope-server-ingest",
    observer: options.observer("ingest"),
  });
  return {
    read,
    ingest,
    end: async () => {
      await Promise.all([read.end().catch(() => undefined), ingest.end().catch(() => undefined)]);
    },
  };
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
