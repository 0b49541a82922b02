/**
 * Rack agents over a real nats-server (docs/scale.md, "A deeper tree"): a controller, two rack
 * agent processes, four host agents (two per rack) and two ranks per host. The controller gets one
 * frame per rack; it counts the eight ranks one by one, names missing ones with their host and
 * rack, and the run's sum is exact. A rack agent stopped mid-run, killed with -9 between flushes
 * and killed with its answer on the way is replaced: its hosts register again with the
 * replacement, and nothing is lost or counted twice.
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
import { SealedNats, type OpenedMessage } from "../../../src/transport/protocol/sealed-nats.js";
import { joinOverNats } from "../../../src/transport/rank/nats.js";
import { RankAgent } from "../../../src/transport/rank/rank-agent.js";
import { isWireFrame } from "../../../src/transport/wire/codec.js";
import { collectDiagnostics, tempDir, waitFor, within } from "../../helpers.js";
import { killChildren, NatsServer, startChild, type TestChild } from "../support.js";

const RACK_MAIN = new URL("../../../src/transport/rack/main.ts", import.meta.url);

/** The controller's connection, dropping the next `dropping` answer frames it receives (a NATS node dying with them). */
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

/** Two ranks of host `hostId` in this process, joined to its agent over NATS; `record` adds `value` to each. */
async function joinRanks(
  logger: MetricLogger,
  hostId: string,
): Promise<{ record: (value: number) => void; leave: () => Promise<void> }> {
  const ranks = await Promise.all(
    [0, 1].map(async (local) => {
      const identity = {
        rank: local,
        rankName: `Rack_${hostId}_r${local}`,
        processName: "Rack",
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

test("two rack agents × two hosts × two ranks: one frame per rack, ranks counted and named with host and rack, a rack agent stopped, killed (-9) and replaced — nothing lost, nothing twice", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 3000 });
  const toController = new DroppingNats(
    await connect({ servers: server.url }),
    RunKey.derive(logger.runSecret, logger.runId),
  );
  const hosts = new HostServer(server.url, logger.runId, toController, logger, 1000);
  logger.onShutdown(() => hosts.close());
  const children: TestChild[] = [];
  const startRack = (rackId: string): TestChild =>
    startChild(
      RACK_MAIN,
      {
        RANKSCOPE_NATS_URL: server.url,
        RANKSCOPE_RUN_ID: logger.runId,
        RANKSCOPE_RUN_SECRET: logger.runSecret,
        RANKSCOPE_RACK_ID: rackId,
      },
      children,
    );
  const killRack = async (rack: TestChild): Promise<void> => {
    rack.process.kill("SIGCONT");
    rack.process.kill("SIGKILL");
    await within(rack.exited, { timeoutMs: 10_000, what: "the SIGKILLed rack agent to exit" });
  };
  const racks = { r0: startRack("r0"), r1: startRack("r1") };
  await waitFor(() => hosts.hostIds.length === 2, { timeoutMs: 30_000, what: "both rack agents to register" });
  const agents: HostAgent[] = [];
  const ranks: Array<Awaited<ReturnType<typeof joinRanks>>> = [];
  for (const [hostId, rackId] of Object.entries(RACKS)) {
    agents.push(
      await startHostAgent({ url: server.url, runId: logger.runId, runSecret: logger.runSecret, hostId, rackId }),
    );
    ranks.push(await joinRanks(logger, hostId));
  }
  let recorded = 0;
  const record = (value: number): void => {
    for (const r of ranks) r.record(value);
    recorded += 8 * value;
  };
  let step = 0;
  let logged = 0;
  const flush = async (): Promise<readonly string[]> => {
    const result = await logger.flush(step++);
    logged += result.metrics.find((m) => m.key === "values")?.value ?? 0;
    if (result.missingRanks.length === 0 && result.ranksExpected === 8)
      assert.equal(logged, recorded, `flush(${result.step}) reports every rank: it holds every value`);
    // A replacement rack agent's hosts register again one by one: until all have, fewer are expected.
    return result.ranksExpected === 8 ? result.missingRanks : ["(not every rank expected yet)"];
  };
  const complete = (what: string): Promise<boolean> =>
    waitFor(async () => (await flush()).length === 0, { timeoutMs: 60_000, what });
  const r1Ranks = ["Rack_h2_r0", "Rack_h2_r1", "Rack_h3_r0", "Rack_h3_r1"];
  try {
    const seen = await collectDiagnostics(async () => {
      await complete("a flush with all eight ranks");
      assert.deepEqual(hosts.hostIds.sort(), ["r0", "r1"], "the controller serves the racks, not the hosts");
      const r1 = hosts.host("r1");
      const members = r1?.memberRanks() ?? [];
      const places = r1?.memberHostList() ?? [];
      assert.deepEqual(
        members.map((rank, i) => `${rank}@${places[i]}`).sort(),
        r1Ranks.map((rank) => `${rank}@${rank.slice(5, 7)}`),
        "the rack names each rank's host",
      );
      assert.equal(r1?.rack, "r1");
      record(1);
      assert.deepEqual(await flush(), []);

      // Stopped mid-run (a partition, a stalled process): its ranks are named missing, by the deadline.
      racks.r1.process.kill("SIGSTOP");
      record(10);
      assert.deepEqual([...(await flush())].sort(), r1Ranks);
      // Then killed and replaced: its hosts register again with the replacement, what they keep comes once.
      await killRack(racks.r1);
      racks.r1 = startRack("r1");
      record(100);
      await complete("a complete flush through the replacement rack agent");

      // Killed between flushes, after the controller logged its answer.
      record(1000);
      assert.deepEqual(await flush(), []);
      await killRack(racks.r1);
      racks.r1 = startRack("r1");
      record(10_000);
      await complete("a complete flush through the second replacement");

      // Killed with its answer on the way: the controller never has it.
      record(100_000);
      toController.dropping = 1;
      const lost = await flush();
      assert.equal(toController.dropped, 1);
      assert.equal(lost.length, 4, "one rack's answer lost: its four ranks named missing");
      const whose = r1Ranks.includes(lost[0] ?? "") ? "r1" : "r0";
      await killRack(racks[whose]);
      racks[whose] = startRack(whose);
      record(1_000_000);
      await complete("a complete flush through the third replacement");
      record(10_000_000);
      assert.deepEqual(await flush(), [], "nothing taken twice");
    });
    assert.equal(logged, 8 * 11_111_111, "the run's sum is exact");
    assert.ok(
      seen.some((d) => d.message.includes("Rack_h2_r0 on h2 in rack r1")),
      "the missing ranks are named with their host and rack",
    );
  } finally {
    await logger.shutdown();
    await Promise.all(ranks.map((r) => r.leave()));
    await Promise.all(agents.map((a) => a.close()));
    killChildren(children);
  }
});
