/**
 * A four-level tree over a real nats-server (docs/scale.md, "A deeper tree"): the controller, one
 * rack agent above two rack agents (`RANKSCOPE_PARENT_RACK_ID`), two host agents under each and two
 * ranks per host. The controller serves the top rack only; it counts the eight ranks one by one,
 * names a stopped middle rack's ranks missing with their host and that middle rack (the rack their
 * host agents registered with, not the top one), and the run's sum is exact through both levels
 * (the stopped rack's late answer is carried, not lost, not counted twice).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import type { HostAgent } from "../../../src/transport/host/agent.js";
import { collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { ExactRun, hostsUnderRacks, rackProcess, serveHosts } from "../exactly-once-support.js";
import { killChildren, natsServerForSuite, type TestChild } from "../support.js";

const nats = natsServerForSuite();

const RACKS: Record<string, string> = { h0: "r0", h1: "r0", h2: "r1", h3: "r1" };

test("a rack agent under a rack agent: the controller serves the top rack, every rank counted and a stopped middle rack's ranks named with their host and middle rack, sums exact through both levels", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 4000 });
  const { hosts } = await serveHosts(nats.server.url, logger, 1000);
  const children: TestChild[] = [];
  const startRack = (rackId: string, parent?: string): TestChild =>
    rackProcess(nats.server.url, logger, children, rackId, parent);
  startRack("top");
  await waitFor(() => hosts.hostIds.length === 1, { timeoutMs: 30_000, what: "the top rack agent to register" });
  const middle = { r0: startRack("r0", "top"), r1: startRack("r1", "top") };
  const agents: HostAgent[] = [];
  const run = new ExactRun(logger, nats.server.url, 8);
  const r1Ranks = ["Tree_h2_r0", "Tree_h2_r1", "Tree_h3_r0", "Tree_h3_r1"];
  try {
    await hostsUnderRacks(run, RACKS, "Tree", agents);
    const seen = await collectDiagnostics(async () => {
      await run.complete("a flush with all eight ranks through both levels");
      assert.deepEqual(hosts.hostIds, ["top"], "the controller serves the top rack only");
      const top = hosts.host("top");
      const members = top?.memberRanks() ?? [];
      const places = top?.memberHostList() ?? [];
      assert.deepEqual(
        members.map((rank, i) => `${rank}@${places[i]}`).sort(),
        [...ranksOf("r0"), ...r1Ranks].map((rank) => `${rank}@${rank.slice(5, 7)}`).sort(),
        "the top rack names each rank's host, through the middle racks",
      );
      run.record(1);
      assert.deepEqual(await run.flush(), []);

      // A middle rack stopped: the top rack names its ranks missing by its deadline; the rest is logged.
      middle.r1.process.kill("SIGSTOP");
      run.record(10);
      assert.deepEqual([...(await run.flush())].sort(), r1Ranks);
      // Resumed: its late answer is carried into a later flush through the top rack, once.
      middle.r1.process.kill("SIGCONT");
      run.record(100);
      await run.complete("a complete flush after the middle rack resumed");
      run.record(1000);
      assert.deepEqual(await run.flush(), [], "nothing taken twice");
    });
    assert.equal(run.logged, run.recorded, "the run's sum is exact through both levels");
    assert.equal(run.logged, 8 * 1111);
    assert.ok(
      seen.some((d) => d.message.includes("Tree_h2_r0 on h2 in rack r1")),
      `the missing ranks are named with their host and the rack their host agent registered with (the middle one, not the top): ${seen
        .filter((d) => d.message.includes("did not answer"))
        .map((d) => d.message)
        .join(" | ")}`,
    );
  } finally {
    await logger.shutdown();
    await run.leave();
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
