/**
 * What the team server reads off a request before routing it: its client for the rate limit, its
 * address, whether it presents credentials, the project it names, its kind for the metrics, and
 * the reason a failed one is counted under.
 */
import type { IncomingMessage } from "node:http";
import { HttpError } from "../ui/security.js";
import { AuthRefused } from "./auth.js";
import type { ServerMetrics } from "./metrics.js";
import { tokenFormat, tokenHash, type Principal } from "./tokens.js";

/** A request's client for rate limiting: its token's hash (a token of a format the server makes), else its address. */
export function clientOf(req: IncomingMessage): string {
  const auth = req.headers.authorization;
  if (auth !== undefined && auth.startsWith("Bearer ")) {
    const token = auth.slice(7).trim();
    if (tokenFormat(token) !== null) return tokenHash(token).toString("base64");
  }
  return addressOf(req);
}

/** The client address of a request's socket. */
export function addressOf(req: IncomingMessage): string {
  return req.socket.remoteAddress ?? "?";
}

/** Whether a request presents credentials (a bearer token, `?token=`, or the dashboard's cookie). */
export function presentsToken(req: IncomingMessage, url: URL): boolean {
  return (
    req.headers.authorization !== undefined ||
    url.searchParams.has("token") ||
    (req.headers.cookie ?? "").includes("rankscope_server_token=")
  );
}

/** The project a request names (`?project=`) must be its token's. */
export function checkProject(p: Principal, url: URL): void {
  const named = url.searchParams.get("project");
  if (named !== null && named !== "" && named !== p.project)
    throw new HttpError(
      403,
      `this token belongs to another project; it cannot read or write project ${JSON.stringify(named.slice(0, 100))}`,
    );
}

/** The kind of a path, a label of the server's metrics: `ingest`, `api`, `ops` or `static`. */
export function kindOf(path: string): string {
  if (path.startsWith("/api/ingest/")) return "ingest";
  if (path.startsWith("/api/")) return "api";
  if (path === "/healthz" || path === "/readyz" || path === "/metrics") return "ops";
  return "static";
}

/** Counts a failed request under its reason (`ServerMetrics`). */
export function countFailure(metrics: ServerMetrics, status: number, error?: unknown): void {
  if (error instanceof AuthRefused) metrics.rejected.inc({ reason: `token_${error.why}` });
  else if (status === 500) metrics.errors.inc();
  else if (status === 400 || status === 413 || status === 415)
    metrics.rejected.inc({ reason: status === 400 ? "malformed" : "size" });
  else if (status === 401 || status === 403) metrics.rejected.inc({ reason: "auth" });
  else if (status === 409) metrics.rejected.inc({ reason: "conflict" });
}
