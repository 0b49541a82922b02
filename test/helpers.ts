/**
 * Shared test helpers: capture stdout or stderr, collect diagnostics, make temp dirs, run a TypeScript
 * snippet in a child, and `waitFor` — the one bounded wait every test uses.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setDiagnosticHandler, resetDiagnostics, type Diagnostic } from "../src/core/diagnostics.js";

/** Run `fn` with process.stdout.write captured; returns what was written. */
export function captureStdout(fn: () => unknown): Promise<string> {
  return captureWrites(process.stdout, fn);
}

/** Run `fn` with process.stderr.write captured (text lines: the alerts' firings, warnings); returns what was written. */
export function captureStderr(fn: () => unknown): Promise<string> {
  return captureWrites(process.stderr, fn);
}

async function captureWrites(stream: NodeJS.WriteStream, fn: () => unknown): Promise<string> {
  const original = stream.write.bind(stream);
  let out = "";
  stream.write = (chunk: string | Uint8Array, ...rest: never[]) => {
    // Bytes are the test runner's own reports (its serialised events, piped to stdout when
    // `node --test` runs this file in a child): passed on, or a test that ends meanwhile is lost.
    if (typeof chunk !== "string") return original(chunk, ...rest);
    out += chunk;
    return true;
  };
  try {
    await fn();
  } finally {
    stream.write = original;
  }
  return out;
}

/** Collect every diagnostic reported while `fn` runs. */
export async function collectDiagnostics(fn: () => unknown): Promise<Diagnostic[]> {
  resetDiagnostics();
  const seen: Diagnostic[] = [];
  const restore = setDiagnosticHandler((d) => seen.push(d), { everyTime: true });
  try {
    await fn();
  } finally {
    restore();
  }
  return seen;
}

/** Directories `tempDir` made in this process, removed when it exits. */
const madeDirs: string[] = [];
let removeAtExit = false;

/**
 * A fresh temporary directory, removed with everything in it when this process exits (each test
 * file is its own process), so a suite leaves nothing behind: one file alone writes 0.5 GB.
 * `RANKSCOPE_KEEP_TEST_DIRS=1` keeps them to look at after a failure.
 */
export function tempDir(prefix = "rankscope-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (process.env.RANKSCOPE_KEEP_TEST_DIRS === "1") return dir;
  madeDirs.push(dir);
  if (!removeAtExit) {
    removeAtExit = true;
    process.on("exit", () => {
      for (const made of madeDirs) {
        try {
          rmSync(made, { recursive: true, force: true, maxRetries: 2 });
        } catch {
          // Left behind (a file another user owns): the test's result stands.
        }
      }
    });
  }
  return dir;
}

/** The repository's root (the cwd of the children `runNode` starts; they resolve `tsx` from here). */
export const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * The tests' TypeScript loader (scripts/ts-loader.mjs), for `node --import TS_LOADER file.ts`: every
 * test file runs under it (scripts/test.sh), and a child that runs TypeScript source starts with it.
 */
export const TS_LOADER = new URL("../scripts/ts-loader.mjs", import.meta.url).href;

/** What a child process did. */
export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** When the process exited (`Date.now()`), which may be before its pipes closed. */
  exitedAt: number;
}

/** Options of {@link runNode}. */
export interface RunNodeOptions {
  /** Sees the child's whole output so far at each chunk (to signal it once it says it is ready). */
  onStdout?: (text: string, child: ChildProcess) => void;
  /** `args` go to `node` as given instead of after `--import TS_LOADER`. */
  raw?: boolean;
  /** A child still running after this is killed with SIGKILL, which `signal` then shows (default 90 s). */
  deadlineMs?: number;
  /**
   * Start the child as the leader of a process group of its own (`detached`), as a terminal starts
   * a job: `process.kill(-child.pid, signal)` then reaches it and every process it started, and
   * the deadline's SIGKILL goes to the whole group.
   */
  detached?: boolean;
}

/**
 * Run `node --import TS_LOADER ...args` (or `node ...args` with `raw`) from the repository root with
 * `env` added; resolves with its exit and output once it closed. The one child runner of the
 * tests: every child has a deadline, so a hung one cannot hang the test.
 */
export function runNode(
  args: readonly string[],
  env: Record<string, string>,
  { onStdout, raw = false, deadlineMs = 90_000, detached = false }: RunNodeOptions = {},
): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, raw ? args : ["--import", TS_LOADER, ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached,
    });
    const killer = setTimeout(() => {
      try {
        if (detached && child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
        else child.kill("SIGKILL");
      } catch {
        // The group ended meanwhile: nothing left to kill.
      }
    }, deadlineMs);
    let exitedAt = 0;
    child.once("exit", () => (exitedAt = Date.now()));
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
      onStdout?.(stdout, child);
    });
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stdout, stderr, exitedAt: exitedAt || Date.now() });
    });
  });
}

/**
 * Run a TypeScript snippet (ESM, through tsx) in a child process with `env` added; resolves with
 * its exit code and output. Killed after 60 s, so a hung snippet cannot hang the test.
 */
export async function runSnippet(
  code: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const result = await runNode(["--input-type=module", "-e", code], env, { deadlineMs: 60_000 });
  return { code: result.code, stdout: result.stdout, stderr: result.stderr };
}

/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /** Longest wait; past it `waitFor` throws. Bounds a broken test, never a timing assertion. */
  timeoutMs: number;
  /** What is awaited, as the end of "timed out after … ms waiting for <what>". */
  what: string;
  /** Pause between two checks (default 50 ms). */
  intervalMs?: number;
}

/**
 * Check `condition` until it returns a truthy value (awaited if it is a promise), and resolve with
 * that value. After `timeoutMs` it throws an Error naming `what`; a condition that throws ends the
 * wait with that error. The only wait-until helper of the tests: no poll without a deadline.
 * It sleeps on the real `setTimeout`, so it cannot run while `mock.timers` mocks it.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  { timeoutMs, what, intervalMs = 50 }: WaitForOptions,
): Promise<NonNullable<Awaited<T>>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() >= end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, Math.max(0, end - Date.now()))));
  }
}

/**
 * `promise`, or an Error naming `what` after `timeoutMs`: the bound on awaiting an event outside
 * the test's control (a child's or worker's exit, a server's answer). The promise's own rejection
 * passes through.
 */
export async function within<T>(
  promise: Promise<T>,
  { timeoutMs, what }: { timeoutMs: number; what: string },
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The built CLI, `dist/cli/main.js`, as users run it (`npx rankscope`, `npm run demo`): started
 * with plain node, and so are the ranks it spawns — no tsx loading the sources in each process
 * (a `rankscope demo` takes a third of the CPU). `npm test` builds first; a direct run of a test
 * file needs `npm run build`.
 */
export function builtCli(): string {
  const cli = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));
  if (!existsSync(cli)) throw new Error("dist/ is missing: run `npm run build` first (npm test does)");
  return cli;
}
