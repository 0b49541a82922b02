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
import { connect } from "@nats-io/transport-node";
import { after, before, test } from "node:test";
import { Collector } from "../../../src/core/collector.js";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { RankRuntime } from "../../../src/pipeline/runtime.js";
import { NatsRankServer } from "../../../src/transport/controller/nats.js";
import { HostAgent } from "../../../src/transport/host/agent.js";
import { HostServer } from "../../../src/transport/host/server.js";
import { RunKey } from "../../../src/transport/protocol/seal.js";
import { SealedNats, type OpenedMessage } from "../../../src/transport/protocol/sealed-nats.js";
import { joinOverNats } from "../../../src/transport/rank/nats.js";
import { RankAgent } from "../../../src/transport/rank/rank-agent.js";
import { isWireFrame } from "../../../src/transport/wire/codec.js";
import { collectDiagnostics, tempDir, waitFor, within } from "../../helpers.js";
import { killChildren, NatsServer, startChild, type TestChild } from "../support.js";

const AGENT_MAIN = new URL("../../../src/transport/host/main.ts", import.meta.url);

/** A receiver's connection that drops the next `dropping` answers (wire frames) it receives. */
class DroppingNats extends SealedNats {
  dropping = 0;
  dropped = 0;

  override subscribe(subject: string, handler: (message: OpenedMessage) => void): ReturnType<SealedNats["subscribe"]> {
    return super.subscribe(subject, (message) => {
      if (this.dropping > 0 && isWireFrame(message.data)) {
        this.dropping--;
        this.dropped++;
        return;
      }
      handler(message);
    });
  }
}

let server: NatsServer;
before(async () => {
  server = await NatsServer.start();
});
after(async () => {
  await server.stop();
});

async function droppingConnection(logger: MetricLogger): Promise<DroppingNats> {
  return new DroppingNats(await connect({ servers: server.url }), RunKey.derive(logger.runSecret, logger.runId));
}

/** Two ranks in this process, joined over NATS (to the controller, or to the agent of `scope`). */
async function joinRanks(
  logger: MetricLogger,
  scope?: string,
): Promise<{ record: (value: number) => void; leave: () => Promise<void> }> {
  const ranks = await Promise.all(
    [0, 1].map(async (local) => {
      const identity = {
        rank: local,
        rankName: `Exact_${scope ?? "direct"}_r${local}`,
        processName: "Exact",
        localRank: local,
        localWorldSize: 2,
      };
      const collector = new Collector();
      const leave = await joinOverNats(
        new RankAgent({ runId: logger.runId, runtime: new RankRuntime(identity, collector) }),
        {
          url: server.url,
          runId: logger.runId,
          runSecret: logger.runSecret,
          joinDeadlineMs: 20_000,
          ...(scope === undefined ? {} : { scope }),
        },
      );
      return { collector, leave };
    }),
  );
  return {
    record: (value) => ranks.forEach((r) => r.collector.recordSlow("values", value, "sum")),
    leave: async () => void (await Promise.all(ranks.map((r) => r.leave("the test is over")))),
  };
}

/** Flushes `logger`, checking that every flush that names no rank missing holds every value recorded before it. */
function flusher(logger: MetricLogger, recorded: () => number) {
  let step = 0;
  let logged = 0;
  return {
    get logged(): number {
      return logged;
    },
    async flush(): Promise<readonly string[]> {
      const result = await logger.flush(step++);
      logged += result.metrics.find((m) => m.key === "values")?.value ?? 0;
      if (result.missingRanks.length === 0)
        assert.equal(logged, recorded(), `flush(${result.step}) reports every rank: it holds every value`);
      return result.missingRanks;
    },
  };
}

test("a rank's answer lost on its way to the controller (NATS, joined directly) goes into the next flush, once", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 1500 });
  const sealed = await droppingConnection(logger);
  const ranksServer = new NatsRankServer(server.url, logger.runId, logger.runSecret, sealed, logger, 10);
  logger.onShutdown(() => ranksServer.close());
  const ranks = await joinRanks(logger);
  let recorded = 0;
  const record = (value: number): void => {
    ranks.record(value);
    recorded += 2 * value;
  };
  const f = flusher(logger, () => recorded);
  const seen = await collectDiagnostics(async () => {
    await waitFor(async () => (await f.flush()).length === 0 && ranksServer.rankNames.length === 2, {
      timeoutMs: 20_000,
      what: "a flush with both ranks",
    });
    record(1);
    assert.deepEqual(await f.flush(), []);
    sealed.dropping = 1;
    record(10);
    assert.equal((await f.flush()).length, 1, "the rank whose answer was lost is named missing");
    assert.equal(sealed.dropped, 1);
    record(100);
    assert.deepEqual(await f.flush(), [], "complete again, with the lost answer's values");
    assert.deepEqual(await f.flush(), [], "nothing taken twice");
    await logger.shutdown();
  });
  await ranks.leave();
  assert.equal(f.logged, 2 * (1 + 10 + 100), "the run's sum is exact");
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
  const toController = await droppingConnection(logger);
  const hosts = new HostServer(server.url, logger.runId, toController, logger, 10);
  logger.onShutdown(() => hosts.close());
  const toAgent = await droppingConnection(logger);
  const agent = new HostAgent(
    { url: server.url, runId: logger.runId, hostId: "hexact", runSecret: logger.runSecret },
    toAgent,
    logger.runSecret,
  );
  await agent.start();
  const ranks = await joinRanks(logger, "hexact");
  let recorded = 0;
  const record = (value: number): void => {
    ranks.record(value);
    recorded += 2 * value;
  };
  const f = flusher(logger, () => recorded);
  const seen = await collectDiagnostics(async () => {
    await waitFor(async () => (await f.flush()).length === 0 && agent.rankNames.length === 2, {
      timeoutMs: 20_000,
      what: "a flush with both ranks",
    });
    record(1);
    assert.deepEqual(await f.flush(), []);

    toAgent.dropping = 1;
    record(10);
    assert.equal((await f.flush()).length, 1, "the rank whose answer the agent lost is named missing");
    record(100);
    assert.deepEqual(await f.flush(), [], "complete again, with the lost answer's values");

    toController.dropping = 1;
    record(1000);
    assert.equal((await f.flush()).length, 2, "the host's answer was lost: both its ranks named missing");
    assert.equal(toController.dropped, 1);
    record(10_000);
    assert.deepEqual(await f.flush(), [], "complete again, with the lost host answer's values");
    assert.deepEqual(await f.flush(), [], "nothing taken twice");
    await logger.shutdown();
  });
  await ranks.leave();
  await agent.close();
  assert.equal(f.logged, 2 * (1 + 10 + 100 + 1000 + 10_000), "the run's sum is exact");
  assert.ok(seen.some((d) => d.code === "host.resent:hexact"));
});

test("a host agent process killed (-9) between flushes, and one killed with its answer on the way: its replacement takes what the ranks still keep, once — nothing lost, nothing twice", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 2000 });
  const toController = await droppingConnection(logger);
  const hosts = new HostServer(server.url, logger.runId, toController, logger, 1000);
  logger.onShutdown(() => hosts.close());
  const children: TestChild[] = [];
  const startAgent = (): TestChild =>
    startChild(
      AGENT_MAIN,
      {
        RANKSCOPE_NATS_URL: server.url,
        RANKSCOPE_RUN_ID: logger.runId,
        RANKSCOPE_RUN_SECRET: logger.runSecret,
        RANKSCOPE_HOST_ID: "hkill",
      },
      children,
    );
  const killAgent = async (agent: TestChild): Promise<void> => {
    agent.process.kill("SIGKILL");
    await within(agent.exited, { timeoutMs: 10_000, what: "the SIGKILLed agent to exit" });
  };
  let agent = startAgent();
  const ranks = await joinRanks(logger, "hkill");
  let recorded = 0;
  const record = (value: number): void => {
    ranks.record(value);
    recorded += 2 * value;
  };
  const f = flusher(logger, () => recorded);
  const complete = (what: string): Promise<boolean> =>
    waitFor(async () => (await f.flush()).length === 0, { timeoutMs: 60_000, what });
  try {
    await complete("a flush with both ranks");
    record(1);
    assert.deepEqual(await f.flush(), []);

    // Killed between flushes: the controller logged its last answer; the ranks still keep theirs
    // (their ack rides on the next flush request), and the replacement is told not to take them.
    record(10);
    assert.deepEqual(await f.flush(), []);
    await killAgent(agent);
    agent = startAgent();
    record(100);
    await complete("a complete flush through the replacement agent");

    // Killed with its answer on the way: the controller never has it (dropped at the receiver, as a
    // NATS node that dies with it would); the ranks keep their answers until it is logged.
    record(1000);
    toController.dropping = 1;
    assert.equal((await f.flush()).length, 2, "the host's answer was lost: both its ranks named missing");
    assert.equal(toController.dropped, 1);
    await killAgent(agent);
    agent = startAgent();
    record(10_000);
    await complete("a complete flush through the second replacement");
    record(100_000);
    assert.deepEqual(await f.flush(), [], "nothing taken twice");
    assert.equal(f.logged, 2 * 111_111, "the run's sum is exact");
  } finally {
    await logger.shutdown();
    await ranks.leave();
    killChildren(children);
  }
});
