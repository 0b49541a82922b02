/**
 * Faults: nothing hangs, nothing is lost silently. A rank killed mid-run, a rank too slow for the
 * flush deadline, a key reduced differently on different ranks, a rank stuck at shutdown, and a
 * rank that sends garbage.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { ignoredMessageCounts } from "../../src/transport/protocol/messages.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";
import { isAlive, SUM_RANK } from "./support.js";

function newLogger(options: { flushDeadlineMs?: number; shutdownDeadlineMs?: number } = {}): MetricLogger {
  return new MetricLogger({ processName: "Controller", runDir: tempDir(), ...options });
}

test("kill -9 of a child mid-run: the next flush logs the 3 live ranks of 4 and names the dead one; later flushes stop expecting it", async () => {
  const logger = newLogger({ flushDeadlineMs: 3000 });
  const seen = await collectDiagnostics(async () => {
    await logger.initBackends({});
    const actors = await spawnRanks({
      module: SUM_RANK,
      replicas: 2,
      ranksPerReplica: 2,
      processName: "MyActor",
      logger,
    });
    await actors.fanout("myFn");
    const first = await logger.flush(0);
    assert.deepEqual(first.missingRanks, []);
    assert.equal(first.metrics.find((m) => m.key === "my_sum_rank_metric")?.value, 2);

    await actors.fanout("myFn");
    const victim = actors.rankNames[1] as string; // local rank 1 of the first replica: it recorded 1
    const pid = actors.pid(victim) as number;
    process.kill(pid, "SIGKILL");
    const second = await logger.flush(1);
    assert.deepEqual(second.missingRanks, [victim]);
    assert.equal(second.ranksExpected, 4);
    assert.equal(second.ranksReporting, 3);
    assert.equal(second.metrics.find((m) => m.key === "rankscope/ranks_reporting")?.value, 3);
    assert.equal(second.metrics.find((m) => m.key === "rankscope/ranks_expected")?.value, 4);
    assert.equal(
      second.metrics.find((m) => m.key === "my_sum_rank_metric")?.value,
      1,
      "what arrived is logged: 0 + 0 + 1",
    );

    await waitFor(() => !logger.rankNames.includes(victim), {
      timeoutMs: 10_000,
      what: `${victim} to be deregistered`,
    });
    await actors.fanout("myFn");
    const third = await logger.flush(2);
    assert.deepEqual(third.missingRanks, []);
    assert.equal(third.ranksExpected, 3);
    assert.equal(third.ranksReporting, 3);
    assert.equal(third.metrics.find((m) => m.key === "my_sum_rank_metric")?.value, 1);
    await logger.shutdown();
    for (const name of actors.rankNames) {
      const rankPid = actors.pid(name) as number;
      await waitFor(() => !isAlive(rankPid), { timeoutMs: 5000, what: `rank ${name} (pid ${rankPid}) to exit` });
    }
  });
  const missing = seen.find((d) => d.code.startsWith("flush.missingRanks:"));
  assert.ok(missing !== undefined, "a warning about the missing rank");
  assert.match(
    missing.message,
    new RegExp(`flush\\(1\\): 1 of 4 ranks did not answer .*${victimPattern(missing.message)}`),
  );
  assert.ok(
    seen.some((d) => d.code.startsWith("rank.exited:") && /killed by SIGKILL/.test(d.message)),
    "the exit is reported with its signal",
  );
});

function victimPattern(message: string): string {
  return /MyActor_\w{4}_r1/.exec(message)?.[0] ?? "MyActor_????_r1";
}

test("a rank slower than the flush deadline: the flush returns without it, and its late answer joins its next flush, counted once", async () => {
  // Generous numbers: the fast rank must answer within the deadline even on a loaded machine.
  const logger = newLogger({ flushDeadlineMs: 2000 });
  const seen = await collectDiagnostics(async () => {
    await logger.initBackends({});
    const ranks = await spawnRanks({
      module: SUM_RANK,
      ranksPerReplica: 2,
      kind: "thread",
      processName: "Slow",
      logger,
    });
    await ranks.fanout("myFn");
    const [fast, slow] = ranks.rankNames as [string, string];
    const lateBefore = ignoredMessageCounts().late;
    // Stuck until the flush returned without it (by its deadline), then released: its answer is late.
    const release = join(tempDir(), "release");
    const blocked = ranks.call(slow, "blockUntil", release).catch(() => undefined);
    const result = await logger.flush(0);
    writeFileSync(release, "");
    assert.deepEqual(result.missingRanks, [slow]);
    assert.equal(
      result.metrics.find((m) => m.key === "my_sum_rank_metric")?.value,
      0,
      `only ${fast} (local rank 0) reported`,
    );
    await blocked;
    await waitFor(() => ignoredMessageCounts().late > lateBefore, {
      timeoutMs: 10_000,
      what: "the late answer to arrive",
    });
    await ranks.fanout("myFn");
    const next = await logger.flush(1);
    assert.deepEqual(next.missingRanks, []);
    // Step 1: fast 0 + slow 1, plus the slow rank's late step-0 value (1), once: nothing lost, nothing twice.
    assert.equal(
      next.metrics.find((m) => m.key === "my_sum_rank_metric")?.value,
      2,
      "the late step-0 value is carried into step 1, once",
    );
    await ranks.fanout("myFn");
    const third = await logger.flush(2);
    assert.equal(third.metrics.find((m) => m.key === "my_sum_rank_metric")?.value, 1, "and only once");
    await logger.shutdown();
  });
  assert.ok(
    seen.some(
      (d) =>
        d.code === "transport.late" &&
        /answered flush\(0\) after the flush deadline; its values are carried into its next flush/.test(d.message),
    ),
  );
});

test("a key reduced differently on different ranks: an error naming the key and the ranks; the other keys are logged", async () => {
  const logger = newLogger();
  const seen = await collectDiagnostics(async () => {
    await logger.initBackends({});
    const ranks = await spawnRanks({
      module: SUM_RANK,
      ranksPerReplica: 2,
      kind: "thread",
      processName: "Mixed",
      logger,
      env: { MIXED_SETTING: "7" },
    });
    assert.deepEqual(await ranks.fanout("envValue", "MIXED_SETTING"), ["7", "7"], "env reaches worker threads");
    assert.equal(process.env["MIXED_SETTING"], undefined, "a thread's env is its own copy");
    const [a, b] = ranks.rankNames as [string, string];
    await ranks.call(a, "record", "loss", 1, "sum");
    await ranks.call(b, "record", "loss", 3, "max");
    await ranks.fanout("record", "reward", 2, "mean");
    const result = await logger.flush(0);
    assert.equal(
      result.metrics.find((m) => m.key === "loss"),
      undefined,
    );
    assert.equal(result.metrics.find((m) => m.key === "reward")?.value, 2);
    await logger.shutdown();
  });
  const conflict = seen.find((d) => d.code === "reduce.conflict:loss");
  assert.ok(conflict !== undefined && conflict.level === "error", "an error about loss");
  assert.match(conflict.message, /metric "loss" was recorded with different reductions on different ranks/);
  assert.match(conflict.message, /"sum" on Mixed_\w{4}_r0/);
  assert.match(conflict.message, /"max" on Mixed_\w{4}_r1/);
});

for (const kind of ["process", "thread"] as const) {
  test(`shutdown does not hang on a stuck ${kind} rank: it returns by its deadline and the rank is gone`, async () => {
    const logger = newLogger({ shutdownDeadlineMs: 1500 });
    const ranks = await spawnRanks({ module: SUM_RANK, kind, processName: "Stuck", logger });
    const [name] = ranks.rankNames as [string];
    const pid = ranks.pid(name);
    void ranks.call(name, "block", 60_000).catch(() => undefined);
    await collectDiagnostics(() => logger.shutdown());
    assert.deepEqual(ranks.liveRankNames, [], "the rank is stopped");
    if (pid !== undefined) await waitFor(() => !isAlive(pid), { timeoutMs: 5000, what: `pid ${pid} to exit` });
  });
}

for (const kind of ["process", "thread"] as const) {
  test(`malformed and foreign messages from a ${kind} rank are counted and ignored`, async () => {
    const logger = newLogger();
    const before = { ...ignoredMessageCounts() };
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({});
      const ranks = await spawnRanks({ module: SUM_RANK, kind, processName: "Noisy", logger });
      await ranks.fanout("sendGarbage", logger.runId);
      await ranks.fanout("myFn");
      const result = await logger.flush(0);
      assert.deepEqual(result.missingRanks, []);
      await logger.shutdown();
    });
    const after = ignoredMessageCounts();
    assert.equal(after.malformed - before.malformed, 3, "not JSON, a bad id, an unknown type");
    assert.equal(after.foreign - before.foreign, 4, "not rankscope (twice), another version, another run");
    assert.ok(seen.some((d) => d.code === "transport.foreign" && d.message.includes("is not a rankscope message")));
  });
}

test("a controller killed with SIGKILL leaves no rank running", async () => {
  const controller = spawn(
    process.execPath,
    [fileURLToPath(new URL("../fixtures/built/controller-job.mjs", import.meta.url))],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let out = "";
  controller.stdout.on("data", (d: Buffer) => (out += d.toString()));
  await waitFor(() => out.includes("\n"), { timeoutMs: 60_000, what: "the controller to start its ranks" });
  const pids = JSON.parse(out.trim()) as number[];
  assert.equal(pids.length, 2);
  for (const pid of pids) assert.ok(isAlive(pid), `rank pid ${pid} runs`);
  controller.kill("SIGKILL");
  for (const pid of pids)
    await waitFor(() => !isAlive(pid), { timeoutMs: 10_000, what: `orphaned rank pid ${pid} to exit` });
});
