/**
 * A host agent's memory stays bounded: a rank silent for `maxMissedFlushes` flushes in a row (here
 * a real rank process stopped with SIGSTOP) is forgotten — counted, no longer named missing — and
 * when it runs again it is told to register again and reports again, against a real nats-server.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { startHostAgent } from "../../../src/transport/host/agent.js";
import { serveHostsOverNats } from "../../../src/transport/host/server.js";
import { tempDir, waitFor } from "../../helpers.js";
import { HOST_RANK, killChildren, NatsServer, startChild, type TestChild } from "../support.js";

const children: TestChild[] = [];

let server: NatsServer;
before(async () => {
  server = await NatsServer.start();
});
after(async () => {
  killChildren(children);
  await server.stop();
});

test("an agent forgets a rank silent for maxMissedFlushes, and takes it back when it answers again", async () => {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 1200 });
  const hosts = await serveHostsOverNats({ url: server.url, logger });
  const agent = await startHostAgent({
    url: server.url,
    runId: logger.runId,
    runSecret: logger.runSecret,
    hostId: "hforget",
    maxMissedFlushes: 2,
  });
  const env = {
    RANKSCOPE_NATS_URL: server.url,
    RANKSCOPE_RUN_ID: logger.runId,
    RANKSCOPE_RUN_SECRET: logger.runSecret,
    RANKSCOPE_HOST_ID: "hforget",
  };
  const rank = startChild(
    HOST_RANK,
    { ...env, RANK: "0", LOCAL_RANK: "0", LOCAL_WORLD_SIZE: "1", RANKSCOPE_REPLICA_ID: "hforget" },
    children,
  );
  await waitFor(() => rank.stdout.includes("joined as"), { timeoutMs: 30_000, what: "the rank to join its agent" });
  let step = 0;
  await waitFor(async () => (await logger.flush(step++)).ranksReporting === 1, {
    timeoutMs: 20_000,
    what: "a flush with the rank",
  });
  const [rankName] = agent.rankNames;
  assert.ok(rankName !== undefined);

  rank.process.kill("SIGSTOP");
  const named: string[] = [];
  await waitFor(
    async () => {
      named.push(...(await logger.flush(step++)).missingRanks);
      return agent.forgottenRanks === 1;
    },
    { timeoutMs: 30_000, what: "the agent to forget the stopped rank" },
  );
  assert.ok(named.includes(rankName), "named missing before it was forgotten");
  assert.deepEqual(agent.rankNames, [], "forgotten: no longer held by the agent");
  // The controller learns the host's new rank list with the agent's next answer.
  await waitFor(
    async () => {
      const forgotten = await logger.flush(step++);
      return forgotten.missingRanks.length === 0 && forgotten.ranksExpected === 0;
    },
    { timeoutMs: 20_000, what: "the forgotten rank no longer named missing" },
  );
  assert.deepEqual(hosts.host("hforget")?.memberRanks(), []);

  rank.process.kill("SIGCONT");
  await waitFor(
    async () => {
      const back = await logger.flush(step++);
      return back.ranksReporting === 1 && (back.metrics.find((m) => m.key === "scale/values")?.value ?? 0) > 0;
    },
    { timeoutMs: 30_000, what: "the rank to register again and report" },
  );
  assert.deepEqual(agent.rankNames, [rankName]);
  await logger.shutdown();
  await agent.close();
});
