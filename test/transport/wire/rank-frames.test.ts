/**
 * A rank's flush answer as a wire frame (what a host agent asks for with `flush.wire`): the frame
 * carries exactly the states the JSON answer would (property test over real collector states, NaN
 * and ±Infinity included), only when asked and only where the carrier can send bytes; `resync`
 * starts a new key table; a frame header that is not a well-formed flush reply of this run is
 * counted and ignored.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { Collector } from "../../../src/core/collector.js";
import { mergeRankKeyStates } from "../../../src/pipeline/reduce-states.js";
import {
  checkReplyFrameHeader,
  decodeProtocolMessage,
  encodeProtocolMessage,
  ignoredMessageCounts,
  type RankReply,
} from "../../../src/transport/protocol/messages.js";
import { RankAgent } from "../../../src/transport/rank/rank-agent.js";
import { RankRuntime } from "../../../src/pipeline/runtime.js";
import { isWireFrame, readFrameHeader, StateDecoder, WIRE_VERSION } from "../../../src/transport/wire/codec.js";

const RUN = "run1";
const REDUCES = ["mean", "sum", "max", "min", "std", "quantiles"] as const;
const value = fc.oneof(
  { weight: 8, arbitrary: fc.double({ noNaN: false }) },
  { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity, -Infinity, 0, -0, 1e308, -5e-324) },
);

interface Answer {
  readonly text?: string;
  readonly frame?: Uint8Array;
}

function rankOf(name: string): { agent: RankAgent; collector: Collector } {
  const collector = new Collector();
  const runtime = new RankRuntime(
    { rank: 0, rankName: name, processName: "Sim", localRank: 0, localWorldSize: 1 },
    collector,
  );
  return { agent: new RankAgent({ runId: RUN, runtime }), collector };
}

async function ask(agent: RankAgent, request: Record<string, unknown>, frames: boolean): Promise<Answer> {
  let answer: Answer = {};
  await agent.receive(
    encodeProtocolMessage(RUN, request as never),
    (text) => (answer = { text }),
    "the test",
    frames ? (frame) => (answer = { frame }) : undefined,
  );
  return answer;
}

test("a rank answers a flush asking for frames with one frame holding exactly its states; merged, they equal the JSON answers' merge", async () => {
  let id = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(fc.record({ key: fc.integer({ min: 0, max: 30 }), value }), { maxLength: 60 }), {
        minLength: 1,
        maxLength: 4,
      }),
      async (flushes) => {
        // Two ranks recording the same values: one answers in frames, the other in JSON; and a bare
        // collector, whose states are what the rank took (JSON itself turns -0 into 0).
        const framed = rankOf("Sim_r0");
        const plain = rankOf("Sim_r0");
        const reference = new Collector();
        const decoder = new StateDecoder();
        for (const [step, records] of flushes.entries()) {
          for (const { key, value: v } of records) {
            for (const collector of [framed.collector, plain.collector, reference])
              collector.recordSlow(`k/${key}`, v, REDUCES[key % REDUCES.length]);
          }
          // Every reduction here has a binary layout (quantile sketches too): the states bit for bit, -0 included.
          const taken = reference.takeStates();
          const asked = { t: "flush", id: ++id, step, wire: WIRE_VERSION };
          const a = await ask(framed.agent, asked, true);
          const b = await ask(plain.agent, { t: "flush", id, step }, true);
          assert.ok(
            a.frame !== undefined && isWireFrame(a.frame),
            "asked for frames over a carrier that sends bytes: a frame",
          );
          assert.ok(b.text !== undefined, "not asked: JSON");
          const header = checkReplyFrameHeader(RUN, readFrameHeader(a.frame), "the test");
          assert.ok(header !== undefined);
          const json = decodeProtocolMessage(RUN, b.text, "the test") as RankReply & { ok: true };
          assert.deepEqual(
            [header.id, header.rankName, header.step, header.seq, header.dropped],
            [id, "Sim_r0", step, json.snapshot?.seq, json.snapshot?.droppedKeyRecords],
          );
          const states = decoder.toKeyStates(decoder.decode(a.frame));
          assert.deepEqual(
            states,
            taken,
            "the states the rank took, bit for bit (deepEqual tells NaN, -0 and ±Infinity apart)",
          );
          assert.deepEqual(
            states.map((s) => s.key),
            json.snapshot?.states.map((s) => s.key),
            "the keys of the JSON answer",
          );
          assert.deepEqual(
            mergeRankKeyStates(
              [
                { rankName: "a", states },
                { rankName: "b", states },
              ],
              step,
            ),
            mergeRankKeyStates(
              [
                { rankName: "a", states: taken },
                { rankName: "b", states: taken },
              ],
              step,
            ),
          );
        }
      },
    ),
    { numRuns: 60 },
  );
});

test("frames only when asked for this wire version and the carrier sends bytes; resync starts a new key table; a resend stays JSON", async () => {
  const { agent, collector } = rankOf("Sim_r1");
  collector.recordSlow("a", 1, "mean");
  assert.ok(
    (await ask(agent, { t: "flush", id: 1, step: 0, wire: WIRE_VERSION }, false)).text !== undefined,
    "a carrier without frames (IPC, a worker port) gets JSON",
  );
  collector.recordSlow("a", 2, "mean");
  assert.ok(
    (await ask(agent, { t: "flush", id: 2, step: 1, wire: WIRE_VERSION + 1 }, true)).text !== undefined,
    "another wire version: JSON",
  );
  collector.recordSlow("a", 3, "mean");
  const first = (await ask(agent, { t: "flush", id: 3, step: 2, wire: WIRE_VERSION }, true)).frame;
  collector.recordSlow("a", 4, "mean");
  const second = (await ask(agent, { t: "flush", id: 4, step: 3, wire: WIRE_VERSION }, true)).frame;
  collector.recordSlow("a", 5, "mean");
  const third = (
    await ask(agent, { t: "flush", id: 5, step: 4, wire: WIRE_VERSION, resync: ["Sim_other", "Sim_r1"] }, true)
  ).frame;
  assert.ok(first !== undefined && second !== undefined && third !== undefined);
  const [h1, h2, h3] = [first, second, third].map((f) => readFrameHeader(f));
  assert.equal(h1?.session, h2?.session, "one key table across flushes");
  assert.notEqual(h3?.session, h2?.session, "resync naming this rank: a new session");
  // A receiver that never saw the first frames reads the resynced one on its own.
  const fresh = new StateDecoder();
  const frame = fresh.decode(third);
  assert.equal(frame.tableGap, false);
  assert.deepEqual(fresh.toKeyStates(frame), [{ key: "a", reduce: "mean", state: { v: 1, count: 1, sum: 5 } }]);
  // A lost frame is sent again on request, as JSON (any receiver reads it).
  const resent = await ask(agent, { t: "resend", id: 6, seq: h2?.["seq"] }, true);
  const reply = decodeProtocolMessage(RUN, resent.text, "the test") as RankReply & { ok: true };
  assert.deepEqual(reply.snapshot?.states, [{ key: "a", reduce: "mean", state: { v: 1, count: 1, sum: 4 } }]);
});

test("a frame header that is not a successful flush reply of this run and version is counted and ignored", () => {
  const good = {
    proto: "rankscope",
    v: 1,
    run: RUN,
    t: "reply",
    id: 1,
    rankName: "Sim_r0",
    ok: true,
    step: 0,
    seq: 1,
    dropped: 0,
    session: "s",
  };
  assert.ok(checkReplyFrameHeader(RUN, good, "the test") !== undefined);
  const counts = ignoredMessageCounts();
  const cases: Array<[Record<string, unknown>, "malformed" | "foreign" | "invalidName"]> = [
    [{ ...good, run: "other" }, "foreign"],
    [{ ...good, v: 2 }, "foreign"],
    [{ ...good, proto: "x" }, "foreign"],
    [{ ...good, ok: false }, "malformed"],
    [{ ...good, t: "register" }, "malformed"],
    [{ ...good, seq: -1 }, "malformed"],
    [{ ...good, rankName: "" }, "invalidName"],
    [{ ...good, rankName: "Sim.*" }, "invalidName"],
    [{ ...good, rankName: "r".repeat(200_000) }, "invalidName"],
    [{ ...good, dropped: undefined }, "malformed"],
  ];
  for (const [header, reason] of cases) {
    const before = counts[reason];
    assert.equal(checkReplyFrameHeader(RUN, header, "the test"), undefined, JSON.stringify(header));
    assert.equal(counts[reason], before + 1, `counted as ${reason}: ${JSON.stringify(header)}`);
  }
  // A flush request's new fields are validated like the rest.
  const malformed = counts.malformed;
  const invalidName = counts.invalidName;
  assert.equal(
    decodeProtocolMessage(
      RUN,
      encodeProtocolMessage(RUN, { t: "flush", id: 1, step: 0, wire: -1 } as never),
      "the test",
    ),
    undefined,
  );
  assert.equal(
    decodeProtocolMessage(
      RUN,
      encodeProtocolMessage(RUN, { t: "flush", id: 1, step: 0, resync: [3] } as never),
      "the test",
    ),
    undefined,
  );
  assert.equal(counts.malformed, malformed + 1);
  assert.equal(counts.invalidName, invalidName + 1);
});
