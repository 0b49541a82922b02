/**
 * A rank that crashed is not silently forgotten (issue 20 item 15, issue 24 item 3): kill -9 one
 * spawned rank mid-run, then a normal `shutdown()`. Every later flush counts it
 * (`FlushResult.lostRanks`, `rankscope/ranks_lost`), the store records it, and the run reads
 * `finished` with the lost rank named — in the read API and `rankscope runs` — not `running`.
 * Real child processes, a real SIGKILL, a real store, the built CLI.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { before, test } from "node:test";
import { MetricLogger, spawnRanks, type FlushResult } from "../fixtures/built/index.mjs";
import { alerts, closeStores, runInfo, series } from "../../src/store/reader.js";
import { RANKS_LOST_KEY } from "../../src/core/internal-keys.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";

/** The jobs run on the built package (fixtures/built/): their ranks start without tsx. */
const SEED_RANK = new URL("../fixtures/built/seed-rank.mjs", import.meta.url);

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const CLI = join(REPO, "dist", "cli", "main.js");

before(() => {
  if (!existsSync(CLI)) spawnSync("npm", ["run", "build", "--silent"], { cwd: REPO, stdio: "inherit" });
});

test("kill -9 one spawned rank, then a normal shutdown(): the run is finished, the lost rank named and counted for the rest of the run", async () => {
  const root = tempDir();
  const runDir = join(root, "lossy", "t");
  const logger = new MetricLogger({ processName: "Controller", runDir, experiment: "lossy", trial: "t", quiet: true });
  let victim = "";
  const flushes: FlushResult[] = [];
  const seen = await collectDiagnostics(async () => {
    await logger.initBackends({
      store: { loggingMode: "global_reduce", waitForWrites: true },
      rankStore: { type: "store", loggingMode: "per_rank_reduce" },
    });
    const ranks = await spawnRanks({ module: SEED_RANK, ranksPerReplica: 3, processName: "Lossy", logger });
    victim = ranks.rankNames[1] as string;
    for (let step = 0; step < 2; step++) {
      await ranks.fanout("myFn");
      flushes.push(await logger.flush(step));
    }
    process.kill(ranks.pid(victim) as number, "SIGKILL");
    await waitFor(() => !logger.rankNames.includes(victim), {
      timeoutMs: 20_000,
      what: `${victim} to be deregistered after its SIGKILL`,
    });
    for (let step = 2; step < 4; step++) {
      await ranks.fanout("myFn");
      flushes.push(await logger.flush(step));
    }
    await logger.shutdown();
  });
  assert.deepEqual(
    flushes.map((f) => f.lostRanks ?? []),
    [[], [], [victim], [victim]],
    "every flush after the loss names the lost rank",
  );
  assert.deepEqual(
    flushes.map((f) => f.metrics.find((m) => m.key === RANKS_LOST_KEY)?.value ?? null),
    [null, null, 1, 1],
  );
  assert.ok(seen.some((d) => d.code === `rank.exited:${victim}` && /killed by SIGKILL/.test(d.message)));

  const run = runInfo(runDir);
  assert.equal(run.status, "finished", "the job shut down normally; its lost rank does not leave it running");
  assert.deepEqual(
    run.lostRanks?.map((l) => ({
      rank: l.rank,
      rankName: l.rankName,
      step: l.step,
      reason: l.reason,
      backStep: l.backStep,
    })),
    [{ rank: 1, rankName: victim, step: 1, reason: "exited (killed by SIGKILL)", backStep: null }],
    "recorded once by the controller (its dead store writer is the same rank, not a second one)",
  );
  assert.deepEqual(
    series(runDir, RANKS_LOST_KEY).points.map((p) => [p.step, p.value]),
    [
      [2, 1],
      [3, 1],
    ],
  );
  closeStores();
  const cli = spawnSync(process.execPath, [CLI, "runs", "--root", root], { encoding: "utf8", timeout: 60_000 });
  assert.equal(cli.status, 0, cli.stderr);
  assert.match(cli.stdout, /^lossy\s+t\s+finished\s/m, cli.stdout);
  assert.ok(cli.stdout.includes(`  lost rank 1 (${victim}) after step 1: exited (killed by SIGKILL)`), cli.stdout);
});

test("with the store per rank only (no global store), the lost rank and the alerts (ended with the run) are still in the run's file", async () => {
  const root = tempDir();
  const runDir = join(root, "perrank", "t");
  const logger = new MetricLogger({
    processName: "Controller",
    runDir,
    experiment: "perrank",
    trial: "t",
    quiet: true,
  });
  let victim = "";
  await collectDiagnostics(async () => {
    await logger.initBackends({ store: { loggingMode: "per_rank_reduce", waitForWrites: true } });
    const ranks = await spawnRanks({ module: SEED_RANK, ranksPerReplica: 2, processName: "PerRank", logger });
    victim = ranks.rankNames[1] as string;
    await ranks.fanout("myFn");
    await logger.flush(0);
    process.kill(ranks.pid(victim) as number, "SIGKILL");
    await waitFor(() => !logger.rankNames.includes(victim), {
      timeoutMs: 20_000,
      what: `${victim} to be deregistered after its SIGKILL`,
    });
    await ranks.fanout("myFn");
    await logger.flush(1);
    await logger.shutdown();
  });
  assert.deepEqual(
    runInfo(runDir).lostRanks?.map((l) => [l.rank, l.rankName, l.reason]),
    [[1, victim, "exited (killed by SIGKILL)"]],
    "the controller's own per-rank store recorded the loss",
  );
  assert.deepEqual(
    alerts(runDir)
      .filter((a) => a.rule === "rank_lost")
      .map((a) => a.state),
    ["firing", "ended"],
    "the rank_lost alert is in the run's file, ended with the run (not left firing)",
  );
  closeStores();
});
