/** Helpers of the stream tests: run a child that streams, read a stream file back. */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (children resolve `tsx` from here). */
export const ROOT = join(here, "..", "..");

/** One parsed line of a stream file. */
export type StreamLine = Record<string, unknown>;

/** The lines of a stream file: records, and the writer's final line(s) (`stream_end`). */
export function readStream(file: string): { records: StreamLine[]; ends: StreamLine[] } {
  if (!existsSync(file)) return { records: [], ends: [] };
  const lines = readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l) as StreamLine);
  return { records: lines.filter((l) => !("stream_end" in l)), ends: lines.filter((l) => "stream_end" in l) };
}

/** What a child process did. */
export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Run a TypeScript file in a child process with `env` added; `onStdout` sees each chunk of its
 * output (to send it a signal when it says it is ready).
 */
export function runChild(file: string, args: string[], env: Record<string, string>, onStdout?: (text: string, child: ReturnType<typeof spawn>) => void): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", file, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
      onStdout?.(stdout, child);
    });
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** The child fixture that streams and then exits in a given way. */
export const STREAM_CHILD = join(here, "fixtures", "stream-child.ts");
