/**
 * Straggler attribution through host agents, against a real nats-server: two hosts, each an agent
 * and two rank processes running their own traced loops; one rank of one host steps twenty times
 * slower. The agents forward each rank's step timings and arrival (compactly: rows of the host's
 * rank list) and the controller names the slow rank with its host, and nobody else — also when
 * each host agent answers a rack agent, which forwards its hosts' timings in columns.
 *
 * The ranks' steps are virtual time (fixtures/virtual-clock.mjs): each measures exactly its
 * `STEP_MS` whatever the machine's load (with real sleeps a starved CPU stretched a fast rank's 30 ms
 * steps until it was named too). Lateness, timed by the agents in real time, is bounded by the
 * 3 s flush deadline, under the 10 s bar to be named, so it can name nobody here; it is judged in
 * analysis.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import type { StragglerReport } from "../../../src/core/straggler-report.js";
import { startHostAgent, type HostAgent } from "../../../src/transport/host/agent.js";
import { serveHostsOverNats } from "../../../src/transport/host/server.js";
import { startRackAgent, type RackAgent } from "../../../src/transport/rack/agent.js";
import { sleep } from "../../../src/core/retry.js";
import { tempDir, waitFor } from "../../helpers.js";
import { killChildren, NatsServer, startChild, type TestChild } from "../../transport/support.js";

const RANK = new URL("./fixtures/traced-host-rank.mjs", import.meta.url);
const children: TestChild[] = [];

let server: NatsServer;
before(async () => {
  server = await NatsServer.start();
});
after(async () => {
  killChildren(children);
  await server.stop();
});

/** Two hosts of two traced ranks each (rank 3 on hslow is slow), their agents under rack agents when `racks`. */
async function slowRankNamed(racks: boolean): Promise<void> {
  // The slow rank loses 19 virtual s a step; the bar (10 s) is above any lateness the 3 s deadline lets through.
  const logger = new MetricLogger({
    processName: "Controller",
    runDir: tempDir(),
    flushDeadlineMs: 3000,
    quiet: true,
    stragglers: { tolerance: 0.5, minExcessMs: 10_000 },
  });
  await logger.initBackends({ store: { loggingMode: "global_reduce" } });
  await serveHostsOverNats({ url: server.url, logger });
  const agents: HostAgent[] = [];
  const rackAgents: RackAgent[] = [];
  const secret = { url: server.url, runId: logger.runId, runSecret: logger.runSecret };
  try {
    for (const hostId of ["hfast", "hslow"]) {
      const rackId = `k${hostId}`;
      if (racks) rackAgents.push(await startRackAgent({ ...secret, rackId }));
      agents.push(await startHostAgent({ ...secret, hostId, ...(racks ? { rackId } : {}) }));
    }
    for (let r = 0; r < 4; r++) {
      const hostId = r < 2 ? "hfast" : "hslow";
      const env = {
        RANKSCOPE_NATS_URL: server.url,
        RANKSCOPE_RUN_ID: logger.runId,
        RANKSCOPE_RUN_SECRET: logger.runSecret,
        RANKSCOPE_HOST_ID: hostId,
        RANKSCOPE_REPLICA_ID: hostId,
      };
      startChild(
        RANK,
        {
          ...env,
          RANK: String(r),
          LOCAL_RANK: String(r % 2),
          LOCAL_WORLD_SIZE: "2",
          STEP_MS: r === 3 ? "20000" : "1000",
        },
        children,
      );
    }
    await waitFor(() => children.every((c) => c.stdout.includes("joined as")), {
      timeoutMs: 60_000,
      what: "the four ranks to join their agents",
    });

    let step = 0;
    const reports: StragglerReport[] = [];
    await waitFor(
      async () => {
        await sleep(500);
        const result = await logger.flush(step++);
        if (result.stragglers !== undefined && result.stragglers.ranks === 4) reports.push(result.stragglers);
        return reports.length >= 6;
      },
      { timeoutMs: 60_000, what: "six flushes with all four ranks' timings" },
    );
    const slowName = agents[1]?.rankNames.find((name) => name.endsWith("_r1"));
    assert.ok(slowName !== undefined);
    const named = new Set(reports.flatMap((r) => r.slowest.map((s) => `${s.rankName}@${s.host}`)));
    assert.deepEqual([...named], [`${slowName}@hslow`], "only the slow rank is named, with its host");
    for (const report of reports) {
      assert.deepEqual(
        report.slowest.map((s) => [s.rankName, s.rank, s.host, s.by.includes("step")]),
        [[slowName, 3, "hslow", true]],
      );
    }
    assert.deepEqual(
      reports[reports.length - 1]?.chronic.map((c) => [c.rankName, c.host]),
      [[slowName, "hslow"]],
    );
  } finally {
    await logger.shutdown();
    for (const agent of agents) await agent.close();
    for (const rack of rackAgents) await rack.close();
    killChildren(children);
  }
}

test("a slow rank behind a host agent is named with its host, from the timings its agent forwards", () =>
  slowRankNamed(false));

test("a slow rank behind a host agent and a rack agent is named with its host, from the timings they forward", () =>
  slowRankNamed(true));
