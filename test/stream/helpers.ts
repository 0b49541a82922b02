/** Helpers of the stream tests: run a child that streams, read a stream file back. */
import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { runNode, type ChildResult } from "../helpers.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (children resolve `tsx` from here). */
export const ROOT = join(here, "..", "..");

/** One parsed line of a stream file. */
export type StreamLine = Record<string, unknown>;

/** The lines of a stream file: records, and the writer's final line(s) (`stream_end`). */
export function readStream(file: string): { records: StreamLine[]; ends: StreamLine[] } {
  if (!existsSync(file)) return { records: [], ends: [] };
  const lines = readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as StreamLine);
  return { records: lines.filter((l) => !("stream_end" in l)), ends: lines.filter((l) => "stream_end" in l) };
}

export type { ChildResult } from "../helpers.js";

/**
 * Run a file in a child process with `env` added (killed after 90 s): a TypeScript one under tsx, a
 * JavaScript one (on the built package) with plain node; `onStdout` sees its output so far (to send
 * it a signal when it says it is ready).
 */
export function runChild(
  file: string,
  args: string[],
  env: Record<string, string>,
  onStdout?: (text: string, child: ChildProcess) => void,
): Promise<ChildResult> {
  const raw = /\.[cm]?js$/.test(file);
  return runNode([file, ...args], env, onStdout === undefined ? { raw } : { onStdout, raw });
}

/** The child fixture that streams and then exits in a given way (built package, plain node). */
export const STREAM_CHILD = join(here, "fixtures", "stream-child.mjs");
