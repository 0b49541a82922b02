/**
 * A flush answer lost in transit (the one window an outage test cannot hit on purpose: an answer
 * inside a nats-server at the instant it dies) is noticed by its number, sent again by the rank,
 * and logged once; one the rank no longer keeps is reported and counted, never silently lost.
 *
 * The real controller-side handle talks to the real rank agent and runtime; between them, a
 * carrier that loses the answers the test says to lose (the fault being injected).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Collector } from "../../../src/core/collector.js";
import type { KeyState } from "../../../src/core/key-state.js";
import { MAX_RESENDS, RemoteRankHandle } from "../../../src/transport/controller/remote-rank.js";
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
import { diagnosticCounts } from "../../../src/core/diagnostics.js";
import { collectDiagnostics, waitFor } from "../../helpers.js";

const IDENTITY = { rank: 1, rankName: "Lossy_AAAA_r1", processName: "Lossy", localRank: 1, localWorldSize: 2 };

/** A handle and its rank, joined by a carrier that loses flush answers while `losing` is set. */
function pair(): { handle: RemoteRankHandle; collector: Collector; lose: (on: boolean) => void } {
  const collector = new Collector();
  const agent = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, collector) });
  let losing = false;
  const carrier: RankCarrier = {
    description: "a lossy test carrier",
    closesWithRank: false,
    post: (text) => {
      void agent.receive(text, (answer) => {
        const reply = decodeProtocolMessage("run-1", answer, "the rank") as RankReply | undefined;
        if (reply === undefined) return;
        if (losing && reply.ok && reply.snapshot !== undefined) return;
        setImmediate(() => handle.receive(reply));
      });
    },
  };
  const handle = new RemoteRankHandle(IDENTITY, "run-1", carrier);
  return { handle, collector, lose: (on) => (losing = on) };
}

function sumOf(states: readonly KeyState[]): number {
  return states.filter((s) => s.key === "values").reduce((n, s) => n + ((s.state as { sum?: number }).sum ?? 0), 0);
}

test("a flush answer lost in transit is sent again and logged once", async () => {
  const { handle, collector, lose } = pair();
  let logged = 0;
  const seen = await collectDiagnostics(async () => {
    collector.recordSlow("values", 1, "sum");
    logged += sumOf((await handle.flush(0, 1000)).states);
    collector.recordSlow("values", 2, "sum");
    lose(true);
    await assert.rejects(handle.flush(1, 100), /did not answer "flush"/);
    lose(false);
    collector.recordSlow("values", 4, "sum");
    logged += sumOf((await handle.flush(2, 1000)).states);
    await waitFor(() => handle.carriedStates > 0, { timeoutMs: 5000, what: "the lost answer to be sent again" });
    logged += sumOf((await handle.flush(3, 1000)).states);
    logged += sumOf((await handle.flush(4, 1000)).states);
  });
  assert.equal(logged, 7, "1 + 2 + 4, each once");
  assert.ok(
    seen.some(
      (d) =>
        d.code === `transport.resent:${IDENTITY.rankName}` &&
        /answer to flush\(1\) was lost in transit/.test(d.message),
    ),
  );
});

test("an answer the rank no longer keeps is reported and counted as lost", async () => {
  const { handle, collector, lose } = pair();
  const resent = `transport.resent:${IDENTITY.rankName}`;
  const lostCode = `transport.lostAnswer:${IDENTITY.rankName}`;
  let logged = 0;
  const seen = await collectDiagnostics(async () => {
    collector.recordSlow("values", 10_000, "sum");
    logged += sumOf((await handle.flush(0, 1000)).states);
    lose(true);
    // Answers 2 to KEPT_FLUSH_ANSWERS + 1 are lost; with the next one, answer 2 is no longer kept.
    for (let step = 1; step <= KEPT_FLUSH_ANSWERS; step++) {
      collector.recordSlow("values", step === 1 ? 100 : 1, "sum");
      await assert.rejects(handle.flush(step, 50));
    }
    lose(false);
    collector.recordSlow("values", 1000, "sum");
    logged += sumOf((await handle.flush(KEPT_FLUSH_ANSWERS + 1, 1000)).states);
    await waitFor(
      () => (diagnosticCounts()[resent] ?? 0) >= KEPT_FLUSH_ANSWERS - 1 && (diagnosticCounts()[lostCode] ?? 0) >= 1,
      { timeoutMs: 5000, what: "every kept answer sent again" },
    );
    logged += sumOf((await handle.flush(KEPT_FLUSH_ANSWERS + 2, 1000)).states);
    assert.equal(diagnosticCounts()[lostCode], 1, "one answer counted as lost");
  });
  assert.equal(logged, 10_000 + (KEPT_FLUSH_ANSWERS - 1) + 1000, "everything but the lost answer (100)");
  const lost = seen.find((d) => d.code === lostCode);
  assert.match(lost?.message ?? "", /flush answer 2 was lost in transit and could not be sent again .*no longer kept/);
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

test("a gap of 100,000 in a rank's answer numbers costs at most 16 requests to send again; the others are counted as lost at once", async () => {
  let seq = 1;
  const { handle, posted } = scripted((request, h) => {
    if (request.t === "flush") h.receive(snapshotReply(request.id, request.step, seq, 1));
  });
  const before = transportStats().lostAnswers;
  await collectDiagnostics(async () => {
    await handle.flush(0, 1000);
    seq = 100_001;
    await handle.flush(1, 1000);
    const resends = posted.flatMap((r) => (r.t === "resend" ? [r.seq] : []));
    assert.equal(resends.length, MAX_RESENDS);
    assert.deepEqual(
      resends,
      Array.from({ length: MAX_RESENDS }, (_v, i) => 100_001 - MAX_RESENDS + i),
      "the newest, which a rank may still keep",
    );
    assert.equal(transportStats().lostAnswers - before, 99_999 - MAX_RESENDS);
    handle.close("the test is over");
  });
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
