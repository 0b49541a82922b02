/**
 * The one atomic file write of rankscope: write a temporary file beside the target, then rename it
 * over the target, so a reader sees the old content or the new, never half of one. The temporary
 * name is unique per process and call (`{path}.{pid}.{random}.tmp`), so two writers of one path —
 * two `rankscope wandb sync` processes, two async writes in one process — never write into each
 * other's temporary file; the last rename wins, whole. A failed write removes its temporary file.
 *
 * Beside it, `createFileOnce`: the exclusive create-with-header of files several writers share.
 */
import { randomBytes } from "node:crypto";
import { closeSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { describeError, reportError } from "../core/diagnostics.js";

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
