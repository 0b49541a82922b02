/**
 * `rankscope ui`: a read-only HTTP server for the dashboard — the built web app and a small JSON
 * API over the runs under one root directory.
 *
 * Guards, in the order a request meets them: a token when bound anywhere but 127.0.0.1 / ::1 /
 * localhost (header, cookie or `?token=`); on loopback, a Host header naming loopback (DNS
 * rebinding); GET and HEAD only; `run` and `file` parameters that stay inside the root. Every
 * answer carries a strict Content-Security-Policy, so even a rendering mistake in the app could
 * not run a script that came with the data.
 */
import { createReadStream, existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, extname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describeStoreError, isStoreError } from "../backends/store/errors.js";
import { describeError, warn } from "../core/diagnostics.js";
import { nonFiniteReplacer } from "../core/json.js";
import { HttpError, generateToken, hostHeaderAllowed, resolveRunDir, resolveRunFile, tokenMatches } from "./security.js";
import type { DashboardSource } from "./source.js";

/** How to start the dashboard. */
export interface DashboardOptions {
  /** The directory holding `{experiment}/{trial}` run directories. */
  root: string;
  /** TCP port; 0 picks a free one. Default 7007. */
  port?: number;
  /** Bind address. Default 127.0.0.1; anything else requires a token. */
  host?: string;
  /** The token to require; generated when binding off loopback and none is given. */
  token?: string;
  /** Where the data comes from; default: the store backend's reader. */
  source?: DashboardSource;
  /** The built web app; default: found next to this file (dist) or in dist/ from src. */
  webDir?: string;
}

/** A running dashboard. */
export interface Dashboard {
  /** The URL to open, with the token when one is required. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The required token, or undefined on a loopback bind without one. */
  readonly token: string | undefined;
  close(): Promise<void>;
}

/** The default port (TensorBoard's 6006 is often taken by TensorBoard itself). */
export const DEFAULT_UI_PORT = 7007;

/** Points per line per request at most (the issue's budget); the store downsamples beyond it. */
const MAX_POINTS_CAP = 2_000;
const DEFAULT_MAX_POINTS = 2_000;

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
};

const SECURITY_HEADERS: Record<string, string> = {
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  "Referrer-Policy": "no-referrer",
  "Cross-Origin-Resource-Policy": "same-origin",
};

/** The built app: `dist/ui/web` (beside this file when running from dist, under the repo from src). */
export function defaultWebDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return import.meta.url.endsWith(".ts") ? resolve(here, "../../dist/ui/web") : join(here, "web");
}

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: string };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
}

async function loadStoreSource(): Promise<DashboardSource> {
  const { createStoreSource } = await import("./store-source.js");
  return createStoreSource();
}

function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0) cookies.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  return cookies;
}

function sendJson(res: ServerResponse, status: number, body: unknown, head = false): void {
  const text = JSON.stringify(body, nonFiniteReplacer);
  res.writeHead(status, { ...SECURITY_HEADERS, "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store", "Content-Length": Buffer.byteLength(text) });
  res.end(head ? undefined : text);
}

function intParam(params: URLSearchParams, name: string, min: number, max: number): number | undefined {
  const raw = params.get(name);
  if (raw === null || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new HttpError(400, `${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return n;
}

function requiredParam(params: URLSearchParams, name: string): string {
  const value = params.get(name);
  if (value === null || value === "") throw new HttpError(400, `missing the ${name} parameter`);
  return value;
}

/** Lines of a batch request, at most this many. */
const MAX_BATCH_LINES = 200;

/** `lines` of `/api/lines`: JSON `[[key, rank | null, after | null], …]`. */
function parseLines(raw: string | null): [string, number | null, string | null][] {
  const usage = "lines must be JSON [[key, rank or null, cursor or null], …] with at most 200 entries";
  if (raw === null || raw === "") throw new HttpError(400, `missing the lines parameter; ${usage}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new HttpError(400, `lines is not JSON; ${usage}`);
  }
  if (!Array.isArray(parsed) || parsed.length > MAX_BATCH_LINES) throw new HttpError(400, usage);
  return parsed.map((entry: unknown) => {
    if (!Array.isArray(entry) || entry.length !== 3) throw new HttpError(400, usage);
    const [key, rank, after] = entry as unknown[];
    if (typeof key !== "string" || key === "") throw new HttpError(400, `${usage}; a key is not a non-empty string`);
    if (rank !== null && !(typeof rank === "number" && Number.isInteger(rank) && rank >= 0)) throw new HttpError(400, `${usage}; a rank is not a non-negative integer or null`);
    if (after !== null && typeof after !== "string") throw new HttpError(400, `${usage}; a cursor is not a string or null`);
    return [key, rank as number | null, after as string | null];
  });
}

function readOptionalText(path: string, limit = 1 << 20): string | null {
  try {
    const stat = statSync(path);
    if (!stat.isFile()) return null;
    const text = readFileSync(path, "utf8");
    return text.length > limit ? `${text.slice(0, limit)}\n… (truncated)` : text;
  } catch {
    return null;
  }
}

/** Start the dashboard server; resolves once it listens. */
export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const root = resolve(options.root);
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    throw new Error(`the runs root ${root} is not a directory; pass --root DIR pointing at the folder that holds {experiment}/{trial} run directories`);
  }
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? DEFAULT_UI_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`port must be an integer from 0 to 65535, got ${String(port)}`);
  const defaultLocal = host === "127.0.0.1" || host === "::1" || host === "localhost";
  const token = options.token ?? (defaultLocal ? undefined : generateToken());
  if (token !== undefined && token.length < 8) throw new Error("the token must be at least 8 characters long");
  const webDir = resolve(options.webDir ?? defaultWebDir());
  const source = options.source ?? (await loadStoreSource());
  const version = packageVersion();
  let cookieName = "rankscope_token";

  const api = async (path: string, params: URLSearchParams): Promise<unknown> => {
    switch (path) {
      case "/api/version":
        return { rankscope: version, node: process.version };
      case "/api/runs":
        return { runs: await source.listRuns(root) };
      case "/api/keys": {
        const runDir = resolveRunDir(root, params.get("run"));
        const [metrics, streams, system, histograms, rankNames] = await Promise.all([
          source.keys(runDir),
          source.streamKeys(runDir),
          source.systemKeys(runDir),
          source.histogramKeys?.(runDir) ?? [],
          source.rankNames?.(runDir) ?? {},
        ]);
        return { metrics, streams, system, histograms, rankNames };
      }
      case "/api/series": {
        const runDir = resolveRunDir(root, params.get("run"));
        const key = requiredParam(params, "key");
        const rank = intParam(params, "rank", 0, 1_000_000);
        const maxPoints = intParam(params, "maxPoints", 3, MAX_POINTS_CAP) ?? DEFAULT_MAX_POINTS;
        const after = params.get("after") ?? undefined;
        return await source.series(runDir, key, { ...(rank !== undefined ? { rank } : {}), ...(after !== undefined ? { after } : {}), maxPoints });
      }
      case "/api/stream": {
        const runDir = resolveRunDir(root, params.get("run"));
        const key = requiredParam(params, "key");
        const maxPoints = intParam(params, "maxPoints", 3, MAX_POINTS_CAP) ?? DEFAULT_MAX_POINTS;
        const after = params.get("after") ?? undefined;
        return await source.stream(runDir, key, { ...(after !== undefined ? { after } : {}), maxPoints });
      }
      case "/api/system": {
        const runDir = resolveRunDir(root, params.get("run"));
        const key = requiredParam(params, "key");
        const maxPoints = intParam(params, "maxPoints", 3, MAX_POINTS_CAP) ?? DEFAULT_MAX_POINTS;
        const after = params.get("after") ?? undefined;
        return await source.system(runDir, key, { ...(after !== undefined ? { after } : {}), maxPoints });
      }
      case "/api/lines": {
        // Many lines of one run in one request: a grid's first load and every live poll.
        const runDir = resolveRunDir(root, params.get("run"));
        const kind = params.get("kind") ?? "scalar";
        if (kind !== "scalar" && kind !== "stream" && kind !== "system") throw new HttpError(400, `kind must be scalar, stream or system, got ${JSON.stringify(kind)}`);
        const maxPoints = intParam(params, "maxPoints", 3, MAX_POINTS_CAP) ?? DEFAULT_MAX_POINTS;
        const lines = parseLines(params.get("lines"));
        const out: unknown[] = [];
        for (const [key, rank, after] of lines) {
          const query = { ...(after !== null ? { after } : {}), maxPoints };
          try {
            if (kind === "scalar") out.push(await source.series(runDir, key, { ...query, ...(rank !== null ? { rank } : {}) }));
            else if (kind === "stream") out.push(await source.stream(runDir, key, query));
            else out.push(await source.system(runDir, key, query));
          } catch (error) {
            // One missing line must not blank the others.
            if (!(error instanceof HttpError)) throw error;
            out.push({ error: error.message, status: error.status });
          }
        }
        return { lines: out };
      }
      case "/api/histograms": {
        const runDir = resolveRunDir(root, params.get("run"));
        const key = requiredParam(params, "key");
        const limit = intParam(params, "limit", 1, 500) ?? 20;
        return { histograms: source.histograms === undefined ? [] : await source.histograms(runDir, key, limit) };
      }
      case "/api/samples": {
        const runDir = resolveRunDir(root, params.get("run"));
        return { samples: await source.samples(runDir) };
      }
      case "/api/config": {
        const runDir = resolveRunDir(root, params.get("run"));
        const versionText = readOptionalText(join(runDir, "version.json"));
        let versionInfo: unknown = null;
        if (versionText !== null) {
          try {
            versionInfo = JSON.parse(versionText);
          } catch {
            versionInfo = versionText;
          }
        }
        return { params: await source.config(runDir), configYaml: readOptionalText(join(runDir, "config.yaml")), version: versionInfo };
      }
      case "/api/traces": {
        const runDir = resolveRunDir(root, params.get("run"));
        const dir = join(runDir, "traces");
        const files: { name: string; size: number; modified: number }[] = [];
        if (existsSync(dir)) {
          for (const name of readdirSync(dir).sort()) {
            const stat = statSync(join(dir, name));
            if (stat.isFile()) files.push({ name, size: stat.size, modified: stat.mtimeMs });
          }
        }
        return { files };
      }
      default:
        throw new HttpError(404, `no such API endpoint ${path}; the endpoints are /api/version, runs, keys, series, lines, stream, system, histograms, samples, config, traces, trace`);
    }
  };

  const sendTrace = (res: ServerResponse, params: URLSearchParams, head: boolean): void => {
    const runDir = resolveRunDir(root, params.get("run"));
    const file = resolveRunFile(runDir, "traces", params.get("file"));
    const name = file.slice(file.lastIndexOf("/") + 1);
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "Content-Type": "application/octet-stream",
      "Content-Disposition": `attachment; filename="${name}"`,
      "Content-Length": statSync(file).size,
      "Cache-Control": "no-store",
    });
    if (head) res.end();
    else createReadStream(file).pipe(res);
  };

  const sendStatic = (res: ServerResponse, path: string, head: boolean): void => {
    let rel: string;
    try {
      rel = path === "/" ? "index.html" : decodeURIComponent(path.slice(1));
    } catch {
      throw new HttpError(400, "malformed path");
    }
    const file = resolve(webDir, rel);
    if (!file.startsWith(webDir + "/") || rel.includes("\0")) throw new HttpError(404, "not found");
    if (!existsSync(file) || !statSync(file).isFile()) {
      if (path === "/") throw new HttpError(500, `the web app is not built (no ${join(webDir, "index.html")}); run npm run build`);
      throw new HttpError(404, "not found");
    }
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "Content-Type": CONTENT_TYPES[extname(file)] ?? "application/octet-stream",
      "Content-Length": statSync(file).size,
      // Vite names assets by content hash, so they never change; the page itself always may.
      "Cache-Control": rel.startsWith("assets/") ? "public, max-age=31536000, immutable" : "no-cache",
    });
    if (head) res.end();
    else createReadStream(file).pipe(res);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://dashboard.invalid");
    const head = req.method === "HEAD";
    if (token !== undefined) {
      const auth = req.headers.authorization;
      const bearer = auth !== undefined && auth.startsWith("Bearer ") ? auth.slice(7) : undefined;
      const fromQuery = url.searchParams.get("token") ?? undefined;
      const ok = tokenMatches(token, bearer) || tokenMatches(token, parseCookies(req.headers.cookie).get(cookieName)) || tokenMatches(token, fromQuery);
      if (!ok) throw new HttpError(401, "this dashboard needs its token: open the URL rankscope ui printed (…?token=…) or send Authorization: Bearer TOKEN");
      if (tokenMatches(token, fromQuery)) {
        // Later requests (scripts, API calls, downloads) carry the token as a cookie.
        res.setHeader("Set-Cookie", `${cookieName}=${token}; HttpOnly; SameSite=Strict; Path=/`);
      }
    } else if (!hostHeaderAllowed(req.headers.host)) {
      throw new HttpError(403, "this dashboard answers only requests addressed to localhost / 127.0.0.1 / [::1]");
    }
    if (req.method !== "GET" && !head) {
      res.setHeader("Allow", "GET, HEAD");
      throw new HttpError(405, "the dashboard is read-only: only GET and HEAD are allowed");
    }
    if (url.pathname === "/api/trace") return sendTrace(res, url.searchParams, head);
    if (url.pathname.startsWith("/api/")) return sendJson(res, 200, await api(url.pathname, url.searchParams), head);
    sendStatic(res, url.pathname, head);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      if (status === 500 && !(error instanceof HttpError)) warn("ui.request", `dashboard request ${req.url ?? ""} failed: ${describeError(error)}`);
      // A store SQLite cannot read (corrupt, not a database) is the run's fault, not ours: say why.
      const message = error instanceof HttpError ? error.message : isStoreError(error) ? `this run's ${describeStoreError(error)}` : "internal error; the server's log says more";
      if (res.headersSent) res.destroy();
      else sendJson(res, status, { error: message }, req.method === "HEAD");
    });
  });

  await new Promise<void>((resolvePromise, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      reject(error.code === "EADDRINUSE" ? new Error(`port ${port} on ${host} is in use; pick another with --port N (0 picks a free one)`) : error);
    });
    server.listen(port, host, () => resolvePromise());
  });
  const actualPort = (server.address() as AddressInfo).port;
  // Cookies are shared across ports of one host; name ours by port so two dashboards don't clash.
  cookieName = `rankscope_token_${actualPort}`;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  const url = `http://${urlHost}:${actualPort}/${token !== undefined ? `?token=${encodeURIComponent(token)}` : ""}`;
  return {
    url,
    host,
    port: actualPort,
    token,
    close: () =>
      new Promise<void>((resolvePromise) => {
        server.closeAllConnections();
        server.close(() => {
          source.close?.();
          resolvePromise();
        });
      }),
  };
}



export type { DashboardSource, HistogramRow, KeyInfo, RunSummary, SampleRow, SeriesData, SeriesQuery, StreamData } from "./source.js";
