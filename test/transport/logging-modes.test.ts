/**
 * Seed 001 section 2, exactly: an actor on 2 replicas × 2 ranks records its local rank with SUM,
 * twice, then the controller flushes step 0 — once per logging mode, over child processes and
 * over worker threads. The job runs on the built package (fixtures/built/): its 24 ranks start
 * without tsx loading the sources, as a user's compiled job does.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MetricLogger, spawnRanks, type LoggingMode } from "../fixtures/built/index.mjs";
import { captureStdout, tempDir } from "../helpers.js";
import { consoleOutput } from "./support.js";

const SEED_RANK = new URL("../fixtures/built/seed-rank.mjs", import.meta.url);

async function runSeedJob(
  kind: "process" | "thread",
  loggingMode: LoggingMode,
): Promise<{ out: string; rankNames: string[] }> {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir() });
  let rankNames: string[] = [];
  const out = await captureStdout(async () => {
    await logger.initBackends({ console: { loggingMode } });
    const actors = await spawnRanks({
      module: SEED_RANK,
      replicas: 2,
      ranksPerReplica: 2,
      kind,
      processName: "MyActor",
      logger,
    });
    rankNames = actors.rankNames;
    for (let i = 0; i < 2; i++) await actors.fanout("myFn");
    const result = await logger.flush(0);
    assert.equal(
      result.ranksReporting,
      result.ranksExpected,
      `every rank answers: missing ${result.missingRanks.join(", ")}`,
    );
    await actors.syncOutput();
    await logger.shutdown();
  });
  return { out: consoleOutput(out), rankNames };
}

for (const kind of ["process", "thread"] as const) {
  describe(`seed 001 §2 over ${kind === "process" ? "child processes" : "worker threads"}`, () => {
    test("global_reduce prints one value: 4.0; ranks are named {processName}_{replicaId}_r{localRank}", async () => {
      const { out, rankNames } = await runSeedJob(kind, "global_reduce");
      assert.equal(out, "=== [GlobalReduce] - METRICS STEP 0 ===\nmy_sum_rank_metric: 4.0\n===============\n");
      assert.equal(rankNames.length, 4);
      for (const name of rankNames) assert.match(name, /^MyActor_[0-9A-Za-z]{4}_r[01]$/);
      assert.equal(new Set(rankNames.map((n) => n.split("_")[1])).size, 2, "two replicas");
    });

    test("per_rank_reduce prints 0.0 and 2.0 per replica", async () => {
      const { out, rankNames } = await runSeedJob(kind, "per_rank_reduce");
      for (const name of rankNames) {
        const value = name.endsWith("_r0") ? "0.0" : "2.0";
        assert.ok(
          out.includes(`=== [${name}] - METRICS STEP 0 ===\nmy_sum_rank_metric: ${value}\n===============\n`),
          `table of ${name} with ${value} in:\n${out}`,
        );
      }
      assert.equal(out.match(/METRICS STEP 0/g)?.length, 4, "one table per rank, none from the controller");
    });

    test("per_rank_no_reduce prints every raw value as a stream line", async () => {
      const { out } = await runSeedJob(kind, "per_rank_no_reduce");
      const lines = out.trimEnd().split("\n");
      assert.equal(lines.length, 8, out);
      const time = "\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}";
      const rank0 = new RegExp(`^\\[0\\] \\[MyActor-0/2\\] ${time} INFO my_sum_rank_metric: 0$`);
      const rank1 = new RegExp(`^\\[1\\] \\[MyActor-1/2\\] ${time} INFO my_sum_rank_metric: 1$`);
      assert.equal(lines.filter((l) => rank0.test(l)).length, 4, out);
      assert.equal(lines.filter((l) => rank1.test(l)).length, 4, out);
    });
  });
}
