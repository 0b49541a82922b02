/**
 * A user's own worker thread's raw values (issue 20, item 2): with a per_rank_no_reduce backend,
 * values a `new Worker(...)` records reach every stream sink — the store, the console, the stream
 * file, a jsonl backend — under the worker's own recorder (its owner and its threadId), never
 * merged into the owner's line, with no call of the user's. Real worker threads, a real rank
 * process, a real SQLite store. Values the worker records at once, before its link is answered,
 * are not lost.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Worker } from "node:worker_threads";
import { CONTROLLER_RANK, lineOf, ranks, series } from "../../src/store/reader.js";
import {
  MetricLogger,
  record,
  spawnRanks,
  startWorkers,
  stopWorkers,
  workerRecord,
  workerStreaming,
} from "../core/rank-identity/fixtures/recorder.mjs";
import { captureStdout, collectDiagnostics, tempDir, waitFor, within } from "../helpers.js";
import { readStream } from "./helpers.js";

/** The built package (plain node), as in topologies.test.ts: the controller, its rank and the user workers start without tsx. */
const RANK_MODULE = new URL("../core/rank-identity/fixtures/recorder.mjs", import.meta.url);

/** A stream series' values in arrival order. */
const streamValues = (runDir: string, line: number): number[] =>
  series(runDir, "tokens", { kind: "stream", rank: line, maxPoints: Infinity }).points.map((p) => p.value);

describe("a user worker thread's raw values", () => {
  it(
    "reach the store, console, stream file and jsonl under the worker's own recorder, in the controller and in a rank",
    { timeout: 120_000 },
    async () => {
      const runDir = tempDir();
      const logger = new MetricLogger({ runDir, processName: "Ctl", flushDeadlineMs: 20_000, quiet: true });
      let ownThread = 0;
      let rankThread = 0;
      const out = await captureStdout(async () => {
        await logger.initBackends({
          store: { loggingMode: "per_rank_no_reduce", waitForWrites: true },
          console: { loggingMode: "per_rank_no_reduce" },
          jsonl: { loggingMode: "per_rank_no_reduce" },
        });
        const group = await spawnRanks({ module: RANK_MODULE, processName: "Gen", logger });
        const rank0 = group.rankNames[0] ?? "";
        [ownThread = 0] = await startWorkers(1);
        [rankThread = 0] = await group.call<number[]>(rank0, "startWorkers", 1);
        for (let step = 0; step < 2; step++) {
          record("tokens", [step + 0.5], "sum");
          // Fifty values at once: the first ones are recorded before the worker's link is answered.
          await workerRecord(
            0,
            "tokens",
            Array.from({ length: 50 }, (_, i) => 1000 * (step + 1) + i),
            "sum",
          );
          await group.call(rank0, "record", "tokens", [step + 0.25], "sum");
          await group.call(rank0, "workerRecord", 0, "tokens", [7000 + step], "sum");
          await logger.flush(step);
        }
        await stopWorkers();
        await logger.shutdown();
      });
      const workerValues = [0, 1].flatMap((step) => Array.from({ length: 50 }, (_, i) => 1000 * (step + 1) + i));
      const ownLine = lineOf({ role: "controller", rank: 0, thread: ownThread });
      const rankLine = lineOf({ role: "rank", rank: 0, thread: rankThread });

      // The store: one line per recorder, each holding exactly what that recorder recorded.
      assert.deepEqual(streamValues(runDir, CONTROLLER_RANK), [0.5, 1.5], "the controller's own thread");
      assert.deepEqual(streamValues(runDir, ownLine), workerValues, "the controller's user worker");
      assert.deepEqual(streamValues(runDir, 0), [0.25, 1.25], "rank 0's own thread");
      assert.deepEqual(streamValues(runDir, rankLine), [7000, 7001], "rank 0's user worker");
      const lines = ranks(runDir);
      assert.deepEqual(
        lines.filter((r) => r.thread !== 0).map((r) => [r.rank, r.role, r.thread, r.rankName, r.label]),
        [
          [ownLine, "controller", ownThread, `Ctl/thread-${ownThread}`, `controller · thread ${ownThread}`],
          [
            rankLine,
            "rank",
            rankThread,
            `${lines.find((r) => r.rank === 0)?.rankName}/thread-${rankThread}`,
            `rank 0 · thread ${rankThread}`,
          ],
        ].sort((a, b) => Math.abs(Number(a[0])) - Math.abs(Number(b[0]))),
      );

      // The stream files: the controller's own and its worker's in controller.jsonl, rank 0's in rank-0.jsonl.
      const controllerFile = readStream(join(runDir, "streams", "controller.jsonl")).records;
      assert.deepEqual(
        controllerFile.filter((r) => r["thread"] === undefined).map((r) => [r["role"], r["value"]]),
        [
          ["controller", 0.5],
          ["controller", 1.5],
        ],
      );
      assert.deepEqual(
        controllerFile.filter((r) => r["thread"] === ownThread).map((r) => r["value"]),
        workerValues,
      );
      assert.ok(
        controllerFile.every((r) => !("rank" in r)),
        "the controller's lines carry no rank: they are not rank 0's",
      );
      const rankFile = readStream(join(runDir, "streams", "rank-0.jsonl")).records;
      // Lines of two threads interleave as the writer drains their rings; each thread's are in order.
      assert.deepEqual(
        rankFile.filter((r) => r["thread"] === undefined).map((r) => [r["rank"], r["value"]]),
        [
          [0, 0.25],
          [0, 1.25],
        ],
      );
      assert.deepEqual(
        rankFile.filter((r) => r["thread"] === rankThread).map((r) => [r["rank"], r["value"]]),
        [
          [0, 7000],
          [0, 7001],
        ],
      );
      assert.equal(rankFile.length, 4);

      // The console (the controller's process; the rank prints on its own stdout, forwarded).
      const printed = (out.match(/^\[controller\] \[Ctl\] \[thread \d+\] \S+ \S+ INFO tokens: \d+$/gm) ?? []).map((l) =>
        Number(l.split(": ")[1]),
      );
      assert.deepEqual(printed, workerValues);

      // A jsonl backend: the worker's lines in the controller's file, with their thread.
      const jsonl = readFileSync(join(runDir, "metrics-Ctl.jsonl"), "utf8")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.deepEqual(
        jsonl.filter((l) => l["thread"] === ownThread).map((l) => l["value"]),
        workerValues,
      );
    },
  );

  it(
    "of a short-lived worker that never yields to its event loop reach the store when it ends",
    { timeout: 120_000 },
    async () => {
      const runDir = tempDir();
      const logger = new MetricLogger({ runDir, processName: "Short", flushDeadlineMs: 20_000, quiet: true });
      const values = [1, 2, 3, 4, 5];
      let thread = 0;
      const seen = await collectDiagnostics(async () => {
        await logger.initBackends({ store: { loggingMode: "per_rank_no_reduce", waitForWrites: true } });
        for (let run = 0; run < 3; run++) {
          // The worker records and ends: its link's question is never answered in the worker.
          const worker = new Worker(new URL("./fixtures/short-worker.mjs", import.meta.url), {
            workerData: { values: values.map((v) => v + 10 * run) },
          });
          if (run === 0) thread = worker.threadId;
          const exited = new Promise<number>((resolve, reject) => {
            worker.once("exit", resolve);
            worker.once("error", reject);
          });
          assert.equal(await within(exited, { timeoutMs: 60_000, what: "the short worker to end" }), 0);
        }
        await logger.flush(0);
        await logger.shutdown();
      });
      assert.deepEqual(
        streamValues(runDir, lineOf({ role: "controller", rank: 0, thread })),
        values,
        "every raw value the first worker recorded, on its own line",
      );
      const workerLines = ranks(runDir).filter((r) => r.thread !== 0);
      assert.equal(workerLines.length, 3, "one line per worker");
      const all = workerLines.flatMap((r) => streamValues(runDir, r.rank)).sort((a, b) => a - b);
      assert.deepEqual(
        all,
        [0, 10, 20].flatMap((offset) => values.map((v) => v + offset)),
      );
      assert.deepEqual(
        seen.filter((d) => d.code.startsWith("stream.")).map((d) => d.message),
        [],
        "nothing lost to report",
      );
    },
  );

  it(
    "stop being kept while the main thread does not stream, and stream once it starts",
    { timeout: 120_000 },
    async () => {
      const runDir = tempDir();
      const logger = new MetricLogger({ runDir, processName: "Late", flushDeadlineMs: 20_000, quiet: true });
      const [thread = 0] = await startWorkers(1);
      // No per_rank_no_reduce backend yet: the main thread answers that nothing streams.
      await workerRecord(0, "tokens", [1, 2], "sum");
      await waitFor(async () => !(await workerStreaming(0)), {
        timeoutMs: 20_000,
        what: "the worker to stop keeping raw values nobody streams",
      });
      await logger.initBackends({ store: { loggingMode: "per_rank_no_reduce", waitForWrites: true } });
      await waitFor(() => workerStreaming(0), {
        timeoutMs: 20_000,
        what: "the worker to stream once the main thread does",
      });
      await workerRecord(0, "tokens", [3, 4], "sum");
      await logger.flush(0);
      await stopWorkers();
      await logger.shutdown();
      assert.deepEqual(
        streamValues(runDir, lineOf({ role: "controller", rank: 0, thread })),
        [3, 4],
        "only what was recorded while the main thread streamed",
      );
    },
  );
});
