/**
 * Rack agents over a real nats-server (docs/scale.md, "A deeper tree"): a controller, two rack
 * agent processes, four host agents (two per rack) and two ranks per host. The controller gets one
 * frame per rack; it counts the eight ranks one by one, names missing ones with their host and
 * rack, and the run's sum is exact. A rack agent stopped mid-run, killed with -9 between flushes
 * and killed with its answer on the way is replaced: its hosts register again with the
 * replacement, and nothing is lost or counted twice.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { ExactRun, hostsUnderRacks, killAgent, rackProcess, serveHosts } from "../exactly-once-support.js";
import { killChildren, natsServerForSuite, type TestChild } from "../support.js";

const nats = natsServerForSuite();

const RACKS: Record<string, string> = { h0: "r0", h1: "r0", h2: "r1", h3: "r1" };

test("two rack agents × two hosts × two ranks: one frame per rack, ranks counted and named with host and rack, a rack agent stopped, killed (-9) and replaced — nothing lost, nothing twice", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 3000 });
  const { hosts, toController } = await serveHosts(nats.server.url, logger, 1000);
  const children: TestChild[] = [];
  const startRack = (rackId: string): TestChild => rackProcess(nats.server.url, logger, children, rackId);
  const killRack = (rack: TestChild): Promise<void> => killAgent(rack, "the SIGKILLed rack agent to exit");
  const racks = { r0: startRack("r0"), r1: startRack("r1") };
  await waitFor(() => hosts.hostIds.length === 2, { timeoutMs: 30_000, what: "both rack agents to register" });
  const run = new ExactRun(logger, nats.server.url, 8);
  const agents = await hostsUnderRacks(run, RACKS, "Rack");
  const r1Ranks = ["Rack_h2_r0", "Rack_h2_r1", "Rack_h3_r0", "Rack_h3_r1"];
  try {
    const seen = await collectDiagnostics(async () => {
      await run.complete("a flush with all eight ranks");
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
      run.record(1);
      assert.deepEqual(await run.flush(), []);

      // Stopped mid-run (a partition, a stalled process): its ranks are named missing, by the deadline.
      racks.r1.process.kill("SIGSTOP");
      run.record(10);
      assert.deepEqual([...(await run.flush())].sort(), r1Ranks);
      // Then killed and replaced: its hosts register again with the replacement, what they keep comes once.
      await killRack(racks.r1);
      racks.r1 = startRack("r1");
      run.record(100);
      await run.complete("a complete flush through the replacement rack agent");

      // Killed between flushes, after the controller logged its answer.
      run.record(1000);
      assert.deepEqual(await run.flush(), []);
      await killRack(racks.r1);
      racks.r1 = startRack("r1");
      run.record(10_000);
      await run.complete("a complete flush through the second replacement");

      // Killed with its answer on the way: the controller never has it.
      run.record(100_000);
      toController.dropping = 1;
      const lost = await run.flush();
      assert.equal(toController.dropped, 1);
      assert.equal(lost.length, 4, "one rack's answer lost: its four ranks named missing");
      const whose = r1Ranks.includes(lost[0] ?? "") ? "r1" : "r0";
      await killRack(racks[whose]);
      racks[whose] = startRack(whose);
      run.record(1_000_000);
      await run.complete("a complete flush through the third replacement");
      run.record(10_000_000);
      assert.deepEqual(await run.flush(), [], "nothing taken twice");
    });
    assert.equal(run.logged, 8 * 11_111_111, "the run's sum is exact");
    assert.ok(
      seen.some((d) => d.message.includes("Rack_h2_r0 on h2 in rack r1")),
      "the missing ranks are named with their host and rack",
    );
  } finally {
    await logger.shutdown();
    await run.leave();
    await Promise.all(agents.map((a) => a.close()));
    killChildren(children);
  }
});
