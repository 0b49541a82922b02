/**
 * `rankscope server`: the team server. A Node HTTP(S) server over PostgreSQL serving the same web
 * dashboard and JSON API as `rankscope ui` (the `DashboardApi` route table over the PostgreSQL
 * `DashboardSource` of the caller's project), the ingest API the jobs' sync sends to, and
 * `/healthz`, `/readyz`, `/metrics`. It keeps no state of its own between requests (everything is
 * in PostgreSQL), so several can run behind a load balancer; each migrates the schema at start
 * under an advisory lock.
 *
 * Two connection pools: the dashboard's reads (and token checks, `/readyz`) use one, ingest the
 * other, so a read never waits for a connection behind ingest transactions. Ingest batches are
 * worked on at most as many at once as the ingest pool has connections (`IngestGate`: the rest
 * wait a bounded time in a bounded queue, then 503 with `Retry-After`).
 *
 * A request meets, in order: the rate limit (per token, else per address; 429), the credentials
 * (`auth.ts`; 401/403), the method, then the route. Answers carry the dashboard's security headers;
 * a failure inside the server is a 500 without details (the log has them, never a secret), and is
 * counted. Logs are JSON lines (pino): method, path with any token redacted, status, duration,
 * project.
 */
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Socket } from "node:net";
import pino from "pino";
import type pg from "pg";
import { describeError } from "../core/diagnostics.js";
import { redactedRequestPath, sendBody, sendJson } from "../ui/http.js";
import { DashboardApi } from "../ui/routes.js";
import { HttpError } from "../ui/security.js";
import { defaultWebDir } from "../ui/server.js";
import { rankscopeVersion } from "../run/run-files.js";
import { StaticFiles } from "../ui/static.js";
import { ServerAuth, requireWrite, sendLoginPage, type ProxyAuth } from "./auth.js";
import { createServerPools } from "./db.js";
import { IngestBusy, IngestGate } from "./ingest-gate.js";
import {
  DEFAULT_INGEST_LIMITS,
  InflateBudget,
  InflateBusy,
  ingestBatch,
  runState,
  type IngestLimits,
} from "./ingest-route.js";
import { ServerMetrics } from "./metrics.js";
import { createPostgresSource } from "./pg-source.js";
import { RateLimiter } from "./rate-limit.js";
import { SCHEMA_VERSION, migrate } from "./schema.js";
import { TokenChecker, type Principal } from "./tokens.js";
import { addressOf, checkProject, clientOf, countFailure, kindOf, presentsToken } from "./request-info.js";

/** How to start a team server. */
export interface TeamServerOptions {
  /** `postgres://…` */
  readonly db: string;
  /** Bind address (default 127.0.0.1). */
  readonly host?: string;
  /** Port (default 7008; 0 picks a free one). */
  readonly port?: number;
  /** PEM files for HTTPS; both or neither. */
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  /** Trusted reverse-proxy sign-on (off when absent). */
  readonly proxy?: ProxyAuth;
  /** Requests per second per client (default 200, bursts of 400). */
  readonly rateLimit?: number;
  /** Failed authentications per client address per minute (default 30, bursts of 30); past it: 429. */
  readonly authFailuresPerMinute?: number;
  readonly ingestLimits?: IngestLimits;
  /** PostgreSQL connections for reads (the dashboard, the API, token checks) at most (default 10). */
  readonly poolSize?: number;
  /** PostgreSQL connections for ingest at most (default 4): also the batches worked on at once. */
  readonly ingestPoolSize?: number;
  readonly statementTimeoutMs?: number;
  /** Where JSON log lines go (default stdout); `false` for none. */
  readonly log?: NodeJS.WritableStream | false;
  readonly webDir?: string;
}

/** A running team server. */
export interface TeamServer {
  readonly url: string;
  readonly port: number;
  /** The reads' pool. */
  readonly pool: pg.Pool;
  readonly ingestPool: pg.Pool;
  readonly metrics: ServerMetrics;
  /** Stop taking connections, let requests in flight finish (at most `graceMs`), close the pool. */
  close(graceMs?: number): Promise<void>;
}

const DEFAULT_SERVER_PORT = 7008;
export const DEFAULT_AUTH_FAILURES_PER_MINUTE = 30;
export const DEFAULT_RATE_LIMIT = 200;
export const DEFAULT_POOL_SIZE = 10;
export const DEFAULT_INGEST_POOL_SIZE = 4;
/** Ingest batches waiting for a slot at most, and how long each may wait (ms); past either: 503. */
export const INGEST_QUEUE = 64;
export const INGEST_WAIT_MS = 10_000;

/** What a request is routed with: the pool and everything built once per server. */
class Router {
  /** Set by `close`: `/readyz` answers 503 so a load balancer stops sending. */
  stopping = false;
  private readonly limits: IngestLimits;
  /** Bytes inflated by all ingest requests at once. */
  readonly inflating: InflateBudget;
  private readonly files: StaticFiles;
  /** The built web app, which reports inline. */
  private readonly webDir: string;
  private readonly version = rankscopeVersion();

  constructor(
    /** Reads. */
    private readonly pool: pg.Pool,
    private readonly ingestPool: pg.Pool,
    /** Ingest batches at once. */
    private readonly gate: IngestGate,
    private readonly metrics: ServerMetrics,
    private readonly auth: ServerAuth,
    private readonly limiter: RateLimiter,
    /** Failed authentications per address. */
    private readonly failures: RateLimiter,
    private readonly log: pino.Logger,
    options: TeamServerOptions,
  ) {
    this.limits = options.ingestLimits ?? DEFAULT_INGEST_LIMITS;
    this.inflating = new InflateBudget(this.limits.maxInflatingBytes ?? DEFAULT_INGEST_LIMITS.maxInflatingBytes);
    this.webDir = options.webDir ?? defaultWebDir();
    this.files = new StaticFiles(this.webDir);
  }

  /** The Node request listener: route, then log and count the outcome. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    const started = performance.now();
    const url = new URL(req.url ?? "/", "http://server.invalid");
    const kind = kindOf(url.pathname);
    const done = (status: number, principal: Principal | undefined, error?: unknown): void => {
      this.metrics.requests.inc({ kind, status: `${Math.floor(status / 100)}xx` });
      this.metrics.requestSeconds.observe({ kind }, (performance.now() - started) / 1000);
      const line = {
        method: req.method,
        path: redactedRequestPath(req.url),
        status,
        ms: Math.round(performance.now() - started),
        ...(principal !== undefined ? { project: principal.project } : {}),
      };
      if (error !== undefined) this.log.error({ ...line, error: describeError(error) }, "request failed");
      else if (status >= 400 || kind === "ingest") this.log.info(line, "request");
    };
    this.route(req, res, url).then(
      (principal) => done(res.statusCode, principal),
      (error: unknown) => {
        const status = error instanceof HttpError ? error.status : 500;
        countFailure(this.metrics, status, error);
        done(status, undefined, status === 500 ? error : undefined);
        const message = error instanceof HttpError ? error.message : "internal error; the server's log says more";
        if ((error instanceof InflateBusy || error instanceof IngestBusy) && !res.headersSent) {
          res.setHeader("Retry-After", String(error.retryAfterS));
          req.resume();
        }
        if (res.headersSent) res.destroy();
        else sendJson(req, res, status, { error: message }).catch(() => res.destroy());
      },
    );
  };

  /** `/healthz`, `/readyz`, `/metrics` (no token needed); false for any other path. */
  private async operations(req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> {
    if (path === "/healthz") {
      await sendJson(req, res, 200, { ok: true });
      return true;
    }
    if (path === "/readyz") {
      if (this.stopping) throw new HttpError(503, "shutting down");
      try {
        const r = await this.pool.query<{ v: number | null }>("SELECT max(version) AS v FROM schema_migrations");
        if ((r.rows[0]?.v ?? 0) < SCHEMA_VERSION) throw new Error("schema behind");
      } catch {
        throw new HttpError(503, "the database is not reachable or not migrated");
      }
      await sendJson(req, res, 200, { ok: true, schema: SCHEMA_VERSION });
      return true;
    }
    if (path === "/metrics") {
      const text = await this.metrics.registry.metrics();
      await sendBody(
        req,
        res,
        200,
        { "Content-Type": this.metrics.registry.contentType, "Cache-Control": "no-store" },
        Buffer.from(text),
      );
      return true;
    }
    return false;
  }

  /** The rate limit, then the credentials: the caller, or undefined when the login page was sent. */
  private async authenticate(req: IncomingMessage, res: ServerResponse, url: URL): Promise<Principal | undefined> {
    const wait = this.limiter.take(clientOf(req));
    if (wait > 0) {
      this.metrics.rejected.inc({ reason: "rate" });
      res.setHeader("Retry-After", String(Math.ceil(wait / 1000)));
      throw new HttpError(429, `too many requests from this client; retry after ${wait} ms`);
    }
    // An address past its failed authentications presents no more tokens for a while (no lookup).
    const address = addressOf(req);
    const held = presentsToken(req, url) ? this.failures.peek(address) : 0;
    if (held > 0) {
      this.metrics.rejected.inc({ reason: "auth_rate" });
      res.setHeader("Retry-After", String(Math.ceil(held / 1000)));
      throw new HttpError(
        429,
        `too many failed authentications from this address; retry after ${Math.ceil(held / 1000)} s`,
      );
    }
    let principal: Principal;
    try {
      principal = await this.auth.principal(req, res, url);
    } catch (error) {
      if (error instanceof HttpError && error.status === 401 && presentsToken(req, url)) this.failures.take(address);
      if (
        error instanceof HttpError &&
        error.status === 401 &&
        req.method === "GET" &&
        (url.pathname === "/" || url.pathname === "/index.html")
      ) {
        this.metrics.rejected.inc({ reason: "auth" });
        sendLoginPage(
          res,
          url.searchParams.has("token") ? "That token is not valid here." : "This dashboard needs a project token.",
        );
        return undefined;
      }
      throw error;
    }
    checkProject(principal, url);
    return principal;
  }

  /** The ingest API (write tokens only); false for any other path. */
  private async ingest(req: IncomingMessage, res: ServerResponse, url: URL, principal: Principal): Promise<boolean> {
    if (url.pathname === "/api/ingest/v1/batch") {
      if (req.method !== "POST") throw new HttpError(405, "send batches with POST");
      requireWrite(principal);
      const result = await this.gate
        .run(() => ingestBatch(req, this.ingestPool, principal.projectId, this.limits, this.metrics, this.inflating))
        .catch((error: unknown) => {
          if (error instanceof IngestBusy) this.metrics.rejected.inc({ reason: "ingest_busy" });
          throw error;
        });
      await sendJson(req, res, 200, {
        points: result.points,
        records: result.records,
        fileBytes: result.fileBytes,
        refused: result.refused,
      });
      return true;
    }
    if (url.pathname === "/api/ingest/v1/state") {
      requireWrite(principal);
      await sendJson(req, res, 200, await runState(this.ingestPool, principal.projectId, url.searchParams.get("run")));
      return true;
    }
    return false;
  }

  private async route(req: IncomingMessage, res: ServerResponse, url: URL): Promise<Principal | undefined> {
    if (await this.operations(req, res, url.pathname)) return undefined;
    const principal = await this.authenticate(req, res, url);
    if (principal === undefined || (await this.ingest(req, res, url, principal))) return principal;
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("Allow", "GET, HEAD");
      throw new HttpError(405, "the dashboard is read-only: only GET and HEAD are allowed");
    }
    if (!url.pathname.startsWith("/api/")) {
      await this.files.send(req, res, url.pathname);
      return principal;
    }
    const api = new DashboardApi(createPostgresSource(this.pool, principal.projectId), this.version, this.webDir);
    const body = await api.handle(url.pathname, {
      req,
      res,
      params: url.searchParams,
      // The API answers 404 for another project's run as for none (nothing leaks): counted apart
      // from a key a run lacks, which is routine. A whole request's other refusals are counted
      // with its status; an entry's are counted here.
      runRefused: (status, entry) => {
        if (status === 404) this.metrics.rejected.inc({ reason: "run" });
        else if (entry) countFailure(this.metrics, status);
      },
    });
    if (body !== undefined) await sendJson(req, res, 200, body);
    return principal;
  }
}

/** Listen on host:port; the URL the server answers on. */
async function listen(
  server: Server,
  host: string,
  port: number,
  tls: boolean,
): Promise<{ url: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        error.code === "EADDRINUSE"
          ? new Error(`port ${port} on ${host} is in use; pick another with --port N`)
          : error,
      ),
    );
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string")
    throw new Error(`the server on ${host}:${port} has no TCP address after listening`);
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return { url: `${tls ? "https" : "http"}://${urlHost}:${address.port}`, port: address.port };
}

/** Start the server: connect, migrate, listen. */
export async function startTeamServer(options: TeamServerOptions): Promise<TeamServer> {
  const metrics = new ServerMetrics();
  const ingestPoolSize = options.ingestPoolSize ?? DEFAULT_INGEST_POOL_SIZE;
  const {
    read: pool,
    ingest: ingestPool,
    end: endPools,
  } = createServerPools({
    url: options.db,
    readMax: options.poolSize ?? DEFAULT_POOL_SIZE,
    ingestMax: ingestPoolSize,
    statementTimeoutMs: options.statementTimeoutMs ?? 30_000,
    observer: (name) => metrics.poolObserver(name),
  });
  try {
    await migrate(pool);
  } catch (error) {
    await endPools();
    throw new Error(`could not prepare the database: ${describeError(error)}`, { cause: error });
  }
  const log =
    options.log === false
      ? pino({ enabled: false })
      : pino({ base: { service: "rankscope-server" } }, options.log ?? process.stdout);
  metrics.watchPool("read", pool);
  metrics.watchPool("ingest", ingestPool);
  const tls = options.tlsCert !== undefined && options.tlsKey !== undefined;
  const auth = new ServerAuth(new TokenChecker(pool, () => metrics.tokenLookups.inc()), options.proxy, tls);
  const limiter = new RateLimiter(
    options.rateLimit ?? DEFAULT_RATE_LIMIT,
    (options.rateLimit ?? DEFAULT_RATE_LIMIT) * 2,
  );
  const failuresPerMinute = options.authFailuresPerMinute ?? DEFAULT_AUTH_FAILURES_PER_MINUTE;
  const failures = new RateLimiter(failuresPerMinute / 60, failuresPerMinute);
  const gate = new IngestGate(ingestPoolSize, INGEST_QUEUE, INGEST_WAIT_MS);
  const router = new Router(pool, ingestPool, gate, metrics, auth, limiter, failures, log, options);
  metrics.watchInflating(router.inflating);
  metrics.watchIngestGate(gate);
  const server: Server = tls
    ? createHttpsServer(
        { cert: readFileSync(options.tlsCert ?? ""), key: readFileSync(options.tlsKey ?? "") },
        router.handle,
      )
    : createHttpServer(router.handle);
  server.requestTimeout = 120_000;
  server.headersTimeout = 30_000;
  const sockets = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  const { url, port } = await listen(server, options.host ?? "127.0.0.1", options.port ?? DEFAULT_SERVER_PORT, tls);
  log.info({ url, schema: SCHEMA_VERSION }, "listening");
  return {
    url,
    port,
    pool,
    ingestPool,
    metrics,
    close: async (graceMs = 10_000) => {
      router.stopping = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => {
        for (const s of sockets) s.destroy();
      }, graceMs);
      await closed;
      clearTimeout(timer);
      await endPools();
      metrics.stop();
      log.info("stopped");
    },
  };
}
