/**
 * The one atomic file write of rankscope: write a temporary file beside the target, then rename it
 * over the target, so a reader sees the old content or the new, never half of one. The temporary
 * name is unique per process and call (`{path}.{pid}.{random}.tmp`), so two writers of one path —
 * two `rankscope wandb sync` processes, two async writes in one process — never write into each
 * other's temporary file; the last rename wins, whole. A failed write removes its temporary file.
 *
 * Beside it, `createFileOnce`: the exclusive create-with-header of files several writers share, and
 * `claimDirectory`: the exclusive create of a directory several processes may want (a run's).
 */
import { randomBytes } from "node:crypto";
import { closeSync, mkdirSync, openSync, renameSync, rmdirSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describeError, reportError } from "../core/diagnostics.js";
import { errorCode } from "../core/errors.js";

function tempPath(path: string): string {
  return `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
}

/** Replace `path` with `data` atomically (its directory is created if missing). Throws on failure. */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temp = tempPath(path);
  try {
    await writeFile(temp, data);
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw error;
  }
}

/** `writeFileAtomic`, synchronously (CLI commands, exit paths). Throws on failure. */
export function writeFileAtomicSync(path: string, data: string | Uint8Array): void {
  mkdirSync(dirname(path), { recursive: true });
  const temp = tempPath(path);
  try {
    writeFileSync(temp, data);
    renameSync(temp, path);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
}

/**
 * Create `path` with `header` only if it does not exist yet (exclusive create), so that of several
 * writers of one file — threads of a rank, a restarted process — exactly one writes the header.
 * True if this call created it; false if it existed or could not be created (then reported as
 * `file.write:{path}` with `what` saying what is lost).
 */
export function createFileOnce(path: string, header: string | Uint8Array, what: string): boolean {
  try {
    mkdirSync(dirname(path), { recursive: true });
    const fd = openSync(path, "wx");
    try {
      if (typeof header === "string") writeSync(fd, header);
      else writeSync(fd, header);
    } finally {
      closeSync(fd);
    }
    return true;
  } catch (error) {
    if (!(error instanceof Error && "code" in error && error.code === "EEXIST")) {
      reportError(`file.write:${path}`, `could not create ${path}: ${describeError(error)}; ${what}`);
    }
    return false;
  }
}

/** At most this many names are tried by `claimDirectory` (`name`, `name-2`, … `name-1000`). */
const MAX_CLAIM_TRIES = 1000;

/** A directory `claimDirectory` created: its path, and the parents it had to create (to remove them if left empty). */
interface ClaimedDirectory {
  readonly path: string;
  readonly name: string;
  /** The first parent folder this call created (`mkdir -p`'s answer), if any. */
  readonly createdParent: string | undefined;
}

/**
 * Create `{parent}/{name}`, or `{name}-2`, `{name}-3`, … when it exists: one `mkdir` each, which
 * the file system makes atomic, so two processes asking at the same moment never get the same
 * directory. Throws for any other error, and after `MAX_CLAIM_TRIES` names.
 */
export function claimDirectory(parent: string, name: string): ClaimedDirectory {
  const createdParent = mkdirSync(parent, { recursive: true });
  for (let n = 1; n <= MAX_CLAIM_TRIES; n++) {
    const candidate = n === 1 ? name : `${name}-${n}`;
    const path = join(parent, candidate);
    try {
      mkdirSync(path);
      return { path, name: candidate, createdParent };
    } catch (error) {
      if (errorCode(error) !== "EEXIST") throw error;
    }
  }
  throw new Error(`claimDirectory: ${parent}/${name} and its next ${MAX_CLAIM_TRIES - 1} numbered names all exist`);
}

/** Remove `path` if it is an empty directory (and then `upTo`, the parents created with it, while empty); never throws. */
export function removeIfEmpty(path: string, upTo?: string): void {
  try {
    rmdirSync(path);
  } catch {
    return;
  }
  if (upTo === undefined) return;
  for (let dir = dirname(path); dir.length >= upTo.length; dir = dirname(dir)) {
    try {
      rmdirSync(dir);
    } catch {
      return;
    }
    if (dir === upTo) return;
  }
}
