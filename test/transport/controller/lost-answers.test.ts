/**
 * A flush answer lost in transit (an answer inside a nats-server at the instant it dies) is kept by
 * the rank until acknowledged, sent again with its next answer, and logged once; one the rank can
 * no longer keep is reported and counted, never silently lost.
 *
 * The real controller-side handle talks to the real rank agent and runtime; between them, a
 * carrier that loses the answers the test says to lose (the fault being injected).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Collector } from "../../../src/core/collector.js";
import type { KeyState } from "../../../src/core/key-state.js";
import { RemoteRankHandle } from "../../../src/transport/controller/remote-rank.js";
import type { RankCarrier } from "../../../src/transport/controller/rank-carrier.js";
import {
  decodeProtocolMessage,
  ignoredMessageCounts,
  transportStats,
  type ControllerRequest,
  type RankReply,
} from "../../../src/transport/protocol/messages.js";
import { KEPT_FLUSH_ANSWERS, RankAgent } from "../../../src/transport/rank/rank-agent.js";
import { RankRuntime } from "../../../src/pipeline/runtime.js";
import { collectDiagnostics, waitFor } from "../../helpers.js";

const IDENTITY = { rank: 1, rankName: "Lossy_AAAA_r1", processName: "Lossy", localRank: 1, localWorldSize: 2 };

/**
 * A handle and its rank, joined by a carrier that loses flush answers while `losing` is set and
 * delivers them 200 ms late while `slow` is; `carried` counts the answers the rank sent again.
 */
function pair(): {
  handle: RemoteRankHandle;
  collector: Collector;
  agent: RankAgent;
  lose: (on: boolean) => void;
  slow: (on: boolean) => void;
  carried: () => number;
} {
  const collector = new Collector();
  const agent = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, collector) });
  let losing = false;
  let slow = false;
  let carried = 0;
  const carrier: RankCarrier = {
    description: "a lossy test carrier",
    closesWithRank: false,
    post: (text) => {
      void agent.receive(text, (answer) => {
        const reply = decodeProtocolMessage("run-1", answer, "the rank") as RankReply | undefined;
        if (reply === undefined) return;
        if (reply.ok && reply.carried === true) carried++;
        if (losing && reply.ok && reply.snapshot !== undefined) return;
        if (slow) setTimeout(() => handle.receive(reply), 200);
        else setImmediate(() => handle.receive(reply));
      });
    },
  };
  const handle = new RemoteRankHandle(IDENTITY, "run-1", carrier);
  return {
    handle,
    collector,
    agent,
    lose: (on) => (losing = on),
    slow: (on) => (slow = on),
    carried: () => carried,
  };
}

function sumOf(states: readonly KeyState[]): number {
  return states.filter((s) => s.key === "values").reduce((n, s) => n + ((s.state as { sum?: number }).sum ?? 0), 0);
}

test("a flush answer lost in transit is sent again with the rank's next answer and logged once, in that flush", async () => {
  const { handle, collector, lose } = pair();
  let logged = 0;
  const log = async (step: number): Promise<number> => {
    const result = await handle.flush(step, 1000);
    handle.acknowledge(result);
    logged += sumOf(result.states);
    return sumOf(result.states);
  };
  const seen = await collectDiagnostics(async () => {
    collector.recordSlow("values", 1, "sum");
    await log(0);
    collector.recordSlow("values", 2, "sum");
    lose(true);
    await assert.rejects(handle.flush(1, 100), /did not answer "flush"/);
    lose(false);
    collector.recordSlow("values", 4, "sum");
    assert.equal(await log(2), 2 + 4, "the lost answer's values are in the next flush");
    assert.equal(await log(3), 0);
    assert.equal(await log(4), 0);
  });
  assert.equal(logged, 7, "1 + 2 + 4, each once");
  assert.ok(
    seen.some(
      (d) =>
        d.code === `transport.resent:${IDENTITY.rankName}` &&
        /answer to flush\(1\) was never acknowledged \(lost in transit/.test(d.message),
    ),
  );
});

test("a late answer is carried into the next flush once, and not sent again: the flush request names it taken", async () => {
  const { handle, collector, agent, slow, carried } = pair();
  let logged = 0;
  await collectDiagnostics(async () => {
    collector.recordSlow("values", 1, "sum");
    const first = await handle.flush(0, 1000);
    handle.acknowledge(first);
    logged += sumOf(first.states);
    slow(true);
    collector.recordSlow("values", 2, "sum");
    await assert.rejects(handle.flush(1, 50), /did not answer "flush"/);
    await waitFor(() => handle.carriedStates > 0, { timeoutMs: 5000, what: "the late answer to arrive" });
    slow(false);
    collector.recordSlow("values", 4, "sum");
    const next = await handle.flush(2, 1000);
    handle.acknowledge(next);
    logged += sumOf(next.states);
  });
  assert.equal(logged, 7, "1 + 2 + 4, each once");
  assert.equal(carried(), 0, "the late answer, taken already, was not sent again");
  assert.deepEqual(agent.unacknowledged(), [], "acknowledged with the flush that logged it");
});

test("an answer lost past what the rank keeps is reported and counted as lost", async () => {
  const { handle, collector, lose } = pair();
  const lostCode = `transport.unackedDropped:${IDENTITY.rankName}`;
  let logged = 0;
  const before = transportStats().lostAnswers;
  const seen = await collectDiagnostics(async () => {
    collector.recordSlow("values", 10_000, "sum");
    const first = await handle.flush(0, 1000);
    handle.acknowledge(first);
    logged += sumOf(first.states);
    lose(true);
    // Answers 2 to KEPT_FLUSH_ANSWERS + 1 are lost, and sent again lost; with the next, answer 2 is no longer kept.
    for (let step = 1; step <= KEPT_FLUSH_ANSWERS; step++) {
      collector.recordSlow("values", step === 1 ? 100 : 1, "sum");
      await assert.rejects(handle.flush(step, 50));
    }
    lose(false);
    collector.recordSlow("values", 1000, "sum");
    const merged = await handle.flush(KEPT_FLUSH_ANSWERS + 1, 1000);
    handle.acknowledge(merged);
    logged += sumOf(merged.states);
    logged += sumOf((await handle.flush(KEPT_FLUSH_ANSWERS + 2, 1000)).states);
  });
  assert.equal(logged, 10_000 + KEPT_FLUSH_ANSWERS - 1 + 1000, "everything but the answer no longer kept (100)");
  assert.equal(transportStats().lostAnswers - before, 1, "one answer counted as lost");
  assert.match(
    seen.find((d) => d.code === lostCode)?.message ?? "",
    /flush answer 2 \(flush\(1\)\) was never acknowledged/,
  );
});

/** A handle whose carrier answers each flush itself, through `answer` (the test plays the rank), recording what was posted. */
function scripted(answer: (request: ControllerRequest, handle: RemoteRankHandle) => void): {
  handle: RemoteRankHandle;
  posted: ControllerRequest[];
} {
  const posted: ControllerRequest[] = [];
  const carrier: RankCarrier = {
    description: "a scripted test carrier",
    closesWithRank: false,
    post: (_text, request) => {
      if (request === undefined) return;
      posted.push(request);
      setImmediate(() => answer(request, handle));
    },
  };
  const handle = new RemoteRankHandle(IDENTITY, "run-1", carrier);
  return { handle, posted };
}

const snapshotReply = (id: number, step: number, seq: number, sum: number): RankReply => ({
  t: "reply",
  id,
  rankName: IDENTITY.rankName,
  ok: true,
  snapshot: {
    rankName: IDENTITY.rankName,
    step,
    seq,
    droppedKeyRecords: 0,
    states: [{ key: "values", reduce: "sum", state: { v: 1, count: 1, sum } as KeyState["state"] }],
  },
});

test("each answer is used once: a duplicate, and an answer to a request never asked, are counted as replayed and not logged", async () => {
  const { handle } = scripted((request, h) => {
    if (request.t !== "flush") return;
    const reply = snapshotReply(request.id, request.step, request.step + 1, 5);
    h.receive(reply);
    h.receive(reply); // the same answer again (a replay)
    h.receive({ ...reply, id: 999_999 }); // an answer to nothing this controller asked
  });
  const before = ignoredMessageCounts().replayed;
  let logged = 0;
  await collectDiagnostics(async () => {
    for (let step = 0; step < 3; step++) logged += sumOf((await handle.flush(step, 1000)).states);
    await new Promise((resolve) => setImmediate(resolve));
  });
  assert.equal(logged, 15, "5 per flush, once each");
  assert.equal(ignoredMessageCounts().replayed - before, 6);
});
