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
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { serveRanksOverNats } from "../../src/transport/controller/nats.js";
import { startHostAgent } from "../../src/transport/host/agent.js";
import { serveHostsOverNats } from "../../src/transport/host/server.js";
import { RankAgent, type SendFrame, type SendText } from "../../src/transport/rank/rank-agent.js";
import { collectDiagnostics, tempDir } from "../helpers.js";
import { ExactRun } from "./exactly-once-support.js";
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
/** Whether the cluster started (when it did not, NatsCluster.start stopped its nodes itself). */
let started = false;
before(async () => {
  cluster = await NatsCluster.start(3);
  started = true;
});
after(async () => {
  if (started) await cluster.stop();
});

async function drill(scope: string | undefined): Promise<void> {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 2000 });
  if (scope === undefined) await serveRanksOverNats({ url: cluster.url(0), logger, maxMissedFlushes: 1000 });
  else await serveHostsOverNats({ url: cluster.url(0), logger, maxMissedFlushes: 1000 });
  const agent =
    scope === undefined
      ? undefined
      : await startHostAgent({ url: cluster.url(0), runId: logger.runId, runSecret: logger.runSecret, hostId: scope });
  const run = new ExactRun(logger, cluster.url(0));
  const hooked: HookedRank[] = [];
  // Two ranks on nodes 1 and 2 of the cluster, joined to the controller or to the agent of `scope`.
  await run.joinRanks("Lost", {
    url: `${cluster.url(1)},${cluster.url(2)}`,
    joinDeadlineMs: 30_000,
    ...(scope === undefined ? {} : { scope }),
    agent: (init) => {
      const rank = new HookedRank(init);
      hooked.push(rank);
      return rank;
    },
  });
  const victimAgent = hooked[0] ?? assert.fail("no rank");
  const victim = `Lost_${scope ?? "direct"}_r0`;
  const client = `rankscope-${logger.runId}-${victim}`;
  const seen = await collectDiagnostics(async () => {
    await run.complete("a flush with both ranks", 30_000);
    run.record(1);
    assert.deepEqual(await run.flush(), [], "complete");

    // The node the victim is connected to is stopped just before the victim publishes its answer.
    const node = (await cluster.serves(1, client)) ? 1 : 2;
    assert.ok(await cluster.serves(node, client), "the victim is connected to node 1 or 2");
    let paused = false;
    victimAgent.beforeNextAnswer = () => {
      cluster.pause(node);
      paused = true;
    };
    run.record(10);
    const missing = await run.flush();
    assert.ok(paused, "the victim answered into its stopped node");
    assert.ok(missing.includes(victim), `its answer did not arrive: named missing (missing: ${missing.join(", ")})`);
    await cluster.kill(node);

    // The victim fails over to the other node; its lost answer goes into a later flush, once.
    run.record(100);
    await run.complete("a complete flush after the victim's node died");
    run.record(1000);
    assert.deepEqual(await run.flush(), [], "complete, nothing taken twice");
    assert.equal(run.logged, run.recorded, "the run's sum is exact");
    assert.equal(run.logged, 2 * (1 + 10 + 100 + 1000));
  }).finally(async () => {
    await logger.shutdown();
    await run.leave();
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
