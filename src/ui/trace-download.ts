/** `/api/trace`'s answer: a trace file as a download, gzipped on the way when the client takes it. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { GZIP_LEVEL, SECURITY_HEADERS, acceptsGzip } from "./http.js";
import type { TraceFile } from "./source.js";

/** A header parameter value in RFC 5987's `attr-char`s: UTF-8, percent-encoded. */
function rfc5987(text: string): string {
  return encodeURIComponent(text).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Send `file` as an attachment named after it (the headers alone for a HEAD). */
export function sendTraceFile(req: IncomingMessage, res: ServerResponse, file: TraceFile): void {
  const name = file.name;
  // Trace JSON compresses ~10×; streamed through gzip, so a large file never sits in memory.
  const gzip = acceptsGzip(req);
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "Content-Type": "application/octet-stream",
    "Content-Disposition": `attachment; filename="${name.replace(/[^\x20-\x7e]|"/g, "_")}"; filename*=UTF-8''${rfc5987(name)}`,
    ...(gzip ? { "Content-Encoding": "gzip" } : { "Content-Length": file.size }),
    Vary: "Accept-Encoding",
    "Cache-Control": "no-store",
  });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  const fail = (): void => {
    res.destroy();
  };
  if (gzip) pipeline(file.open(), createGzip({ level: GZIP_LEVEL }), res).catch(fail);
  else pipeline(file.open(), res).catch(fail);
}
