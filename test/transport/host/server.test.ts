/**
 * The controller's side of host agents (`serveHostsOverNats`), against a real nats-server: a host
 * whose agent is gone for good (killed with -9, never replaced) is named missing for
 * `maxMissedFlushes` flushes, then no longer expected — named in a warning, counted in
 * `stats.goneHosts` and `goneHostIds` — and expected again as soon as a replacement agent
 * registers, with the rank's values reported again.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { serveHostsOverNats } from "../../../src/transport/host/server.js";
import { tempDir, waitFor, within } from "../../helpers.js";
import { AGENT_MAIN, HOST_RANK, killChildren, NatsServer, startChild, type TestChild } from "../support.js";

const children: TestChild[] = [];
const start = (file: URL, env: Record<string, string>): TestChild => startChild(file, env, children);

let server: NatsServer;
before(async () => {
  server = await NatsServer.start();
});
after(async () => {
  killChildren(children);
  await server.stop();
});

test("a host gone for good is no longer expected after maxMissedFlushes, named and counted; a replacement agent brings it back", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 1000 });
  const hosts = await serveHostsOverNats({ url: server.url, logger, maxMissedFlushes: 2 });
  await assert.rejects(
    serveHostsOverNats({ url: server.url, logger, maxMissedFlushes: 0 }),
    /maxMissedFlushes must be a positive integer/,
  );
  const env = {
    RANKSCOPE_NATS_URL: server.url,
    RANKSCOPE_RUN_ID: logger.runId,
    RANKSCOPE_RUN_SECRET: logger.runSecret,
    RANKSCOPE_HOST_ID: "hgone",
  };
  const agent = start(AGENT_MAIN, env);
  await waitFor(() => hosts.hostIds.includes("hgone"), { timeoutMs: 20_000, what: "the host agent to register" });
  const rank = start(HOST_RANK, {
    ...env,
    RANK: "0",
    LOCAL_RANK: "0",
    LOCAL_WORLD_SIZE: "1",
    RANKSCOPE_REPLICA_ID: "hgone",
  });
  await waitFor(() => rank.stdout.includes("joined as"), { timeoutMs: 30_000, what: "the rank to join its agent" });
  let step = 0;
  await waitFor(async () => (await logger.flush(step++)).ranksReporting === 1, {
    timeoutMs: 20_000,
    what: "a flush with the rank",
  });
  const rankName = hosts.host("hgone")?.memberRanks()[0];
  assert.ok(rankName !== undefined);

  agent.process.kill("SIGKILL");
  await within(agent.exited, { timeoutMs: 10_000, what: "the SIGKILLed agent to exit" });
  for (let missed = 1; missed <= 2; missed++) {
    const result = await logger.flush(step++);
    assert.deepEqual(result.missingRanks, [rankName], `missed flush ${missed}: its rank named missing`);
    assert.equal(result.ranksExpected, 1);
  }
  assert.deepEqual(hosts.goneHostIds, ["hgone"], "gone for good after 2 missed flushes");
  assert.equal(hosts.stats.goneHosts, 1);
  const after = await logger.flush(step++);
  assert.equal(after.ranksExpected, 0, "its rank is no longer expected");
  assert.deepEqual(after.missingRanks, []);

  // A replacement agent registers: the host is expected again and its rank reports.
  start(AGENT_MAIN, env);
  await waitFor(async () => (await logger.flush(step++)).ranksReporting === 1, {
    timeoutMs: 30_000,
    what: "the rank to be served again",
  });
  assert.deepEqual(hosts.goneHostIds, []);
  await waitFor(
    async () => {
      const back = await logger.flush(step++);
      return (
        back.ranksExpected === 1 &&
        back.ranksReporting === 1 &&
        (back.metrics.find((m) => m.key === "scale/values")?.value ?? 0) > 0
      );
    },
    { timeoutMs: 20_000, what: "the rank's values logged again, the host expected" },
  );
  await logger.shutdown();
});
