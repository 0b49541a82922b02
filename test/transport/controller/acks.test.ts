/**
 * Acknowledged flush answers (issues 24 and 31): a rank keeps its answers until its receiver says it
 * took them, and sends the unacknowledged ones again with its next answer; a receiver takes each once.
 * The real controller-side handles and the real rank agent and runtime, joined by a carrier that
 * delivers in order and acknowledges the way the NATS carrier does (an `ack` message to the rank).
 * The end-to-end drill with a SIGKILLed controller is test/transport/controller-restart.test.ts.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Collector } from "../../../src/core/collector.js";
import type { KeyState } from "../../../src/core/key-state.js";
import { RemoteRankHandle } from "../../../src/transport/controller/remote-rank.js";
import type { RankCarrier } from "../../../src/transport/controller/rank-carrier.js";
import {
  decodeProtocolMessage,
  encodeProtocolMessage,
  type RankReply,
} from "../../../src/transport/protocol/messages.js";
import { KEPT_FLUSH_ANSWERS, RankAgent } from "../../../src/transport/rank/rank-agent.js";
import { RankRuntime } from "../../../src/pipeline/runtime.js";
import { diagnosticCounts } from "../../../src/core/diagnostics.js";
import { collectDiagnostics } from "../../helpers.js";

const IDENTITY = { rank: 1, rankName: "Acked_AAAA_r1", processName: "Acked", localRank: 1, localWorldSize: 2 };

/** A controller-side handle talking to `agent` (answers delivered on the next turn, acks as messages). */
function controllerOf(agent: RankAgent, options: { acks?: boolean; ackLost?: { on: boolean } } = {}): RemoteRankHandle {
  const carrier: RankCarrier = {
    description: "a test carrier",
    closesWithRank: false,
    post: (text) => {
      void agent.receive(text, (answer) => {
        const reply = decodeProtocolMessage("run-1", answer, "the rank") as RankReply | undefined;
        if (reply === undefined) return;
        setImmediate(() => handle.receive(reply));
      });
    },
    ...(options.acks === false
      ? {}
      : {
          acknowledge: (seqs) =>
            options.ackLost?.on === true ||
            void agent.receive(
              encodeProtocolMessage("run-1", { t: "ack", acks: { [IDENTITY.rankName]: seqs } }),
              () => undefined,
            ),
        }),
  };
  const handle = new RemoteRankHandle(IDENTITY, "run-1", carrier);
  return handle;
}

function sumOf(states: readonly KeyState[]): number {
  return states.filter((s) => s.key === "values").reduce((n, s) => n + ((s.state as { sum?: number }).sum ?? 0), 0);
}

test("an answer the controller logged is acknowledged; the ones a dead controller took but never logged go to the next controller with the rank's next answer, once", async () => {
  const collector = new Collector();
  const agent = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, collector) });
  const dead = controllerOf(agent);
  let logged = 0;
  const seen = await collectDiagnostics(async () => {
    collector.recordSlow("values", 1, "sum");
    const first = await dead.flush(0, 1000);
    logged += sumOf(first.states);
    dead.acknowledge(first);
    assert.deepEqual(agent.unacknowledged(), [], "logged and acknowledged: nothing to send again");
    // The dead controller takes two more answers and dies before logging them.
    collector.recordSlow("values", 2, "sum");
    await dead.flush(1, 1000);
    collector.recordSlow("values", 4, "sum");
    await dead.flush(2, 1000);
    assert.deepEqual(agent.unacknowledged(), [2, 3]);

    const next = controllerOf(agent);
    collector.recordSlow("values", 8, "sum");
    const merged = await next.flush(3, 1000);
    assert.equal(sumOf(merged.states), 2 + 4 + 8, "the unacknowledged answers came with the new one, into this flush");
    logged += sumOf(merged.states);
    next.acknowledge(merged);
    assert.deepEqual(agent.unacknowledged(), [], "all acknowledged with the flush that logged them");
    // An ack that got lost: the rank sends the logged answer again; it is not taken twice.
    collector.recordSlow("values", 16, "sum");
    const ackLost = { on: true };
    const again = controllerOf(agent, { ackLost });
    const answer = await again.flush(4, 1000);
    logged += sumOf(answer.states);
    again.acknowledge(answer);
    ackLost.on = false;
    assert.deepEqual(agent.unacknowledged(), [5], "its ack is lost");
    collector.recordSlow("values", 32, "sum");
    const after = await again.flush(5, 1000);
    logged += sumOf(after.states);
    again.acknowledge(after);
    assert.deepEqual(agent.unacknowledged(), []);
  });
  assert.equal(logged, 1 + 2 + 4 + 8 + 16 + 32, "every value once");
  assert.equal(seen.filter((d) => d.code === `transport.resent:${IDENTITY.rankName}`).length, 2);
});

test("a rank counts an unacknowledged answer it can no longer keep; over a carrier with no ack of its own (a worker's port, IPC) the handle posts the ack", async () => {
  const collector = new Collector();
  const agent = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, collector) });
  const handle = controllerOf(agent);
  const code = `transport.unackedDropped:${IDENTITY.rankName}`;
  const seen = await collectDiagnostics(async () => {
    const first = await handle.flush(0, 1000);
    handle.acknowledge(first);
    // Answers taken and never logged, past what a rank keeps.
    for (let step = 1; step <= KEPT_FLUSH_ANSWERS + 1; step++) {
      collector.recordSlow("values", 1, "sum");
      await handle.flush(step, 1000);
    }
  });
  assert.equal(diagnosticCounts()[code], 1, "one unacknowledged answer dropped, counted");
  assert.match(
    seen.find((d) => d.code === code)?.message ?? "",
    /flush answer 2 \(flush\(1\)\) was never acknowledged and is no longer kept/,
  );

  const plain = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, new Collector()) });
  const spawned = controllerOf(plain, { acks: false });
  const quiet = await collectDiagnostics(async () => {
    for (let step = 0; step <= KEPT_FLUSH_ANSWERS + 2; step++) spawned.acknowledge(await spawned.flush(step, 1000));
  });
  assert.deepEqual(
    quiet.filter((d) => d.code === code),
    [],
  );
  assert.deepEqual(plain.unacknowledged(), []);
});

test("a rank registering with a controller that said hello is named missing at its flushes, not counted as answering: the values it holds and the dead controller's unacknowledged answer go into the first flush after registration, once", async () => {
  const collector = new Collector();
  const agent = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, collector) });
  const dead = controllerOf(agent);
  let recorded = 0;
  let logged = 0;
  const record = (v: number): void => {
    collector.recordSlow("values", v, "sum");
    recorded += v;
  };
  const seen = await collectDiagnostics(async () => {
    record(1);
    const first = await dead.flush(0, 1000);
    logged += sumOf(first.states);
    dead.acknowledge(first);
    record(2);
    await dead.flush(1, 1000);
    assert.deepEqual(agent.unacknowledged(), [2], "the dead controller took answer 2 and never logged it");

    // A restarted controller says hello; before the rank is registered, twice the ring's worth of its flushes arrive.
    agent.holdFlushes(true);
    const next = controllerOf(agent);
    for (let step = 100; step < 100 + 2 * KEPT_FLUSH_ANSWERS; step++) {
      record(1);
      // Its answer holds none of its values: the flush must not count it as answered.
      await assert.rejects(next.flush(step, 1000), /is registering and answered flush\(\d+\) without its values/);
    }
    assert.equal(agent.flushesHeld, 2 * KEPT_FLUSH_ANSWERS);
    assert.deepEqual(agent.unacknowledged(), [2], "answer 2 is still kept");
    agent.holdFlushes(false);
    const merged = await next.flush(200, 1000);
    logged += sumOf(merged.states);
    next.acknowledge(merged);
    assert.deepEqual(agent.unacknowledged(), []);
  });
  assert.equal(logged, recorded, "the values recorded while held go into the first flush after registration");
  assert.deepEqual(
    seen.filter((d) => d.code.startsWith("transport.unackedDropped") || d.code.startsWith("transport.lostAnswer")),
    [],
  );
});

test("acknowledgements riding on a flush request are read before the rank sends its kept answers again", async () => {
  const collector = new Collector();
  const agent = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, collector) });
  const sent: RankReply[] = [];
  const flush = (id: number, step: number, acks?: readonly number[]): Promise<void> =>
    agent.receive(
      encodeProtocolMessage("run-1", {
        t: "flush",
        id,
        step,
        ...(acks === undefined ? {} : { acks: { [IDENTITY.rankName]: acks } }),
      }),
      (text) => {
        const reply = decodeProtocolMessage("run-1", text, "the rank");
        if (reply?.t === "reply") sent.push(reply);
      },
    );
  collector.recordSlow("values", 1, "sum");
  await flush(1, 0);
  assert.deepEqual(agent.unacknowledged(), [1], "kept until acknowledged");
  collector.recordSlow("values", 2, "sum");
  await flush(2, 1, [1]);
  assert.deepEqual(
    sent.map((r) => (r.ok ? [r.carried === true, r.snapshot?.seq] : [])),
    [
      [false, 1],
      [false, 2],
    ],
    "answer 1, acknowledged in the request, is not sent again",
  );
  assert.deepEqual(agent.unacknowledged(), [2]);
  await flush(3, 2);
  assert.deepEqual(
    sent.slice(2).map((r) => (r.ok ? [r.carried === true, r.snapshot?.seq] : [])),
    [
      [true, 2],
      [false, 3],
    ],
    "without an ack, the kept answer goes again, carried",
  );
});
