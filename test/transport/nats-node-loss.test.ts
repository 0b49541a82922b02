/**
 * Exactly-once answers when the NATS node a rank is connected to dies with the rank's answer inside
 * it (issue 31), on a real 3-node nats-server cluster: the controller (or the host agent) on node 0,
 * the ranks on nodes 1 and 2. The answer is held in flight by a mechanism, not by timing: the rank's
 * node is stopped (SIGSTOP) just before the rank publishes its answer, so the node holds it and
 * forwards nothing, and killed (SIGKILL) once the flush has passed its deadline. The rank fails over
 * to the other node; its answer goes into a later flush, once. Every flush that names no rank
 * missing holds every value recorded before it, and the run's sum is exact.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Collector } from "../../src/core/collector.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { RankRuntime } from "../../src/pipeline/runtime.js";
import { serveRanksOverNats } from "../../src/transport/controller/nats.js";
import { startHostAgent } from "../../src/transport/host/agent.js";
import { serveHostsOverNats } from "../../src/transport/host/server.js";
import { joinOverNats } from "../../src/transport/rank/nats.js";
import { RankAgent, type SendFrame, type SendText } from "../../src/transport/rank/rank-agent.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";
import { NatsCluster } from "./support.js";

/** A rank agent that runs `beforeNextAnswer` once, just before it sends its next answer. */
class HookedRank extends RankAgent {
  beforeNextAnswer: (() => void) | undefined;

  override receive(data: unknown, reply: SendText, from?: string, replyFrame?: SendFrame): Promise<void> {
    const hook = (): void => {
      const run = this.beforeNextAnswer;
      this.beforeNextAnswer = undefined;
      run?.();
    };
    return super.receive(
      data,
      (text) => {
        hook();
        reply(text);
      },
      from,
      replyFrame === undefined
        ? undefined
        : (frame) => {
            hook();
            replyFrame(frame);
          },
    );
  }
}

let cluster: NatsCluster;
before(async () => {
  cluster = await NatsCluster.start(3);
});
after(async () => {
  await cluster.stop();
});

/** Two ranks in this process on nodes 1 and 2 of the cluster, joined to the controller or to the agent of `scope`. */
async function joinRanks(logger: MetricLogger, scope: string | undefined) {
  const ranks = await Promise.all(
    [0, 1].map(async (local) => {
      const identity = {
        rank: local,
        rankName: `Lost_${scope ?? "direct"}_r${local}`,
        processName: "Lost",
        localRank: local,
        localWorldSize: 2,
      };
      const collector = new Collector();
      const agent = new HookedRank({ runId: logger.runId, runtime: new RankRuntime(identity, collector) });
      const leave = await joinOverNats(agent, {
        url: `${cluster.url(1)},${cluster.url(2)}`,
        runId: logger.runId,
        runSecret: logger.runSecret,
        joinDeadlineMs: 30_000,
        ...(scope === undefined ? {} : { scope }),
      });
      return { agent, collector, leave, client: `rankscope-${logger.runId}-${identity.rankName}` };
    }),
  );
  return {
    victim: ranks[0] ?? assert.fail("no rank"),
    record: (value: number) => ranks.forEach((r) => r.collector.recordSlow("values", value, "sum")),
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

async function drill(scope: string | undefined): Promise<void> {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 2000 });
  if (scope === undefined) await serveRanksOverNats({ url: cluster.url(0), logger, maxMissedFlushes: 1000 });
  else await serveHostsOverNats({ url: cluster.url(0), logger, maxMissedFlushes: 1000 });
  const agent =
    scope === undefined
      ? undefined
      : await startHostAgent({ url: cluster.url(0), runId: logger.runId, runSecret: logger.runSecret, hostId: scope });
  const ranks = await joinRanks(logger, scope);
  let recorded = 0;
  const record = (value: number): void => {
    ranks.record(value);
    recorded += 2 * value;
  };
  const f = flusher(logger, () => recorded);
  const victim = `Lost_${scope ?? "direct"}_r0`;
  const seen = await collectDiagnostics(async () => {
    await waitFor(async () => (await f.flush()).length === 0, { timeoutMs: 30_000, what: "a flush with both ranks" });
    record(1);
    assert.deepEqual(await f.flush(), [], "complete");

    // The node the victim is connected to is stopped just before the victim publishes its answer.
    const node = (await cluster.serves(1, ranks.victim.client)) ? 1 : 2;
    assert.ok(await cluster.serves(node, ranks.victim.client), "the victim is connected to node 1 or 2");
    let paused = false;
    ranks.victim.agent.beforeNextAnswer = () => {
      cluster.pause(node);
      paused = true;
    };
    record(10);
    const missing = await f.flush();
    assert.ok(paused, "the victim answered into its stopped node");
    assert.ok(missing.includes(victim), `its answer did not arrive: named missing (missing: ${missing.join(", ")})`);
    await cluster.kill(node);

    // The victim fails over to the other node; its lost answer goes into a later flush, once.
    record(100);
    await waitFor(async () => (await f.flush()).length === 0, {
      timeoutMs: 60_000,
      what: "a complete flush after the victim's node died",
    });
    record(1000);
    assert.deepEqual(await f.flush(), [], "complete, nothing taken twice");
    assert.equal(f.logged, recorded, "the run's sum is exact");
    assert.equal(f.logged, 2 * (1 + 10 + 100 + 1000));
  }).finally(async () => {
    await logger.shutdown();
    await ranks.leave();
    await agent?.close();
  });
  assert.ok(
    seen.some((d) => d.code === `transport.resent:${victim}`),
    "the lost answer was sent again with the victim's next answer",
  );
}

test("the NATS node a rank (joined to the controller) is connected to dies with its answer inside: the answer goes into a later flush, once", async () => {
  await drill(undefined);
});

test("the NATS node a rank (joined to its host agent) is connected to dies with its answer inside: the answer goes into a later flush, once", async () => {
  // The first test killed one of the ranks' nodes: this one needs a fresh cluster.
  await cluster.stop();
  cluster = await NatsCluster.start(3);
  await drill("hlost");
});
