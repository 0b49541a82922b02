/**
 * Ranks over NATS, against a real nats-server on 127.0.0.1 (a free port, started by the test):
 * the seed job, a process that joins by environment variables, an unreachable server, a server
 * restarted mid-run, two runs on one server, and garbage on the run's subjects. The seed job runs
 * on the built package (fixtures/built/): its four ranks start without tsx.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { connect } from "@nats-io/transport-node";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { serveRanksOverNats } from "../../src/transport/controller/nats.js";
import { ignoredMessageCounts } from "../../src/transport/protocol/messages.js";
import * as built from "../fixtures/built/index.mjs";
import { serveRanksOverNats as serveBuiltRanksOverNats } from "../fixtures/built/nats.mjs";
import { captureStdout, collectDiagnostics, tempDir, waitFor, within, TS_LOADER } from "../helpers.js";
import { consoleOutput, freePort, NatsServer, SUM_RANK, TEST_RUN_SECRET } from "./support.js";

const EXTERNAL_RANK = new URL("../fixtures/external-rank.ts", import.meta.url);
const SEED_RANK = new URL("../fixtures/built/seed-rank.mjs", import.meta.url);

function newLogger(options: { flushDeadlineMs?: number; runId?: string } = {}): MetricLogger {
  return new MetricLogger({ processName: "Controller", runDir: tempDir(), ...options });
}

/** Run the external fixture with `node --import TS_LOADER`; resolves with its exit code and output. */
function runExternal(env: Record<string, string>): {
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
  kill: () => void;
} {
  const child = spawn(process.execPath, ["--import", TS_LOADER, EXTERNAL_RANK.pathname], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  return {
    done: new Promise((resolve) => child.once("exit", (code) => resolve({ code, stdout, stderr }))),
    kill: () => child.kill("SIGKILL"),
  };
}

test("NATS unreachable at start: a clear error naming the URL, on the controller and on a rank", async () => {
  const url = `nats://127.0.0.1:${await freePort()}`;
  const logger = newLogger();
  await assert.rejects(serveRanksOverNats({ url, logger, connectTimeoutMs: 1000 }), (error: Error) => {
    assert.match(error.message, new RegExp(`cannot reach the NATS server at ${url.replace(/[.]/g, "\\.")}`));
    return true;
  });
  await logger.shutdown();
  const rank = await within(
    runExternal({
      RANKSCOPE_NATS_URL: url,
      RANKSCOPE_RUN_ID: "nobody",
      RANKSCOPE_RUN_SECRET: TEST_RUN_SECRET,
      RANKSCOPE_JOIN_DEADLINE_MS: "600",
    }).done,
    { timeoutMs: 30_000, what: "a rank that cannot reach NATS to give up" },
  );
  assert.notEqual(rank.code, 0);
  assert.ok(rank.stderr.includes(`cannot reach the NATS server at ${url}`), rank.stderr);
});

describe("with a nats-server", () => {
  let server: NatsServer;
  before(async () => {
    server = await NatsServer.start();
  });
  after(async () => {
    await server.stop();
  });

  test("seed 001 §2 over NATS, all three modes; a process started elsewhere joins by env vars", async () => {
    const logger = new built.MetricLogger({ processName: "Controller", runDir: tempDir() });
    let rankNames: string[] = [];
    const out = await captureStdout(async () => {
      await logger.initBackends({ console: { loggingMode: "global_reduce" } });
      const nats = await serveBuiltRanksOverNats({ url: server.url, logger });
      const actors = await built.spawnRanks({
        module: SEED_RANK,
        replicas: 2,
        ranksPerReplica: 2,
        processName: "MyActor",
        logger,
        nats,
      });
      for (let i = 0; i < 2; i++) await actors.fanout("myFn");
      const external = runExternal({
        RANKSCOPE_NATS_URL: server.url,
        RANKSCOPE_RUN_ID: logger.runId,
        RANKSCOPE_RUN_SECRET: logger.runSecret,
        EXTERNAL_VALUE: "5",
      });
      await waitFor(() => nats.rankNames.some((n) => n.startsWith("External_")), {
        timeoutMs: 20_000,
        what: "the external rank to join",
      });
      const result = await logger.flush(0);
      assert.deepEqual(result.missingRanks, []);
      assert.equal(result.ranksReporting, 5, "4 spawned ranks and the external one");
      assert.equal(result.metrics.find((m) => m.key === "external/value")?.value, 5);

      await logger.initBackends({ console: { loggingMode: "per_rank_reduce" } }, { replace: true });
      for (let i = 0; i < 2; i++) await actors.fanout("myFn");
      await logger.flush(1);
      await actors.syncOutput();
      await logger.initBackends({ console: { loggingMode: "per_rank_no_reduce" } }, { replace: true });
      for (let i = 0; i < 2; i++) await actors.fanout("myFn");
      await logger.flush(2);
      await actors.syncOutput();
      rankNames = actors.rankNames;
      await logger.shutdown();
      const exit = await within(external.done, {
        timeoutMs: 30_000,
        what: "the external rank to leave after shutdown",
      });
      assert.equal(exit.code, 0, exit.stderr);
      assert.match(exit.stdout, /joined as External_\w{4}_r0/);
      assert.match(exit.stdout, /left: shut down by the controller/);
    });
    const printed = consoleOutput(out);
    assert.ok(
      printed.startsWith(
        "=== [GlobalReduce] - METRICS STEP 0 ===\nexternal/value:     5.0\nmy_sum_rank_metric: 4.0\n===============\n",
      ),
      printed,
    );
    for (const name of rankNames) {
      const value = name.endsWith("_r0") ? "0.0" : "2.0";
      assert.ok(
        printed.includes(`=== [${name}] - METRICS STEP 1 ===\nmy_sum_rank_metric: ${value}\n===============\n`),
        `per_rank_reduce table of ${name}`,
      );
    }
    assert.equal(
      printed.match(/\[0\] \[MyActor-0\/2\] \S+ \S+ INFO my_sum_rank_metric: 0\n/g)?.length,
      4,
      "per_rank_no_reduce lines of local rank 0",
    );
    assert.equal(
      printed.match(/\[1\] \[MyActor-1\/2\] \S+ \S+ INFO my_sum_rank_metric: 1\n/g)?.length,
      4,
      "per_rank_no_reduce lines of local rank 1",
    );
  });

  test("server restarted mid-run: the flush during the outage returns naming the missing ranks; later flushes are complete", async () => {
    const logger = newLogger({ flushDeadlineMs: 2500 });
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({});
      const nats = await serveRanksOverNats({ url: server.url, logger, maxMissedFlushes: 10 });
      const actors = await spawnRanks({
        module: SUM_RANK,
        replicas: 1,
        ranksPerReplica: 2,
        processName: "Survivor",
        logger,
        nats,
      });
      await actors.fanout("myFn");
      assert.deepEqual((await logger.flush(0)).missingRanks, []);

      await server.stop();
      const during = await logger.flush(1);
      assert.deepEqual([...during.missingRanks].sort(), [...actors.rankNames].sort());
      assert.equal(during.ranksReporting, 0);
      assert.equal(during.ranksExpected, 2);

      await server.restart();
      let step = 2;
      await waitFor(async () => (await logger.flush(step++)).missingRanks.length === 0, {
        timeoutMs: 20_000,
        what: "a complete flush after the restart",
      });
      await actors.fanout("myFn");
      const afterRestart = await logger.flush(step);
      assert.deepEqual(afterRestart.missingRanks, []);
      assert.equal(afterRestart.metrics.find((m) => m.key === "my_sum_rank_metric")?.value, 1);
      await logger.shutdown();
    });
    const missing = seen.find((d) => d.code.startsWith("flush.missingRanks:") && d.message.startsWith("flush(1)"));
    assert.ok(
      missing !== undefined && /Survivor_\w{4}_r0/.test(missing.message) && /Survivor_\w{4}_r1/.test(missing.message),
      missing?.message,
    );
  });

  test("a NATS rank that dies without leaving is no longer expected after maxMissedFlushes silent flushes", async () => {
    const logger = newLogger({ flushDeadlineMs: 1500 });
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({});
      const nats = await serveRanksOverNats({ url: server.url, logger, maxMissedFlushes: 2 });
      const external = runExternal({
        RANKSCOPE_NATS_URL: server.url,
        RANKSCOPE_RUN_ID: logger.runId,
        RANKSCOPE_RUN_SECRET: logger.runSecret,
      });
      await waitFor(() => nats.rankNames.length === 1, { timeoutMs: 20_000, what: "the external rank to join" });
      const [name] = nats.rankNames as [string];
      assert.deepEqual((await logger.flush(0)).missingRanks, []);
      external.kill();
      await within(external.done, { timeoutMs: 10_000, what: "the SIGKILLed external rank to exit" });
      for (let step = 1; step <= 3; step++)
        assert.deepEqual((await logger.flush(step)).missingRanks, [name], `flush(${step})`);
      const after = await logger.flush(4);
      assert.deepEqual(after.missingRanks, []);
      assert.equal(after.ranksExpected, 0);
      await logger.shutdown();
    });
    assert.ok(
      seen.some(
        (d) =>
          d.code.startsWith("rank.silent:") &&
          /missed 2 flushes in a row; it is no longer expected at flush until it answers or registers again/.test(
            d.message,
          ),
      ),
    );
  });

  test("two runs on one server never see each other's messages; garbage on a run's subjects is counted and ignored", async () => {
    const loggerA = newLogger({ runId: "run-a" });
    const loggerB = newLogger({ runId: "run-b" });
    const before = { ...ignoredMessageCounts() };
    await collectDiagnostics(async () => {
      await loggerA.initBackends({});
      await loggerB.initBackends({});
      const natsA = await serveRanksOverNats({ url: server.url, logger: loggerA });
      const natsB = await serveRanksOverNats({ url: server.url, logger: loggerB });
      // Same process name on purpose: the same rank names exist in both runs.
      const a = await spawnRanks({
        module: SUM_RANK,
        ranksPerReplica: 2,
        processName: "Twin",
        logger: loggerA,
        nats: natsA,
      });
      const b = await spawnRanks({
        module: SUM_RANK,
        ranksPerReplica: 2,
        processName: "Twin",
        logger: loggerB,
        nats: natsB,
      });
      await a.fanout("record", "only_a", 1, "sum");
      await b.fanout("record", "only_b", 10, "sum");

      const raw = await connect({ servers: server.url });
      raw.publish("rankscope.run-a.register", "{not json");
      raw.publish(
        "rankscope.run-a.register",
        JSON.stringify({ proto: "rankscope", v: 1, run: "run-b", t: "register" }),
      );
      raw.publish(
        "rankscope.run-a.deregister",
        JSON.stringify({ proto: "rankscope", v: 1, run: "run-a", t: "deregister" }),
      );
      raw.publish("rankscope.run-a.flush", "garbage for every rank of run a");
      await raw.flush();
      await raw.close();

      const [flushA, flushB] = await Promise.all([loggerA.flush(0), loggerB.flush(0)]);
      assert.deepEqual(flushA.missingRanks, []);
      assert.deepEqual(flushB.missingRanks, []);
      assert.equal(flushA.ranksExpected, 2);
      assert.equal(flushB.ranksExpected, 2);
      assert.deepEqual(
        flushA.metrics.filter((m) => !m.key.startsWith("rankscope/")).map((m) => [m.key, m.value]),
        [["only_a", 2]],
      );
      // Each rank of run a dropped the garbage flush and logged that it did.
      assert.ok(
        (flushA.metrics.find((m) => m.key === "rankscope/rejected/unauthenticated")?.value ?? 0) >= 2,
        JSON.stringify(flushA.metrics),
      );
      assert.deepEqual(
        flushB.metrics.filter((m) => !m.key.startsWith("rankscope/")).map((m) => [m.key, m.value]),
        [["only_b", 20]],
      );
      await Promise.all([loggerA.shutdown(), loggerB.shutdown()]);
    });
    const afterCounts = ignoredMessageCounts();
    assert.ok(
      afterCounts.unauthenticated - before.unauthenticated >= 3,
      "not JSON, a message of run b, a deregister without a rank name: none sealed with run a's secret",
    );
  });
});
