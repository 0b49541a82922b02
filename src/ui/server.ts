/**
 * `rankscope ui`: a read-only HTTP server for the dashboard — the built web app and a small JSON
 * API over the runs under one root directory.
 *
 * Guards, in the order a request meets them (`auth.ts`, `security.ts`): a token when bound
 * anywhere but 127.0.0.1 / ::1 / localhost (header, cookie or `?token=`); on loopback, a Host
 * header naming loopback (DNS rebinding); GET and HEAD only; `run` and `file` parameters, and every
 * file they lead to (symlinks followed), inside the root; caps on what one request may ask
 * (`params.ts`). Every answer carries a strict Content-Security-Policy, so even a rendering mistake
 * in the app could not run a script that came with the data, and is gzipped when the client
 * accepts it (`http.ts`). The API is a route table (`routes.ts`); the app's files come from
 * `static.ts`.
 */
import { existsSync, statSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { resolve } from "node:path";
import { describeError, warn } from "../core/diagnostics.js";
import { rankscopeVersion } from "../run/run-files.js";
import { DashboardAuth, requiredToken } from "./auth.js";
import { redactedRequestPath, sendJson } from "./http.js";
import { DashboardApi } from "./routes.js";
import { HttpError } from "./security.js";
import type { DashboardSource } from "./source.js";
import { StaticFiles } from "./static.js";
import { defaultWebDir } from "./web-dir.js";

/** How to start the dashboard. */
export interface DashboardOptions {
  /** The directory holding `{experiment}/{trial}` run directories (the default source's root). */
  root: string;
  /** TCP port; 0 picks a free one. Default 7007. */
  port?: number;
  /** Bind address. Default 127.0.0.1; anything else requires a token. */
  host?: string;
  /** The token to require; generated when binding off loopback and none is given. */
  token?: string;
  /** Where the data comes from; default: the runs under `root`, read by the store's reader. */
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

export { defaultWebDir };

async function loadStoreSource(root: string): Promise<DashboardSource> {
  const { createStoreSource } = await import("./store-source.js");
  return createStoreSource(root);
}

/** Start the dashboard server; resolves once it listens. */
export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const root = resolve(options.root);
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    throw new Error(
      `the runs root ${root} is not a directory; pass --root DIR pointing at the folder that holds {experiment}/{trial} run directories`,
    );
  }
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? DEFAULT_UI_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`port must be an integer from 0 to 65535, got ${String(port)}`);
  const auth = new DashboardAuth(requiredToken(host, options.token));
  const files = new StaticFiles(options.webDir ?? defaultWebDir());
  const source = options.source ?? (await loadStoreSource(root));
  const api = new DashboardApi(source, rankscopeVersion(), options.webDir ?? defaultWebDir());

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://dashboard.invalid");
    auth.check(req, res, url);
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("Allow", "GET, HEAD");
      throw new HttpError(405, "the dashboard is read-only: only GET and HEAD are allowed");
    }
    if (!url.pathname.startsWith("/api/")) return files.send(req, res, url.pathname);
    const body = await api.handle(url.pathname, { req, res, params: url.searchParams });
    if (body !== undefined) await sendJson(req, res, 200, body);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      // The path without the token's value: a log must never hold the secret.
      if (!(error instanceof HttpError))
        warn("ui.request", `dashboard request ${redactedRequestPath(req.url)} failed: ${describeError(error)}`);
      const message = error instanceof HttpError ? error.message : "internal error; the server's log says more";
      if (res.headersSent) res.destroy();
      else sendJson(req, res, status, { error: message }).catch(() => res.destroy());
    });
  });

  await new Promise<void>((resolvePromise, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      reject(
        error.code === "EADDRINUSE"
          ? new Error(`port ${port} on ${host} is in use; pick another with --port N (0 picks a free one)`)
          : error,
      );
    });
    server.listen(port, host, () => resolvePromise());
  });
  const address = server.address();
  // A TCP server (not a pipe) that is listening has an AddressInfo.
  if (address === null || typeof address === "string")
    throw new Error(`the dashboard server on ${host}:${port} has no TCP address after listening`);
  const actualPort = address.port;
  auth.port = actualPort;
  const token = auth.token;
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
          Promise.resolve(source.close?.()).then(resolvePromise, resolvePromise);
        });
      }),
  };
}
