/**
 * The controller's account of its ranks: `rankscope/ranks_expected` and `rankscope/ranks_reporting`
 * at every flush of a job with ranks, a warning naming the missing ones, a flush that returns by
 * its deadline when a rank never answers, and a console that shows the counts only when a rank
 * was missing. (Real transports are tested in test/transport; here the ranks are in-process.)
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Collector } from "../../src/core/collector.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { LocalRankHandle, RankRuntime, type RankHandle, type RankSnapshot } from "../../src/pipeline/runtime.js";
import { captureStdout, collectDiagnostics, tempDir } from "../helpers.js";

function localRank(name: string, localRank: number): { handle: LocalRankHandle; collector: Collector } {
  const collector = new Collector();
  const runtime = new RankRuntime(
    { rank: localRank, rankName: name, processName: "Worker", localRank, localWorldSize: 2 },
    collector,
  );
  return { handle: new LocalRankHandle(runtime), collector };
}

/** A rank that never answers a flush (a hung process), but shuts down. */
function hungRank(name: string): RankHandle {
  return {
    rankName: name,
    init: async () => undefined,
    flush: () => new Promise<RankSnapshot>(() => undefined),
    shutdown: async () => undefined,
  };
}

test("ranks_expected and ranks_reporting are logged every step; the console shows them only when a rank was missing", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ processName: "Controller", runDir, flushDeadlineMs: 300 });
  await logger.initBackends({ console: { loggingMode: "global_reduce" }, jsonl: { loggingMode: "global_reduce" } });
  const a = localRank("Worker_aaaa_r0", 0);
  await logger.registerRank(a.handle);
  await logger.registerRank(hungRank("Worker_aaaa_r1"));

  let seen: Awaited<ReturnType<typeof collectDiagnostics>> = [];
  const out = await captureStdout(async () => {
    seen = await collectDiagnostics(async () => {
      a.collector.numericEntryFor("loss", "mean")?.accumulator.append(0.5);
      const incomplete = await logger.flush(0);
      assert.deepEqual(incomplete.missingRanks, ["Worker_aaaa_r1"]);
      assert.equal(incomplete.ranksExpected, 2, "the controller's own collector is not counted");
      assert.equal(incomplete.ranksReporting, 1);

      logger.deregisterRank("Worker_aaaa_r1");
      a.collector.numericEntryFor("loss", "mean")?.accumulator.append(0.25);
      const complete = await logger.flush(1);
      assert.deepEqual(complete.missingRanks, []);
    });
    await logger.shutdown();
  });

  const warning = seen.find((d) => d.code.startsWith("flush.missingRanks:"));
  assert.match(
    warning?.message ?? "",
    /flush\(0\): 1 of 2 ranks did not answer within 300 ms \(Worker_aaaa_r1\); logged what arrived/,
  );

  const tables = out.split("===============\n").filter((t) => t.includes("METRICS STEP"));
  assert.match(tables[0] ?? "", /loss: +0\.5\nrankscope\/ranks_expected: +2\.0\nrankscope\/ranks_reporting: +1\.0\n$/);
  assert.match(
    tables[1] ?? "",
    /=== \[GlobalReduce\] - METRICS STEP 1 ===\nloss: 0\.25\n$/,
    "complete step: no rank counts on the console",
  );

  const lines = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { key: string; value: number; step: number });
  const counts = lines.filter((l) => l.key.startsWith("rankscope/")).map((l) => [l.step, l.key, l.value]);
  assert.deepEqual(counts, [
    [0, "rankscope/ranks_expected", 2],
    [0, "rankscope/ranks_reporting", 1],
    [1, "rankscope/ranks_expected", 1],
    [1, "rankscope/ranks_reporting", 1],
  ]);
});

test("a single-process job logs no rank counts", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir() });
  await logger.initBackends({});
  const result = await logger.flush(0);
  assert.deepEqual(result.metrics, []);
  await logger.shutdown();
});

test("runId: letters, digits, _ and -; anything else is a clear error", () => {
  assert.equal(new MetricLogger({ runId: "exp-1_a", runDir: tempDir() }).runId, "exp-1_a");
  assert.throws(
    () => new MetricLogger({ runId: "exp.1", runDir: tempDir() }),
    /runId must be 1 to 128 letters, digits, "_" or "-" \(it is part of NATS subjects\), got "exp.1"/,
  );
});

test("a rank cannot take the controller's own name", async () => {
  const logger = new MetricLogger({ processName: "Trainer", runDir: tempDir() });
  await assert.rejects(
    logger.registerRank(localRank("Trainer", 0).handle),
    /a rank cannot be named "Trainer": that is the controller's own name/,
  );
  assert.deepEqual(logger.rankNames, ["Trainer"]);
  await logger.shutdown();
});
