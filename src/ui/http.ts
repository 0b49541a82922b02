/**
 * How the dashboard answers: the security headers every response carries, JSON with the
 * non-finite number convention, and compression (gzip) when the client accepts it.
 */
import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { promisify } from "node:util";
import { constants, gzip } from "node:zlib";
import { nonFiniteReplacer, stringifyNonFinite } from "../core/json.js";

const gzipAsync = promisify(gzip);

/** Bodies smaller than this go uncompressed: the gzip header and the work would not pay off. */
const COMPRESS_MIN_BYTES = 1024;

/**
 * gzip level of answers compressed as they are sent (the API's JSON, trace downloads). Level 1:
 * on the API's number arrays (8 lines × 2,000 points, 616 kB) it compressed 2.60× in 9.5 ms
 * against level 6's 2.72× in 18.7 ms — half the server's compression CPU for 5 % more bytes, and
 * on a team server a chart's first load spends its CPU on exactly that. It runs on libuv's thread
 * pool, so a large answer never blocks the event loop (see BENCHMARKS.md).
 */
export const GZIP_LEVEL = 1;

/** gzip level of static files, compressed once and kept: the smallest. */
export const STATIC_GZIP_LEVEL = 9;

/** Headers on every answer: a strict CSP, no sniffing, no framing, no referrer. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  "Referrer-Policy": "no-referrer",
  "Cross-Origin-Resource-Policy": "same-origin",
};

/** Whether the request's `Accept-Encoding` allows gzip (and does not refuse it with `q=0`). */
export function acceptsGzip(req: IncomingMessage): boolean {
  const header = req.headers["accept-encoding"];
  if (header === undefined) return false;
  for (const part of String(header).split(",")) {
    const [name, ...params] = part.trim().split(";");
    const coding = (name ?? "").trim().toLowerCase();
    if (coding !== "gzip" && coding !== "*") continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  }
  return false;
}

/** gzip bytes off the event loop, at `level` (default `GZIP_LEVEL`). */
export function gzipBytes(body: Buffer, level = GZIP_LEVEL): Promise<Buffer> {
  return gzipAsync(body, { level, strategy: constants.Z_DEFAULT_STRATEGY });
}

/** How `sendBody` may compress. */
interface CompressOptions {
  /** False sends the body as it is (images, tiny files). Default true. */
  compress?: boolean;
  /** The body gzipped, when it is kept compressed already (static files). */
  gzipped?: () => Promise<Buffer>;
}

/**
 * Send a body, gzipped when the client accepts it and it is worth it. `Vary: Accept-Encoding`
 * tells caches the answer depends on it.
 */
export async function sendBody(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  headers: Record<string, string | number>,
  body: Buffer,
  options: CompressOptions = {},
): Promise<void> {
  const head = req.method === "HEAD";
  let payload = body;
  const out: Record<string, string | number> = { ...SECURITY_HEADERS, ...headers, Vary: "Accept-Encoding" };
  if (options.compress !== false && body.length >= COMPRESS_MIN_BYTES && acceptsGzip(req)) {
    payload = await (options.gzipped ?? (() => gzipBytes(body)))();
    out["Content-Encoding"] = "gzip";
  }
  out["Content-Length"] = payload.length;
  if (res.destroyed) return;
  res.writeHead(status, out);
  res.end(head ? undefined : payload);
}

/**
 * JSON already serialised, in pieces: a large answer built a piece at a time (with other requests
 * served in between) is not serialised again in one long blocking call.
 */
export class JsonPieces {
  private readonly pieces: Buffer[] = [];

  /** Append raw JSON text. */
  raw(text: string): this {
    this.pieces.push(Buffer.from(text));
    return this;
  }

  /** Append a value as JSON (non-finite numbers as strings). */
  value(value: unknown): this {
    return this.raw(stringifyNonFinite(value) ?? "null");
  }

  bytes(): Buffer {
    return Buffer.concat(this.pieces);
  }
}

/** Send JSON (NaN and ±Infinity as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`). */
export function sendJson(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): Promise<void> {
  const bytes = body instanceof JsonPieces ? body.bytes() : Buffer.from(stringifyNonFinite(body) ?? "null");
  return sendBody(
    req,
    res,
    status,
    { "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store" },
    bytes,
  );
}

/**
 * Send JSON with an `ETag` (a hash of the body), or `304 Not Modified` without a body when the
 * request's `If-None-Match` names it: a client polling for a list learns that nothing changed
 * without downloading it again.
 */
export function sendJsonRevalidated(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  const bytes = Buffer.from(JSON.stringify(body, nonFiniteReplacer));
  const etag = `"${createHash("sha1").update(bytes).digest("base64url")}"`;
  const headers = { "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-cache", ETag: etag };
  const known = req.headers["if-none-match"];
  if (known !== undefined && known.split(",").some((tag) => tag.trim().replace(/^W\//, "") === etag)) {
    if (!res.destroyed) {
      res.writeHead(304, { ...SECURITY_HEADERS, ETag: etag, "Cache-Control": "no-cache", Vary: "Accept-Encoding" });
      res.end();
    }
    return Promise.resolve();
  }
  return sendBody(req, res, 200, headers, bytes);
}

/** The request's path and query for a log line, with the value of `token` replaced: a log must never hold the secret. */
export function redactedRequestPath(rawUrl: string | undefined): string {
  const url = rawUrl ?? "";
  const q = url.indexOf("?");
  if (q < 0) return url;
  const hash = url.indexOf("#", q);
  const query = url.slice(q + 1, hash < 0 ? undefined : hash);
  const parts = query.split("&").map((part) => {
    const eq = part.indexOf("=");
    const rawName = eq < 0 ? part : part.slice(0, eq);
    let name = rawName;
    try {
      name = decodeURIComponent(rawName.replace(/\+/g, " "));
    } catch {
      // A malformed escape: judge the raw name.
    }
    return name.trim().toLowerCase() === "token" ? `${rawName}=[redacted]` : part;
  });
  return `${url.slice(0, q)}?${parts.join("&")}`;
}
