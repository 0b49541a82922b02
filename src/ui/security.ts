/**
 * The dashboard's guards: who may ask (a token off loopback), what they may name (runs and files
 * strictly inside the root), and which Host headers a loopback server answers (DNS rebinding).
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { realpathSync, statSync } from "node:fs";
import { isAbsolute, relative, resolve, sep } from "node:path";

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
export function isLoopbackHost(host: string): boolean {
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

const RUN_PART = /^[A-Za-z0-9._-][A-Za-z0-9._ -]*$/;

/** Whether `child` is `parent` or inside it (both absolute, normalised). */
function inside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel) && !rel.split(sep).includes(".."));
}

/**
 * Resolve a `run` parameter (`experiment/trial`, or one to three plain names as the store finds
 * runs) to its directory under `root`. Anything that is not plain names, or whose real path (after symlinks) leaves the root, is refused with a 4xx.
 */
export function resolveRunDir(root: string, run: string | null): string {
  if (run === null || run === "") throw new HttpError(400, "missing the run parameter (experiment/trial, as /api/runs lists it)");
  const parts = run.split("/");
  if (parts.length < 1 || parts.length > 3 || !parts.every((p) => RUN_PART.test(p) && p !== "." && p !== "..")) {
    throw new HttpError(400, "the run parameter must be experiment/trial as /api/runs lists it: plain names of letters, digits, '.', '_', '-' or spaces, joined by '/'");
  }
  const realRoot = realpathSync(root);
  const candidate = resolve(realRoot, ...parts);
  let real: string;
  try {
    real = realpathSync(candidate);
  } catch {
    throw new HttpError(404, "no such run under the root");
  }
  if (!inside(realRoot, real) || !statSync(real).isDirectory()) throw new HttpError(404, "no such run under the root");
  return real;
}

const FILE_NAME = /^[A-Za-z0-9._-]+$/;

/** Resolve a file name inside a run's sub-folder (e.g. `traces`); plain names only. */
export function resolveRunFile(runDir: string, folder: string, name: string | null): string {
  if (name === null || !FILE_NAME.test(name) || name === "." || name === "..") {
    throw new HttpError(400, "the file parameter must be a plain file name (letters, digits, '.', '_', '-') as the list gives it");
  }
  let real: string;
  let realFolder: string;
  try {
    realFolder = realpathSync(resolve(runDir, folder));
    real = realpathSync(resolve(realFolder, name));
  } catch {
    throw new HttpError(404, "no such file in this run");
  }
  if (!inside(realFolder, real) || !statSync(real).isFile()) throw new HttpError(404, "no such file in this run");
  return real;
}
