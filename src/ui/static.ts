/**
 * The built web app's files, served from one folder only. Files are read once and kept with their
 * gzipped form (the app is a few hundred KB; Vite names assets by content hash), and read again
 * when their modification time changes (a rebuild while the server runs).
 */
import { readFileSync, realpathSync, statSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, resolve } from "node:path";
import { STATIC_GZIP_LEVEL, gzipBytes, sendBody } from "./http.js";
import { HttpError, inside } from "./security.js";

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

/** Types worth compressing (images are compressed already). */
const COMPRESSIBLE = new Set([".html", ".js", ".css", ".svg", ".json", ".map"]);

interface CachedFile {
  readonly mtimeMs: number;
  readonly size: number;
  readonly body: Buffer;
  gzipped: Promise<Buffer> | undefined;
}

/** Serves the files of the built app in `webDir`. */
export class StaticFiles {
  private readonly cache = new Map<string, CachedFile>();
  private readonly webDir: string;

  constructor(webDir: string) {
    this.webDir = resolve(webDir);
  }

  async send(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    let rel: string;
    try {
      rel = path === "/" ? "index.html" : decodeURIComponent(path.slice(1));
    } catch {
      throw new HttpError(400, "malformed path");
    }
    if (rel.includes("\0")) throw new HttpError(404, "not found");
    const file = resolve(this.webDir, rel);
    if (!file.startsWith(this.webDir + "/")) throw new HttpError(404, "not found");
    let real: string;
    try {
      real = realpathSync(file);
      if (!inside(realpathSync(this.webDir), real) || !statSync(real).isFile())
        throw new Error("not a file of the app");
    } catch {
      if (path === "/")
        throw new HttpError(500, `the web app is not built (no ${join(this.webDir, "index.html")}); run npm run build`);
      throw new HttpError(404, "not found");
    }
    const cached = this.load(real);
    const ext = extname(real);
    const headers = {
      "Content-Type": CONTENT_TYPES[ext] ?? "application/octet-stream",
      // Vite names assets by content hash, so they never change; the page itself always may.
      "Cache-Control": rel.startsWith("assets/") ? "public, max-age=31536000, immutable" : "no-cache",
    };
    await sendBody(req, res, 200, headers, cached.body, {
      compress: COMPRESSIBLE.has(ext),
      gzipped: () => (cached.gzipped ??= gzipBytes(cached.body, STATIC_GZIP_LEVEL)),
    });
  }

  private load(real: string): CachedFile {
    const stat = statSync(real);
    const known = this.cache.get(real);
    if (known !== undefined && known.mtimeMs === stat.mtimeMs && known.size === stat.size) return known;
    const entry: CachedFile = { mtimeMs: stat.mtimeMs, size: stat.size, body: readFileSync(real), gzipped: undefined };
    this.cache.set(real, entry);
    return entry;
  }
}
