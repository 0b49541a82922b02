/**
 * A four-level tree over a real nats-server (docs/scale.md, "A deeper tree"): the controller, one
 * rack agent above two rack agents (`RANKSCOPE_PARENT_RACK_ID`), two host agents under each and two
 * ranks per host. The controller serves the top rack only; it counts the eight ranks one by one,
 * names a stopped middle rack's ranks missing with their host and that middle rack (the rack their
 * host agents registered with, not the top one), and the run's sum is exact through both levels
 * (the stopped rack's late answer is carried, not lost, not counted twice).
 */
import assert from "node:assert/strict";
import { connect } from "@nats-io/transport-node";
import { after, before, test } from "node:test";
import { Collector } from "../../../src/core/collector.js";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { RankRuntime } from "../../../src/pipeline/runtime.js";
import { startHostAgent, type HostAgent } from "../../../src/transport/host/agent.js";
import { HostServer } from "../../../src/transport/host/server.js";
import { RunKey } from "../../../src/transport/protocol/seal.js";
import { SealedNats } from "../../../src/transport/protocol/sealed-nats.js";
import { joinOverNats } from "../../../src/transport/rank/nats.js";
import { RankAgent } from "../../../src/transport/rank/rank-agent.js";
import { collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { killChildren, NatsServer, startChild, type TestChild } from "../support.js";

const RACK_MAIN = new URL("../../../src/transport/rack/main.ts", import.meta.url);

let server: NatsServer;
before(async () => {
  server = await NatsServer.start();
});
after(async () => {
  await server.stop();
});

/** Two ranks of host `hostId` in this process, joined to its agent over NATS; `record` adds `value` to each. */
async function joinRanks(
  logger: MetricLogger,
  hostId: string,
): Promise<{ record: (value: number) => void; leave: () => Promise<void> }> {
  const ranks = await Promise.all(
    [0, 1].map(async (local) => {
      const identity = {
        rank: local,
        rankName: `Tree_${hostId}_r${local}`,
        processName: "Tree",
        localRank: local,
        localWorldSize: 2,
      };
      const collector = new Collector();
      const leave = await joinOverNats(
        new RankAgent({ runId: logger.runId, runtime: new RankRuntime(identity, collector) }),
        { url: server.url, runId: logger.runId, runSecret: logger.runSecret, joinDeadlineMs: 20_000, scope: hostId },
      );
      return { collector, leave };
    }),
  );
  return {
    record: (value) => ranks.forEach((r) => r.collector.recordSlow("values", value, "sum")),
    leave: async () => void (await Promise.all(ranks.map((r) => r.leave("the test is over")))),
  };
}

const RACKS: Record<string, string> = { h0: "r0", h1: "r0", h2: "r1", h3: "r1" };

test("a rack agent under a rack agent: the controller serves the top rack, every rank counted and a stopped middle rack's ranks named with their host and middle rack, sums exact through both levels", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 4000 });
  const toController = new SealedNats(
    await connect({ servers: server.url }),
    RunKey.derive(logger.runSecret, logger.runId),
  );
  const hosts = new HostServer(server.url, logger.runId, toController, logger, 1000);
  logger.onShutdown(() => hosts.close());
  const children: TestChild[] = [];
  const startRack = (rackId: string, parent?: string): TestChild =>
    startChild(
      RACK_MAIN,
      {
        RANKSCOPE_NATS_URL: server.url,
        RANKSCOPE_RUN_ID: logger.runId,
        RANKSCOPE_RUN_SECRET: logger.runSecret,
        RANKSCOPE_RACK_ID: rackId,
        ...(parent === undefined ? {} : { RANKSCOPE_PARENT_RACK_ID: parent }),
      },
      children,
    );
  startRack("top");
  await waitFor(() => hosts.hostIds.length === 1, { timeoutMs: 30_000, what: "the top rack agent to register" });
  const middle = { r0: startRack("r0", "top"), r1: startRack("r1", "top") };
  const agents: HostAgent[] = [];
  const ranks: Array<Awaited<ReturnType<typeof joinRanks>>> = [];
  let recorded = 0;
  let logged = 0;
  let step = 0;
  const record = (value: number): void => {
    for (const r of ranks) r.record(value);
    recorded += 8 * value;
  };
  const flush = async (): Promise<readonly string[]> => {
    const result = await logger.flush(step++);
    logged += result.metrics.find((m) => m.key === "values")?.value ?? 0;
    if (result.missingRanks.length === 0 && result.ranksExpected === 8)
      assert.equal(logged, recorded, `flush(${result.step}) reports every rank: it holds every value`);
    return result.ranksExpected === 8 ? result.missingRanks : ["(not every rank expected yet)"];
  };
  const complete = (what: string): Promise<boolean> =>
    waitFor(async () => (await flush()).length === 0, { timeoutMs: 60_000, what });
  const r1Ranks = ["Tree_h2_r0", "Tree_h2_r1", "Tree_h3_r0", "Tree_h3_r1"];
  try {
    for (const [hostId, rackId] of Object.entries(RACKS)) {
      agents.push(
        await startHostAgent({ url: server.url, runId: logger.runId, runSecret: logger.runSecret, hostId, rackId }),
      );
      ranks.push(await joinRanks(logger, hostId));
    }
    const seen = await collectDiagnostics(async () => {
      await complete("a flush with all eight ranks through both levels");
      assert.deepEqual(hosts.hostIds, ["top"], "the controller serves the top rack only");
      const top = hosts.host("top");
      const members = top?.memberRanks() ?? [];
      const places = top?.memberHostList() ?? [];
      assert.deepEqual(
        members.map((rank, i) => `${rank}@${places[i]}`).sort(),
        [...ranksOf("r0"), ...r1Ranks].map((rank) => `${rank}@${rank.slice(5, 7)}`).sort(),
        "the top rack names each rank's host, through the middle racks",
      );
      record(1);
      assert.deepEqual(await flush(), []);

      // A middle rack stopped: the top rack names its ranks missing by its deadline; the rest is logged.
      middle.r1.process.kill("SIGSTOP");
      record(10);
      assert.deepEqual([...(await flush())].sort(), r1Ranks);
      // Resumed: its late answer is carried into a later flush through the top rack, once.
      middle.r1.process.kill("SIGCONT");
      record(100);
      await complete("a complete flush after the middle rack resumed");
      record(1000);
      assert.deepEqual(await flush(), [], "nothing taken twice");
    });
    assert.equal(logged, recorded, "the run's sum is exact through both levels");
    assert.equal(logged, 8 * 1111);
    assert.ok(
      seen.some((d) => d.message.includes("Tree_h2_r0 on h2 in rack r1")),
      `the missing ranks are named with their host and the rack their host agent registered with (the middle one, not the top): ${seen
        .filter((d) => d.message.includes("did not answer"))
        .map((d) => d.message)
        .join(" | ")}`,
    );
  } finally {
    await logger.shutdown();
    await Promise.all(ranks.map((r) => r.leave()));
    await Promise.all(agents.map((a) => a.close()));
    killChildren(children);
  }
});

/** The ranks the test starts under rack `rackId`. */
function ranksOf(rackId: string): string[] {
  return Object.entries(RACKS)
    .filter(([, rack]) => rack === rackId)
    .flatMap(([hostId]) => [`Tree_${hostId}_r0`, `Tree_${hostId}_r1`]);
}
