/**
 * The `/metrics` HTTP servers of this process: one per host and port, shared by every Prometheus
 * backend configured with it (e.g. several in-process ranks), closed when the last one finishes.
 */
import { createServer, type Server } from "node:http";
import { processWide } from "../../core/process-wide.js";
import type { Exposition } from "./exposition.js";
import { metricsHandler } from "./render.js";

interface Shared {
  readonly server: Server;
  readonly listening: Promise<number>;
  /** The expositions served here (those of the backends that leased it). */
  readonly expositions: Set<Exposition>;
  users: number;
}

function servers(): Map<string, Shared> {
  return processWide("prometheusServers", () => new Map<string, Shared>());
}

/** A listening `/metrics` server: its address, and a way to stop using it. */
export interface MetricsServerLease {
  readonly url: string;
  release(): Promise<void>;
}

/**
 * Listen on `host:port` (port 0: any free port) and serve `path`, or join the server already
 * listening there. Rejects when it cannot listen within `deadlineMs`.
 */
export async function leaseMetricsServer(
  host: string,
  port: number,
  path: string,
  deadlineMs: number,
  exposition: Exposition,
): Promise<MetricsServerLease> {
  const id = `${host}:${port}:${path}`;
  let shared = port === 0 ? undefined : servers().get(id);
  if (shared === undefined) {
    const expositions = new Set<Exposition>();
    const handle = metricsHandler(expositions);
    const server = createServer((request, response) => {
      const url = new URL(request.url ?? "/", "http://localhost");
      if (request.method !== "GET" && request.method !== "HEAD") {
        response.writeHead(405, { allow: "GET, HEAD" }).end();
      } else if (url.pathname !== path) {
        response
          .writeHead(404, { "content-type": "text/plain; charset=utf-8" })
          .end(`rankscope serves metrics at ${path}\n`);
      } else {
        handle(request, response);
      }
    });
    const listening = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        server.close();
        reject(new Error(`could not listen on ${host}:${port} within ${deadlineMs} ms`));
      }, deadlineMs);
      server.once("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
      server.listen(port, host, () => {
        clearTimeout(timer);
        const address = server.address();
        resolve(typeof address === "object" && address !== null ? address.port : port);
      });
    });
    shared = { server, listening, expositions, users: 0 };
    const key = id;
    if (port !== 0) servers().set(key, shared);
    listening.catch(() => servers().delete(key));
  }
  shared.users++;
  shared.expositions.add(exposition);
  const lease = shared;
  let actualPort: number;
  try {
    actualPort = await lease.listening;
  } catch (error) {
    lease.users--;
    lease.expositions.delete(exposition);
    throw error;
  }
  lease.server.unref();
  const hostText = host.includes(":") ? `[${host}]` : host;
  let released = false;
  return {
    url: `http://${hostText}:${actualPort}${path}`,
    async release(): Promise<void> {
      if (released) return;
      released = true;
      lease.expositions.delete(exposition);
      if (--lease.users > 0) return;
      servers().delete(id);
      await new Promise<void>((resolve) => {
        lease.server.close(() => resolve());
        lease.server.closeAllConnections();
      });
    },
  };
}
