/**
 * Issue 24 case 4: a slow `per_rank_no_reduce` backend costs that backend, never the flush. Two child
 * ranks record 10–100 values every 5 ms while their backend's `logStream` takes 20–200 ms; the
 * controller flushes every 300 ms for 6 s (fixtures/slow-stream-job.mjs, on the built package).
 * Before, the rank's flush waited for every delivery, those made meanwhile included, so every
 * flush hit the 5 s flush deadline and named both healthy ranks missing (from the first flush on: a
 * longer soak only repeats it). The flush times themselves (slow against healthy) are a
 * benchmark: `npm run bench -- slow-stream`.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { runNode, tempDir } from "../helpers.js";
import { ROOT } from "./helpers.js";

const JOB = join(ROOT, "test", "stream", "fixtures", "slow-stream-job.mjs");
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface FlushLine {
  flush: number;
  ms: number;
  missing: string[];
}

/** The values of `key` in metrics.jsonl, one per flush (summed over ranks). */
function jsonlValues(runDir: string, key: string): number[] {
  return readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { key: string; value: number })
    .filter((l) => l.key === key)
    .map((l) => l.value);
}

describe("a slow per_rank_no_reduce backend", () => {
  it(
    "a 6 s soak: no flush names a rank missing, the backend's backlog is counted at the flushes, and recorded = received + dropped, exactly",
    { timeout: 180_000 },
    async () => {
      const runDir = tempDir("rankscope-slow-stream-");
      dirs.push(runDir);
      const result = await runNode(
        [JOB],
        { CHILD_RUN_DIR: runDir, SOAK_MS: "6000", FLUSH_EVERY_MS: "300" },
        { raw: true, deadlineMs: 150_000 },
      );
      assert.equal(result.code, 0, result.stderr);
      const lines = result.stdout.split("\n").filter((l) => l.startsWith("{"));
      const flushes = lines
        .map((l) => JSON.parse(l) as Partial<FlushLine>)
        .filter((l): l is FlushLine => typeof l.flush === "number");
      const missing = flushes.filter((f) => f.missing.length > 0);
      assert.deepEqual(missing, [], `flushes that named a healthy rank missing (each waited for the flush deadline)`);
      assert.ok(flushes.length >= 10, `only ${flushes.length} flushes in the soak: ${result.stdout.slice(-500)}`);
      assert.doesNotMatch(result.stderr, /did not answer within/);

      // The backend was behind at some flushes, and each flush said by how much.
      const backlog = jsonlValues(runDir, "rankscope/stream_backlog/slowstream");
      assert.ok(
        backlog.some((v) => v > 0),
        `the slow backend was never behind at a flush: ${JSON.stringify(backlog)}`,
      );
      const dropped = jsonlValues(runDir, "rankscope/stream_backend_dropped/slowstream").reduce((a, b) => a + b, 0);
      const ringDropped = jsonlValues(runDir, "rankscope/stream_dropped").at(-1) ?? 0;

      // Nothing lost silently: every recorded value reached the backend or was counted as dropped.
      const end = JSON.parse(lines.at(-1) ?? "{}") as { recorded?: number[]; received?: number[] };
      const recorded = (end.recorded ?? []).reduce((a, b) => a + b, 0);
      const received = (end.received ?? []).reduce((a, b) => a + b, 0);
      assert.ok(recorded > 0, `the ranks recorded nothing: ${result.stdout.slice(-500)}`);
      assert.equal(
        received + dropped + ringDropped,
        recorded,
        `received ${received} + dropped ${dropped} + ring ${ringDropped} != recorded ${recorded}`,
      );
    },
  );
});
