/**
 * Ranks answer their host agent — or the controller, when joined to it directly — in wire frames
 * over a real nats-server (in-process ranks and agent, as in the scale harness): merged values are exact, and a frame lost between a rank and
 * its agent — one that defined new keys — costs a late answer, never values: the agent asks for
 * that answer again and the rank starts a new key table, and every recorded value is logged.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Collector } from "../../../src/core/collector.js";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { startHostAgent } from "../../../src/transport/host/agent.js";
import { serveHostsOverNats } from "../../../src/transport/host/server.js";
import { joinOverNats } from "../../../src/transport/rank/nats.js";
import { serveRanksOverNats } from "../../../src/transport/controller/nats.js";
import { RankAgent, type SendFrame, type SendText } from "../../../src/transport/rank/rank-agent.js";
import { RankRuntime } from "../../../src/pipeline/runtime.js";
import { tempDir, waitFor } from "../../helpers.js";
import { NatsServer } from "../support.js";

/** A rank that can lose its next flush-answer frame in transit (the frame is never published). */
class LossyRankAgent extends RankAgent {
  loseNextFrame = false;
  framesSent = 0;
  override receive(data: unknown, reply: SendText, from?: string, replyFrame?: SendFrame): Promise<void> {
    const frame =
      replyFrame === undefined
        ? undefined
        : (bytes: Uint8Array): void => {
            if (this.loseNextFrame) {
              this.loseNextFrame = false;
              return;
            }
            this.framesSent++;
            replyFrame(bytes);
          };
    return super.receive(data, reply, from, frame);
  }
}

let server: NatsServer;
before(async () => {
  server = await NatsServer.start();
});
after(async () => {
  await server.stop();
});

/**
 * Three ranks answering in frames, to a host agent (`scope`) or to the controller directly; rank
 * 1's frame that defines a key is lost once.
 */
async function framesDrill(via: "host agent" | "controller"): Promise<void> {
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 1500 });
  await logger.initBackends({});
  const scope = via === "host agent" ? "scale2h0" : undefined;
  let agent: { close(reason: string): Promise<void> } | undefined;
  if (scope === undefined) await serveRanksOverNats({ url: server.url, logger });
  else {
    await serveHostsOverNats({ url: server.url, logger });
    agent = await startHostAgent({
      url: server.url,
      runId: logger.runId,
      runSecret: logger.runSecret,
      hostId: scope,
      joinDeadlineMs: 20_000,
    });
  }
  const ranks = [0, 1, 2].map((r) => {
    const collector = new Collector();
    const runtime = new RankRuntime(
      { rank: r, rankName: `Frames_r${r}`, processName: "Frames", localRank: r, localWorldSize: 3 },
      collector,
    );
    return { collector, agent: new LossyRankAgent({ runId: logger.runId, runtime }) };
  });
  const leaves = await Promise.all(
    ranks.map((r) =>
      joinOverNats(r.agent, {
        url: server.url,
        runId: logger.runId,
        runSecret: logger.runSecret,
        joinDeadlineMs: 20_000,
        ...(scope === undefined ? {} : { scope }),
      }),
    ),
  );
  try {
    let step = 0;
    let recorded = 0;
    let logged = 0;
    const record = (keys: readonly string[]): void => {
      ranks.forEach(({ collector }, r) => {
        for (const key of keys) {
          const value = (r + 1) * 0.1 + step;
          collector.recordSlow(`${key}/sum`, value, "sum");
          collector.recordSlow(`${key}/max`, value, "max");
          collector.recordSlow(`${key}/std`, value, "std");
          recorded += value;
        }
      });
    };
    const flush = async (keys: readonly string[]) => {
      const result = await logger.flush(step++);
      for (const key of keys) logged += result.metrics.find((m) => m.key === `${key}/sum`)?.value ?? 0;
      return result;
    };
    await waitFor(async () => (await flush([])).ranksReporting === 3, {
      timeoutMs: 20_000,
      what: "a flush with the three ranks",
    });

    // Exact merges through frames: sum, max and std over the three ranks.
    const recordedAt = step;
    record(["a"]);
    const exact = await flush(["a"]);
    assert.equal(exact.ranksReporting, 3);
    assert.ok(
      ranks.every((r) => r.agent.framesSent > 0),
      "every rank answered with frames",
    );
    const values = [1, 2, 3].map((r) => r * 0.1 + recordedAt);
    assert.equal(exact.metrics.find((m) => m.key === "a/max")?.value, Math.max(...values));
    assert.ok(
      Math.abs((exact.metrics.find((m) => m.key === "a/sum")?.value ?? NaN) - values.reduce((x, y) => x + y, 0)) <
        1e-12,
    );
    const mean = values.reduce((x, y) => x + y, 0) / 3;
    const std = Math.sqrt(values.reduce((x, y) => x + (y - mean) ** 2, 0) / 3);
    assert.ok(Math.abs((exact.metrics.find((m) => m.key === "a/std")?.value ?? NaN) - std) < 1e-12);

    // Rank 1's frame defining key "b" is lost; its next frame names "b" by an id the agent never saw.
    ranks[1]!.agent.loseNextFrame = true;
    record(["a", "b"]);
    const lost = await flush(["a", "b"]);
    assert.deepEqual(lost.missingRanks, ["Frames_r1"], "the rank whose frame was lost is named missing");
    record(["a", "b"]);
    await flush(["a", "b"]);
    // Its answers come again (JSON, late) and go into its next flushes; then every value is logged.
    await waitFor(
      async () => {
        await flush(["a", "b"]);
        return Math.abs(logged - recorded) < 1e-9;
      },
      { timeoutMs: 20_000, what: `every recorded value logged (logged ${logged} of ${recorded})` },
    );
    assert.ok(Math.abs(logged - recorded) < 1e-9, `logged ${logged} of ${recorded}`);
    const complete = await flush([]);
    assert.equal(complete.ranksReporting, 3, "after the resync the rank answers in time again");
  } finally {
    await Promise.all(leaves.map((leave) => leave("test done")));
    await agent?.close("test done");
    await logger.shutdown();
  }
}

test("ranks answer their agent in frames; a lost frame that defined keys costs a late answer, not values", () =>
  framesDrill("host agent"));

test("ranks joined to the controller directly answer it in frames too; a lost frame costs a late answer, not values", () =>
  framesDrill("controller"));
