/**
 * Many rank processes writing one store at once while a reader polls: nobody sees "database is
 * locked", and every point of every rank is there at the end.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { after, test } from "node:test";
import { closeStores, keys, runInfo, series } from "../../src/store/reader.js";
import { CHUNK_POINTS } from "../../src/store/schema.js";
import { tempDir, TS_LOADER } from "../helpers.js";

after(() => closeStores());

const CHILD = fileURLToPath(new URL("./fixtures/rank-writer.ts", import.meta.url));

/** Longest a writer child may run: past it it is killed (exit code null), so the reader's poll below ends too. */
const CHILD_TIMEOUT_MS = 120_000;

function runChild(
  runDir: string,
  rank: number,
  steps: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", TS_LOADER, CHILD, runDir, String(rank), String(steps)], {
      stdio: ["ignore", "pipe", "pipe"],
      timeout: CHILD_TIMEOUT_MS,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

test("4 rank processes write one store while a reader polls: no lock errors, every point present", async () => {
  const dir = tempDir();
  const ranks = 4;
  const steps = CHUNK_POINTS + 500; // long enough to pack chunks while the others write
  const children = Array.from({ length: ranks }, (_, r) => runChild(dir, r, steps));
  let done = false;
  const readerErrors: string[] = [];
  let polls = 0;
  let sawPartial = false;
  const poll = async (): Promise<void> => {
    while (!done) {
      try {
        for (const k of keys(dir, "scalar")) {
          for (const rank of k.ranks) {
            const r = series(dir, k.key, { rank, maxPoints: 500 });
            if (r.total > 0 && r.total < steps) sawPartial = true;
          }
        }
        polls++;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        // Before the first writer created the file there is nothing to read yet.
        if (!/no rankscope store/.test(message)) readerErrors.push(message);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const reading = poll();
  const results = await Promise.all(children);
  done = true;
  await reading;

  for (const [rank, r] of results.entries()) {
    assert.doesNotMatch(r.stderr, /database is locked|SQLITE_BUSY/i, `rank ${rank} stderr`);
    assert.equal(r.code, 0, `rank ${rank} exited with ${r.code}: ${r.stderr}`);
  }
  assert.deepEqual(readerErrors, []);
  assert.ok(polls > 0, "the reader read while the writers wrote");
  assert.ok(sawPartial, "the reader saw series while they were being written");

  for (const key of ["loss", "reward", "lr", "grad_norm", "tokens"]) {
    for (let rank = 0; rank < ranks; rank++) {
      const { points } = series(dir, key, { rank, maxPoints: Infinity });
      assert.equal(points.length, steps, `${key} rank ${rank}`);
      const i = ["loss", "reward", "lr", "grad_norm", "tokens"].indexOf(key);
      points.forEach((p, step) => assert.equal(p.value, rank * 1e6 + step * 10 + i));
    }
  }
  for (let rank = 0; rank < ranks; rank++) {
    const stream = series(dir, "latency", { kind: "stream", rank, maxPoints: Infinity });
    assert.equal(stream.points.length, steps * 4, `stream of rank ${rank}`);
  }
  assert.equal(runInfo(dir).status, "finished");
});
