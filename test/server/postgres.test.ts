/**
 * A PostgreSQL started by a test is never orphaned: whether the test process throws, exits, is
 * sent SIGTERM or has a test fail by its timeout, the postmaster and its backends are gone and
 * the temporary folder removed once the process has ended.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { waitFor, within, TS_LOADER } from "../helpers.js";
import { postgresMissing } from "./postgres.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/pg-holder.ts", import.meta.url));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Run the fixture; once it has said where its PostgreSQL is, `poke` it; wait for it to end. */
async function endBadly(
  how: string,
  poke?: (pid: number) => void,
): Promise<{ dir: string; postmaster: number; code: number | null; signal: string | null }> {
  const child = spawn(
    process.execPath,
    ["--import", TS_LOADER, ...(how === "timeout" ? ["--test-force-exit"] : []), FIXTURE, how],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const ended = new Promise<[number | null, string | null]>((resolve) =>
    child.once("exit", (code, signal) => resolve([code, signal])),
  );
  await waitFor(() => /PG-HOLDER \{.*\}\n/.test(out), {
    timeoutMs: 60_000,
    what: `the ${how} fixture to start PostgreSQL (${out.slice(-500)})`,
  });
  const line = /PG-HOLDER (\{.*\})\n/.exec(out)?.[1] ?? "";
  const where: unknown = JSON.parse(line);
  assert.ok(
    typeof where === "object" &&
      where !== null &&
      "dir" in where &&
      "postmaster" in where &&
      typeof where.dir === "string" &&
      typeof where.postmaster === "number",
    line,
  );
  assert.ok(alive(where.postmaster), "PostgreSQL runs while the test does");
  if (child.pid !== undefined) poke?.(child.pid);
  const [code, signal] = await within(ended, {
    timeoutMs: 60_000,
    what: `the ${how} fixture to end (${out.slice(-500)})`,
  });
  return { dir: where.dir, postmaster: where.postmaster, code, signal };
}

// The four ways run at once: each is its own process with its own PostgreSQL.
describe("a test's PostgreSQL is never orphaned", { skip: postgresMissing() ?? undefined, concurrency: true }, () => {
  for (const [how, poke] of [
    ["throw", (pid: number) => process.kill(pid, "SIGUSR2")],
    ["exit", (pid: number) => process.kill(pid, "SIGUSR2")],
    ["hang", (pid: number) => process.kill(pid, "SIGTERM")],
    ["timeout", undefined],
  ] as const) {
    it(`when the test process ${how === "hang" ? "is sent SIGTERM" : how === "timeout" ? "has a test fail by its timeout" : how === "throw" ? "throws" : "exits mid-test"}`, async () => {
      const { dir, postmaster, code, signal } = await endBadly(how, poke);
      assert.ok(
        code !== 0 || signal !== null,
        `the ${how} fixture failed (code ${String(code)}, signal ${String(signal)})`,
      );
      // Ended as the case says, not by SIGUSR2's default action (which runs no exit drain).
      assert.notEqual(signal, "SIGUSR2", `the ${how} fixture was ended by SIGUSR2 before it listened for it`);
      // A deadline for a loaded machine (10 s ran out once in CI's suite on 2 busy cores).
      await waitFor(() => !alive(postmaster), {
        timeoutMs: 30_000,
        what: `PostgreSQL (pid ${postmaster}) to be gone after its test process ended`,
      });
      assert.equal(existsSync(dir), false, `the temporary folder ${dir} is removed`);
    });
  }
});
