/**
 * Host agents against a real nats-server on 127.0.0.1: two hosts, each an agent process and two
 * rank processes that join it (RANKSCOPE_HOST_ID). The controller gets one frame per host, counts
 * and names ranks one by one, per-rank backends still run in the ranks, and an agent killed with
 * -9 gets its ranks named missing until a replacement agent serves them again — with every value
 * recorded meanwhile in the next flush (exact merges).
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
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

test("two hosts × two ranks through host agents: complete flushes, per-rank backends, an agent killed and replaced", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ processName: "Controller", runDir, flushDeadlineMs: 2000 });
  const hosts = await serveHostsOverNats({ url: server.url, logger });
  const env = (hostId: string): Record<string, string> => ({
    RANKSCOPE_NATS_URL: server.url,
    RANKSCOPE_RUN_ID: logger.runId,
    RANKSCOPE_RUN_SECRET: logger.runSecret,
    RANKSCOPE_HOST_ID: hostId,
  });
  const agents = { h0: start(AGENT_MAIN, env("h0")), h1: start(AGENT_MAIN, env("h1")) };
  await waitFor(() => hosts.hostIds.length === 2, { timeoutMs: 20_000, what: "both host agents to register" });
  const ranks: TestChild[] = [];
  for (let r = 0; r < 4; r++) {
    const hostId = r < 2 ? "h0" : "h1";
    ranks.push(
      start(HOST_RANK, {
        ...env(hostId),
        RANK: String(r),
        LOCAL_RANK: String(r % 2),
        LOCAL_WORLD_SIZE: "2",
        RANKSCOPE_REPLICA_ID: hostId,
      }),
    );
  }
  await waitFor(() => ranks.every((r) => r.stdout.includes("joined as")), {
    timeoutMs: 30_000,
    what: "the four ranks to join their agents",
  });
  await logger.initBackends({
    jsonl: { loggingMode: "global_reduce" },
    perRank: { type: "jsonl", loggingMode: "per_rank_reduce" },
  });

  let step = 0;
  let logged = 0;
  const flush = async () => {
    const result = await logger.flush(step++);
    logged += result.metrics.find((m) => m.key === "scale/values")?.value ?? 0;
    return result;
  };
  // The first flush teaches the controller each host's ranks.
  await waitFor(async () => (await flush()).ranksReporting === 4, {
    timeoutMs: 20_000,
    what: "a flush with all four ranks",
  });
  // Give every rank time to record a few ticks (every 20 ms) before the flush that is checked.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const complete = await flush();
  assert.equal(complete.ranksExpected, 4);
  assert.deepEqual(complete.missingRanks, []);
  assert.equal(complete.metrics.find((m) => m.key === "scale/max_rank")?.value, 3, "MAX over the ranks of both hosts");
  assert.ok(
    complete.metrics.some((m) => m.key === "scale/latency/p50"),
    "a quantile sketch merged across hosts",
  );
  assert.equal(hosts.connectionStats.inMsgs > 0, true);
  // Per-rank backends still run in the ranks: each wrote its own file.
  const rankNames = [...hosts.host("h0")!.memberRanks(), ...hosts.host("h1")!.memberRanks()];
  assert.equal(rankNames.length, 4);
  await waitFor(
    () =>
      rankNames.every(
        (n) =>
          existsSync(join(runDir, `metrics-${n}.jsonl`)) &&
          readFileSync(join(runDir, `metrics-${n}.jsonl`), "utf8").includes("scale/values"),
      ),
    { timeoutMs: 10_000, what: "per-rank files" },
  );

  // Kill host h1's agent: its two ranks are named missing, by the deadline.
  const h1Ranks = [...hosts.host("h1")!.memberRanks()].sort();
  agents.h1.process.kill("SIGKILL");
  await within(agents.h1.exited, { timeoutMs: 10_000, what: "the SIGKILLed agent h1 to exit" });
  const started = Date.now();
  const cut = await flush();
  assert.ok(Date.now() - started < 2000 + 1500, "the flush returned by its deadline");
  assert.deepEqual([...cut.missingRanks].sort(), h1Ranks);
  assert.equal(cut.ranksReporting, 2);
  assert.equal(cut.ranksExpected, 4);

  // A replacement agent: the ranks register again and report, with what they recorded meanwhile.
  agents.h1 = start(AGENT_MAIN, env("h1"));
  await waitFor(async () => (await flush()).ranksReporting === 4, {
    timeoutMs: 30_000,
    what: "the ranks of h1 to be served again",
  });
  await flush();

  // Stop recording, flush what is left: every recorded value was logged or counted as lost.
  for (const r of ranks) r.process.kill("SIGUSR2");
  await waitFor(() => ranks.every((r) => r.stdout.includes("stopped ")), {
    timeoutMs: 10_000,
    what: "the ranks to stop recording",
  });
  await waitFor(async () => (await flush()).ranksReporting === 4, {
    timeoutMs: 20_000,
    what: "a complete flush after the ranks stopped",
  });
  await flush();
  await logger.shutdown();
  const exits = await within(Promise.all(ranks.map((r) => r.exited)), {
    timeoutMs: 30_000,
    what: "the 4 ranks to leave after shutdown",
  });
  assert.deepEqual(exits, [0, 0, 0, 0], ranks.map((r) => r.stderr).join("\n"));
  const recorded = ranks.reduce((sum, r) => sum + Number(/stopped (\d+)/.exec(r.stdout)?.[1] ?? NaN), 0);
  assert.equal(
    logged,
    recorded,
    `logged ${logged} of ${recorded} recorded (late frames carried: ${hosts.stats.lateFrames})`,
  );
  assert.equal(hosts.stats.lostStates, 0);
});
