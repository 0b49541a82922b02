/** spawnRanks and joinRun: what users get wrong, ranks registered before initBackends, failures at start. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { joinRun } from "../../../src/transport/rank/join.js";
import { spawnRanks } from "../../../src/transport/controller/launcher.js";
import { captureStdout, collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { consoleOutput, isAlive, SUM_RANK } from "../support.js";

const BROKEN_RANK = new URL("../../fixtures/broken-rank.ts", import.meta.url);
const PROBE_RANK = new URL("../../fixtures/probe-rank.ts", import.meta.url);

test("spawnRanks rejects bad options with what was wrong and what is valid", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await assert.rejects(
    spawnRanks({ module: SUM_RANK, kind: "gpu" as "thread", logger }),
    /kind must be "process" or "thread", got "gpu"/,
  );
  await assert.rejects(
    spawnRanks({ module: SUM_RANK, replicas: 0, logger }),
    /replicas must be a positive integer, got 0/,
  );
  await assert.rejects(
    spawnRanks({ module: SUM_RANK, processName: "my actor", logger }),
    /processName must be 1 to 128 letters, digits/,
  );
  await assert.rejects(
    spawnRanks({ module: SUM_RANK, output: "loud" as "ordered", logger }),
    /output must be "immediate" or "ordered"/,
  );
  await assert.rejects(spawnRanks({} as never), /spawnRanks takes \{ module/);
  await logger.shutdown();
});

test("joinRun without a controller address says how to give one", async () => {
  const saved = { url: process.env["RANKSCOPE_NATS_URL"], run: process.env["RANKSCOPE_RUN_ID"] };
  delete process.env["RANKSCOPE_NATS_URL"];
  try {
    await assert.rejects(
      joinRun({ processName: "Lonely" }),
      /no controller to join: pass \{ natsUrl, runId \} \(or set RANKSCOPE_NATS_URL and RANKSCOPE_RUN_ID\)/,
    );
    await assert.rejects(joinRun({ natsUrl: "nats://127.0.0.1:1" }), /a run id is needed/);
  } finally {
    if (saved.url !== undefined) process.env["RANKSCOPE_NATS_URL"] = saved.url;
  }
});

test("a rank module that fails at import: spawnRanks rejects naming the rank and what it printed; no rank is left running", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  let error: Error | undefined;
  await collectDiagnostics(async () => {
    try {
      await spawnRanks({ module: BROKEN_RANK, ranksPerReplica: 2, processName: "Broken", logger });
    } catch (e) {
      error = e as Error;
    }
  });
  assert.ok(error !== undefined, "spawnRanks rejected");
  assert.match(
    error.message,
    /rank Broken_\w{4}_r[01] exited with code 1 before it started; it printed:\n.*its module failed to load: broken-rank: cannot load the model weights/,
  );
  assert.deepEqual(logger.rankNames, ["Controller"], "no rank stays registered");
  await logger.shutdown();
});

test("ranks registered before initBackends get the per-rank backends when it runs; stop() ends them", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir() });
  const ranks = await spawnRanks({
    module: SUM_RANK,
    ranksPerReplica: 2,
    processName: "Early",
    logger,
    output: "ordered",
    env: { EARLY_SETTING: "42" },
  });
  const pids = ranks.rankNames.map((n) => ranks.pid(n) as number);
  assert.deepEqual(await ranks.fanout("envValue", "EARLY_SETTING"), ["42", "42"], "env reaches child processes");
  const out = await captureStdout(async () => {
    await logger.initBackends({ console: { loggingMode: "per_rank_reduce" } });
    await ranks.fanout("myFn");
    await logger.flush(0);
    await ranks.syncOutput();
  });
  const [r0, r1] = ranks.rankNames as [string, string];
  assert.equal(
    consoleOutput(out),
    `=== [${r0}] - METRICS STEP 0 ===\nmy_sum_rank_metric: 0.0\n===============\n=== [${r1}] - METRICS STEP 0 ===\nmy_sum_rank_metric: 1.0\n===============\n`,
    "ordered output: rank by rank",
  );
  await ranks.stop();
  assert.deepEqual(logger.rankNames, ["Controller"]);
  for (const pid of pids) await waitFor(() => !isAlive(pid), { timeoutMs: 5000, what: `pid ${pid} to exit` });
  await logger.shutdown();
});

test("a rank registered after initBackends gets the per-rank config and the primary backend's metadata; its module's own backend works", async () => {
  await import("../../fixtures/probe-rank.js");
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir() });
  const out = await captureStdout(async () => {
    await logger.initBackends({
      probe: { loggingMode: "global_reduce" },
      probeRanks: { type: "probe", loggingMode: "per_rank_reduce" },
    });
    const ranks = await spawnRanks({
      module: PROBE_RANK,
      ranksPerReplica: 2,
      kind: "thread",
      processName: "Probe",
      logger,
    });
    assert.deepEqual(await ranks.fanout("metadataSeen"), [
      [{ sharedRunId: "shared-1" }],
      [{ sharedRunId: "shared-1" }],
    ]);
    await ranks.fanout("record", 3);
    await logger.flush(0);
    await ranks.syncOutput();
    await logger.shutdown();
  });
  const lines = out
    .split("\n")
    .map((l) => /probe \S+ step=0 probe\/value=\d+/.exec(l)?.[0])
    .filter((l) => l !== undefined)
    .sort();
  assert.equal(lines.length, 3, out);
  assert.equal(lines[0], "probe GlobalReduce step=0 probe/value=6");
  assert.match(lines[1] ?? "", /^probe Probe_\w{4}_r0 step=0 probe\/value=3$/);
  assert.match(lines[2] ?? "", /^probe Probe_\w{4}_r1 step=0 probe\/value=3$/);
});
