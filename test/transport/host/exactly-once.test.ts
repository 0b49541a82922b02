/**
 * Exactly-once answers over a real nats-server (issue 31): an answer lost on its way — a rank's to
 * the controller it joined directly, a rank's to its host agent, a host agent's to the controller —
 * is kept by its sender until acknowledged and goes into the next flush, once. Every flush that
 * reports every rank holds every value recorded before it, and the run's sum is exact.
 *
 * The loss is made at the receiver: its connection is a `SealedNats` that drops the next answers
 * the test asks it to (what a nats-server node that dies with the message in flight does).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { NatsRankServer } from "../../../src/transport/controller/nats.js";
import { HostAgent } from "../../../src/transport/host/agent.js";
import { collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { agentEnv, droppingConnection, ExactRun, killAgent, serveHosts } from "../exactly-once-support.js";
import { killChildren, natsServerForSuite, startChild, type TestChild } from "../support.js";

const AGENT_MAIN = new URL("../../../src/transport/host/main.ts", import.meta.url);

const nats = natsServerForSuite();

test("a rank's answer lost on its way to the controller (NATS, joined directly) goes into the next flush, once", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 1500 });
  const sealed = await droppingConnection(nats.server.url, logger);
  const ranksServer = new NatsRankServer(nats.server.url, logger.runId, logger.runSecret, sealed, logger, 10);
  logger.onShutdown(() => ranksServer.close());
  const run = new ExactRun(logger, nats.server.url);
  await run.joinRanks("Exact");
  const seen = await collectDiagnostics(async () => {
    await waitFor(async () => (await run.flush()).length === 0 && ranksServer.rankNames.length === 2, {
      timeoutMs: 20_000,
      what: "a flush with both ranks",
    });
    run.record(1);
    assert.deepEqual(await run.flush(), []);
    sealed.dropping = 1;
    run.record(10);
    assert.equal((await run.flush()).length, 1, "the rank whose answer was lost is named missing");
    assert.equal(sealed.dropped, 1);
    run.record(100);
    assert.deepEqual(await run.flush(), [], "complete again, with the lost answer's values");
    assert.deepEqual(await run.flush(), [], "nothing taken twice");
    await logger.shutdown();
  });
  await run.leave();
  assert.equal(run.logged, 2 * (1 + 10 + 100), "the run's sum is exact");
  assert.ok(
    seen.some(
      (d) =>
        d.code.startsWith("transport.resent:") &&
        /flush\(\d+\) was never acknowledged \(lost in transit/.test(d.message),
    ),
  );
});

test("through a host agent: a rank's answer lost on its way to the agent, and the agent's lost on its way to the controller, each go into the next flush, once", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 1500 });
  const { toController } = await serveHosts(nats.server.url, logger, 10);
  const toAgent = await droppingConnection(nats.server.url, logger);
  const agent = new HostAgent(
    { url: nats.server.url, runId: logger.runId, hostId: "hexact", runSecret: logger.runSecret },
    toAgent,
    logger.runSecret,
  );
  await agent.start();
  const run = new ExactRun(logger, nats.server.url);
  await run.joinRanks("Exact", { scope: "hexact" });
  const seen = await collectDiagnostics(async () => {
    await waitFor(async () => (await run.flush()).length === 0 && agent.rankNames.length === 2, {
      timeoutMs: 20_000,
      what: "a flush with both ranks",
    });
    run.record(1);
    assert.deepEqual(await run.flush(), []);

    toAgent.dropping = 1;
    run.record(10);
    assert.equal((await run.flush()).length, 1, "the rank whose answer the agent lost is named missing");
    run.record(100);
    assert.deepEqual(await run.flush(), [], "complete again, with the lost answer's values");

    toController.dropping = 1;
    run.record(1000);
    assert.equal((await run.flush()).length, 2, "the host's answer was lost: both its ranks named missing");
    assert.equal(toController.dropped, 1);
    run.record(10_000);
    assert.deepEqual(await run.flush(), [], "complete again, with the lost host answer's values");
    assert.deepEqual(await run.flush(), [], "nothing taken twice");
    await logger.shutdown();
  });
  await run.leave();
  await agent.close();
  assert.equal(run.logged, 2 * (1 + 10 + 100 + 1000 + 10_000), "the run's sum is exact");
  assert.ok(seen.some((d) => d.code === "host.resent:hexact"));
});

test("a host agent process killed (-9) between flushes, and one killed with its answer on the way: its replacement takes what the ranks still keep, once — nothing lost, nothing twice", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 2000 });
  const { toController } = await serveHosts(nats.server.url, logger, 1000);
  const children: TestChild[] = [];
  const startAgent = (): TestChild =>
    startChild(AGENT_MAIN, agentEnv(nats.server.url, logger, { RANKSCOPE_HOST_ID: "hkill" }), children);
  let agent = startAgent();
  const run = new ExactRun(logger, nats.server.url);
  await run.joinRanks("Exact", { scope: "hkill" });
  try {
    await run.complete("a flush with both ranks");
    run.record(1);
    assert.deepEqual(await run.flush(), []);

    // Killed between flushes: the controller logged its last answer; the ranks still keep theirs
    // (their ack rides on the next flush request), and the replacement is told not to take them.
    run.record(10);
    assert.deepEqual(await run.flush(), []);
    await killAgent(agent, "the SIGKILLed agent to exit");
    agent = startAgent();
    run.record(100);
    await run.complete("a complete flush through the replacement agent");

    // Killed with its answer on the way: the controller never has it (dropped at the receiver, as a
    // NATS node that dies with it would); the ranks keep their answers until it is logged.
    run.record(1000);
    toController.dropping = 1;
    assert.equal((await run.flush()).length, 2, "the host's answer was lost: both its ranks named missing");
    assert.equal(toController.dropped, 1);
    await killAgent(agent, "the SIGKILLed agent to exit");
    agent = startAgent();
    run.record(10_000);
    await run.complete("a complete flush through the second replacement");
    run.record(100_000);
    assert.deepEqual(await run.flush(), [], "nothing taken twice");
    assert.equal(run.logged, 2 * 111_111, "the run's sum is exact");
  } finally {
    await logger.shutdown();
    await run.leave();
    killChildren(children);
  }
});
