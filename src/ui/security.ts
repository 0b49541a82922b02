/**
 * The dashboard's guards: who may ask (a token off loopback), what they may name (runs and files
 * strictly inside the root), and which Host headers a loopback server answers (DNS rebinding).
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync, readdirSync, realpathSync, statSync } from "node:fs";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { pathSegmentProblem } from "../run/run-dir.js";

/** An HTTP error with the status the client gets; its message is safe to show. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Whether a bind address only accepts connections from this machine. */
function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h);
}

/** A fresh random token (URL-safe). */
export function generateToken(): string {
  return randomBytes(24).toString("base64url");
}

/** Compare a presented token with the expected one in constant time. */
export function tokenMatches(expected: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The Host header's name part (`localhost` of `localhost:7007`, `::1` of `[::1]:7007`). */
function hostName(header: string): string {
  const bracket = /^\[([^\]]+)\](?::\d+)?$/.exec(header);
  if (bracket !== null) return bracket[1] ?? "";
  return header.replace(/:\d+$/, "");
}

/**
 * A loopback-bound server answers only requests that name a loopback host, so a web page whose
 * domain was re-pointed at 127.0.0.1 (DNS rebinding) cannot read the runs.
 */
export function hostHeaderAllowed(header: string | undefined): boolean {
  if (header === undefined) return false;
  return isLoopbackHost(hostName(header));
}

/** Whether `child` is `parent` or inside it (both absolute, normalised). */
export function inside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!isAbsolute(rel) && rel !== ".." && !rel.startsWith(`..${sep}`));
}

/**
 * The real path of `path` (symlinks followed) when it exists and stays inside `realRoot`; null
 * when it does not exist (a broken symlink included). Throws a 403 when it resolves outside: no
 * file the dashboard opens may lie outside the runs root, whatever links point there.
 */
export function realPathInside(realRoot: string, path: string, what: string): string | null {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return null;
  }
  if (!inside(realRoot, real))
    throw new HttpError(
      403,
      `${what} resolves (through a symlink) outside the runs root; the dashboard serves nothing outside it`,
    );
  return real;
}

/** The text of a run's file (`config.yaml`, `version.json`) if it is a regular file inside the root; null when missing or refused. Long files are cut at `limit` characters. */
export function readRunText(realRoot: string, runDir: string, name: string, limit = 1 << 20): string | null {
  let real: string | null;
  try {
    real = realPathInside(realRoot, join(runDir, name), name);
  } catch {
    return null;
  }
  if (real === null) return null;
  try {
    if (!statSync(real).isFile()) return null;
    const text = readFileSync(real, "utf8");
    return text.length > limit ? `${text.slice(0, limit)}\n… (truncated)` : text;
  } catch {
    return null;
  }
}

/**
 * Resolve a `run` parameter (`experiment/trial`, or one to three folder names as the store finds
 * runs) to its real directory under `realRoot`. Each part may be any one-folder name (`café`,
 * `lr=3e-4,bs=256`, `实验1`; see `pathSegmentProblem`); anything else, or a run whose real path
 * (after symlinks) leaves the root, is refused with a 4xx.
 */
export function resolveRunDir(realRoot: string, run: string | null): string {
  if (run === null || run === "")
    throw new HttpError(400, "missing the run parameter (experiment/trial, as /api/runs lists it)");
  const parts = run.split("/");
  if (parts.length > 3 || parts.some((p) => pathSegmentProblem(p) !== null)) {
    throw new HttpError(
      400,
      "the run parameter must be experiment/trial as /api/runs lists it: one to three folder names joined by '/' (any text but '/', '\\', NUL or control characters; not '.' or '..'), URL-encoded as UTF-8",
    );
  }
  const candidate = resolve(realRoot, ...parts);
  let real: string;
  try {
    real = realpathSync(candidate);
  } catch {
    throw new HttpError(404, `no run ${JSON.stringify(run)} under the root`);
  }
  if (!inside(realRoot, real) || !statSync(real).isDirectory())
    throw new HttpError(404, `no run ${JSON.stringify(run)} under the root`);
  return real;
}

/**
 * Resolve a file name inside a run's sub-folder (e.g. `traces`): one folder-name-like part, whose
 * real path (the folder's and the file's, symlinks followed) stays inside the root.
 */
export function resolveRunFile(realRoot: string, runDir: string, folder: string, name: string | null): string {
  if (name === null || name === "" || pathSegmentProblem(name) !== null) {
    throw new HttpError(
      400,
      "the file parameter must be one file name (no '/', '\\', NUL, not '.' or '..') as the list gives it",
    );
  }
  let real: string | null;
  try {
    real = realPathInside(realRoot, join(runDir, folder, name), `${folder}/${name}`);
  } catch {
    throw new HttpError(404, "no such file in this run");
  }
  if (real === null || !statSync(real).isFile()) throw new HttpError(404, "no such file in this run");
  return real;
}

/** A file of a run's sub-folder as the list shows it. */
interface RunFileEntry {
  readonly name: string;
  readonly size: number;
  readonly modified: number;
}

/**
 * The regular files of a run's sub-folder, sorted by name. Entries that are broken symlinks, that
 * resolve outside the root, or that are not files are left out (one bad link does not hide the
 * others); an absent folder, or one that itself resolves outside the root, lists nothing.
 */
export function listRunFiles(realRoot: string, runDir: string, folder: string): RunFileEntry[] {
  let dir: string | null;
  try {
    dir = realPathInside(realRoot, join(runDir, folder), folder);
  } catch {
    return [];
  }
  if (dir === null) return [];
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const files: RunFileEntry[] = [];
  for (const name of names) {
    try {
      const real = realPathInside(realRoot, join(dir, name), name);
      if (real === null) continue;
      const stat = statSync(real);
      if (stat.isFile()) files.push({ name, size: stat.size, modified: stat.mtimeMs });
    } catch {
      // Outside the root or unreadable: not listed.
    }
  }
  return files;
}
