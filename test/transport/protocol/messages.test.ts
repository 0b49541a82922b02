/**
 * The wire protocol: golden messages (a format change is a visible diff), NaN/Infinity kept,
 * validation on receipt, and a rank agent that never throws on what it is sent.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import fc from "fast-check";
import { Collector } from "../../../src/core/collector.js";
import type { AccumulatorState } from "../../../src/core/reduce.js";
import { RankRuntime } from "../../../src/pipeline/runtime.js";
import {
  decodeProtocolMessage,
  encodeProtocolMessage,
  ignoredMessageCounts,
  type ProtocolMessage,
} from "../../../src/transport/protocol/messages.js";
import { RankAgent } from "../../../src/transport/rank/rank-agent.js";
import { decodeHostMessage } from "../../../src/transport/host/messages.js";
import { collectDiagnostics } from "../../helpers.js";

const IDENTITY = { rank: 1, rankName: "MyActor_KbWR_r1", processName: "MyActor", localRank: 1, localWorldSize: 2 };

const GOLDEN: Record<string, ProtocolMessage> = {
  register: { t: "register", identity: IDENTITY, pid: 4242, host: "node-a" },
  init: {
    t: "init",
    id: 1,
    init: {
      backends: { console: { loggingMode: "per_rank_reduce" } },
      primaryMetadata: { wandb: { runId: "abc123" } },
      run: { runDir: "runs/default/trial", experiment: "default", trial: "trial", resumeStep: 0 },
    },
  },
  flush: { t: "flush", id: 7, step: 3 },
  flushReply: {
    t: "reply",
    id: 7,
    rankName: "MyActor_KbWR_r1",
    ok: true,
    snapshot: {
      rankName: "MyActor_KbWR_r1",
      step: 3,
      droppedKeyRecords: 0,
      states: [
        { key: "loss", reduce: "mean", state: { v: 1, count: 2, sum: NaN } as AccumulatorState },
        { key: "reward_max", reduce: "max", state: { v: 1, count: 1, value: Infinity } as AccumulatorState },
        { key: "tokens", reduce: "sum", state: { v: 1, count: 2, sum: 256 } as AccumulatorState },
      ],
    },
  },
  timedReply: {
    t: "reply",
    id: 10,
    rankName: "MyActor_KbWR_r1",
    ok: true,
    snapshot: {
      rankName: "MyActor_KbWR_r1",
      step: 4,
      droppedKeyRecords: 0,
      states: [],
      timing: {
        rank: 1,
        host: "node-a",
        tracers: [
          {
            prefix: "train_step",
            steps: 2,
            totalMs: 412.5,
            phases: [
              { name: "forward", kind: "phase", count: 2, totalMs: 300.25 },
              { name: "allreduce", kind: "barrier", count: 2, totalMs: 12 },
            ],
          },
        ],
      },
    },
  },
  failedReply: {
    t: "reply",
    id: 8,
    rankName: "MyActor_KbWR_r1",
    ok: false,
    error: 'the rank module exports no function "myFn"',
  },
  deregister: { t: "deregister", rankName: "MyActor_KbWR_r1", reason: "left the run" },
  hello: { t: "hello", controller: "rankscope.run-1.ctl.Hx3kQ9" },
  resend: { t: "resend", id: 9, seq: 4 },
  ack: { t: "ack", acks: { MyActor_KbWR_r0: [4], MyActor_KbWR_r1: [3, 4] } },
  flushAcks: {
    t: "flush",
    id: 10,
    step: 7,
    wire: 1,
    taken: { MyActor_KbWR_r0: [5] },
    acks: { MyActor_KbWR_r0: [4], MyActor_KbWR_r1: [3, 4] },
  },
};

test("messages on the wire match the golden file", () => {
  const golden = JSON.parse(readFileSync(new URL("./golden/messages.json", import.meta.url), "utf8")) as Record<
    string,
    string
  >;
  for (const [name, message] of Object.entries(GOLDEN)) {
    assert.equal(
      encodeProtocolMessage("run-1", message),
      golden[name],
      `message "${name}" (update test/transport/protocol/golden/messages.json if the change is intended)`,
    );
  }
});

test("a message decodes to what was sent, NaN and Infinity included", () => {
  for (const message of Object.values(GOLDEN)) {
    const decoded = decodeProtocolMessage("run-1", encodeProtocolMessage("run-1", message), "test");
    assert.deepEqual(decoded, { proto: "rankscope", v: 1, run: "run-1", ...message });
  }
  const reply = decodeProtocolMessage(
    "run-1",
    Buffer.from(encodeProtocolMessage("run-1", GOLDEN["flushReply"] as ProtocolMessage)),
    "bytes",
  );
  assert.ok(reply !== undefined && reply.t === "reply" && reply.ok);
  assert.ok(Number.isNaN(reply.snapshot?.states[0]?.state["sum" as "count"]));
});

test("malformed and foreign messages are counted by reason and ignored", async () => {
  const before = { ...ignoredMessageCounts() };
  const good = JSON.parse(encodeProtocolMessage("run-1", { t: "flush", id: 1, step: 0 })) as Record<string, unknown>;
  const cases: Array<[unknown, "malformed" | "foreign"]> = [
    ["{truncated", "malformed"],
    [JSON.stringify({ ...good, step: -1 }), "malformed"],
    [JSON.stringify({ ...good, id: "1" }), "malformed"],
    [JSON.stringify({ ...good, t: "explode" }), "malformed"],
    [JSON.stringify({ ...good, t: "register", identity: { rank: 0 }, pid: 1, host: "h" }), "malformed"],
    // Forged step timings: a negative duration, an unknown phase kind, a thousand tracers.
    ...[
      { rank: 0, host: "h", tracers: [{ prefix: "t", steps: 1, totalMs: -1, phases: [] }] },
      {
        rank: 0,
        host: "h",
        tracers: [{ prefix: "t", steps: 1, totalMs: 1, phases: [{ name: "p", kind: "nap", count: 1, totalMs: 1 }] }],
      },
      {
        rank: 0,
        host: "h",
        tracers: Array.from({ length: 1000 }, () => ({ prefix: "t", steps: 1, totalMs: 1, phases: [] })),
      },
    ].map((timing): [unknown, "malformed"] => [
      JSON.stringify({
        ...good,
        t: "reply",
        id: 1,
        rankName: "r",
        ok: true,
        snapshot: { rankName: "r", step: 0, droppedKeyRecords: 0, states: [], timing },
      }),
      "malformed",
    ]),
    [JSON.stringify({ jsonrpc: "2.0", method: "flush" }), "foreign"],
    [JSON.stringify({ ...good, v: 2 }), "foreign"],
    [JSON.stringify({ ...good, run: "run-2" }), "foreign"],
    [12345, "foreign"],
  ];
  const seen = await collectDiagnostics(() => {
    for (const [data, _reason] of cases)
      assert.equal(decodeProtocolMessage("run-1", data, "test"), undefined, String(data));
  });
  const after = ignoredMessageCounts();
  assert.equal(after.malformed - before.malformed, cases.filter(([, r]) => r === "malformed").length);
  assert.equal(after.foreign - before.foreign, cases.filter(([, r]) => r === "foreign").length);
  assert.ok(seen.some((d) => /speaks rankscope protocol 2, this process speaks 1/.test(d.message)));
  assert.ok(seen.some((d) => /belongs to run "run-2", not "run-1"/.test(d.message)));
});

/** A flush reply of rank `r` at step 0 carrying `states` (as an attacker or a broken rank would write them). */
function replyWith(states: unknown[], rankName: unknown = "r"): string {
  return JSON.stringify({
    proto: "rankscope",
    v: 1,
    run: "run-1",
    t: "reply",
    id: 1,
    rankName,
    ok: true,
    snapshot: { rankName, step: 0, droppedKeyRecords: 0, states },
  });
}

test("a state that does not fit its reduction is left out of the answer and counted by kind; the answer's other states are used", async () => {
  const before = { ...ignoredMessageCounts() };
  const good = { key: "ones", reduce: "sum", state: { v: 1, count: 4, sum: 4 } };
  const bad: Array<[unknown, "invalidState" | "invalidName" | "malformed"]> = [
    [{ key: "ones", reduce: "sum", state: { v: 1, count: 1 } }, "invalidState"], // no sum: was logged as NaN
    [{ key: "ones", reduce: "sum", state: { v: 1, count: 1, sum: "5" } }, "invalidState"], // a string sum: was ones/0…ones/10
    [{ key: "ones", reduce: "sum", state: { v: 1, count: -3, sum: 5 } }, "invalidState"],
    [{ key: "ones", reduce: "sum", state: { v: 1, count: Infinity, sum: 5 } }, "invalidState"],
    [{ key: "lat", reduce: "std", state: { v: 1, count: 2, mean: 1, m2: -4 } }, "invalidState"],
    [
      {
        key: "q",
        reduce: "quantiles",
        state: {
          v: 1,
          count: 1,
          sum: 1,
          min: 1,
          max: 1,
          zeros: 0,
          nan: 0,
          posInf: 0,
          negInf: 0,
          positive: { offset: 1e9, counts: [1] },
          negative: { offset: 0, counts: [] },
        },
      },
      "invalidState",
    ],
    [
      {
        key: "q",
        reduce: "quantiles",
        state: {
          v: 1,
          count: 5,
          sum: 1,
          min: 1,
          max: 1,
          zeros: 0,
          nan: 0,
          posInf: 0,
          negInf: 0,
          positive: { offset: 0, counts: [1] },
          negative: { offset: 0, counts: [] },
        },
      },
      "invalidState",
    ],
    [
      {
        key: "h",
        reduce: "histogram",
        state: { v: 1, count: 1, min: 1, max: 1, sum: 1, sumSquares: 1, nan: 0, buckets: [999_999], counts: [1] },
      },
      "invalidState",
    ],
    [{ key: "s", reduce: "sample", state: { v: 1, count: 3, top: [{}, {}, {}], bottom: [] } }, "invalidState"],
    [{ key: "x".repeat(200_000), reduce: "sum", state: { v: 1, count: 1, sum: 1 } }, "invalidName"],
    [{ key: "ones", reduce: "quantiles(\u0000)", state: { v: 1, count: 1, sum: 1 } }, "invalidName"],
    [{ key: "k" }, "malformed"],
    ["not a state", "malformed"],
  ];
  await collectDiagnostics(() => {
    const reply = decodeProtocolMessage("run-1", replyWith([good, ...bad.map(([s]) => s)]), "test");
    assert.ok(reply?.t === "reply" && reply.ok && reply.snapshot !== undefined);
    assert.deepEqual(reply.snapshot.states, [good], "only the valid state is kept");
  });
  const after = ignoredMessageCounts();
  for (const kind of ["invalidState", "invalidName", "malformed"] as const) {
    assert.equal(after[kind] - before[kind], bad.filter(([, k]) => k === kind).length, kind);
  }
});

test("names out of bounds are refused and counted as invalidName: a 200 KB rank name, a host id with subject wildcards", async () => {
  const before = ignoredMessageCounts().invalidName;
  const identity = { rank: 0, rankName: "r".repeat(200_000), processName: "P", localRank: 0, localWorldSize: 1 };
  await collectDiagnostics(() => {
    assert.equal(
      decodeProtocolMessage(
        "run-1",
        JSON.stringify({ proto: "rankscope", v: 1, run: "run-1", t: "register", identity, pid: 1, host: "h" }),
        "test",
      ),
      undefined,
    );
    assert.equal(
      decodeProtocolMessage(
        "run-1",
        JSON.stringify({
          proto: "rankscope",
          v: 1,
          run: "run-1",
          t: "register",
          identity: { ...identity, rankName: "h1.*" },
          pid: 1,
          host: "h",
        }),
        "test",
      ),
      undefined,
    );
    assert.equal(decodeProtocolMessage("run-1", replyWith([], "a.>"), "test"), undefined);
    assert.equal(
      decodeHostMessage(
        "run-1",
        JSON.stringify({ proto: "rankscope", v: 1, run: "run-1", t: "hostRegister", host: "h1.*", pid: 1 }),
        "test",
      ),
      undefined,
    );
    assert.equal(
      decodeHostMessage(
        "run-1",
        JSON.stringify({
          proto: "rankscope",
          v: 1,
          run: "run-1",
          t: "hostRegister",
          host: "h".repeat(100_000),
          pid: 1,
        }),
        "test",
      ),
      undefined,
    );
  });
  assert.equal(ignoredMessageCounts().invalidName - before, 5);
});

test("a rank agent answers requests, reports failures as replies, and ignores garbage", async () => {
  const collector = new Collector();
  const agent = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, collector) });
  const replies: string[] = [];
  const send = (text: string): void => void replies.push(text);
  await collectDiagnostics(async () => {
    await agent.receive("not json", send);
    await agent.receive(encodeProtocolMessage("run-1", GOLDEN["deregister"] as ProtocolMessage), send);
  });
  assert.deepEqual(replies, [], "no answer to garbage or to a message only the controller takes");

  collector.numericEntryFor("loss", "mean")?.accumulator.append(2);
  await agent.receive(encodeProtocolMessage("run-1", { t: "flush", id: 5, step: 0 }), send);
  await agent.receive(encodeProtocolMessage("run-1", { t: "call", id: 6, fn: "myFn", args: [] }), send);
  const [flushed, failed] = replies.map((r) => decodeProtocolMessage("run-1", r, "agent"));
  assert.ok(flushed?.t === "reply" && flushed.ok && flushed.snapshot !== undefined);
  assert.equal(flushed.snapshot.step, 0);
  assert.deepEqual(
    flushed.snapshot.states.map((s) => [s.key, s.state.count]),
    [["loss", 1]],
  );
  assert.ok(failed?.t === "reply" && !failed.ok);
  assert.match(failed.error, /the rank module exports no function "myFn"/);
});

test("no input makes decoding throw, and a rank agent answers or ignores anything it is sent", async () => {
  const collector = new Collector();
  const agent = new RankAgent({ runId: "run-1", runtime: new RankRuntime(IDENTITY, collector) });
  const valid = Object.values(GOLDEN).map((m) => encodeProtocolMessage("run-1", m));
  // Valid messages with one character changed, cut short, or with a field replaced by anything.
  const mutated = fc.oneof(
    fc
      .tuple(fc.constantFrom(...valid), fc.nat(), fc.string({ minLength: 1, maxLength: 1 }))
      .map(([text, i, c]) => text.slice(0, i % text.length) + c + text.slice((i % text.length) + 1)),
    fc.tuple(fc.constantFrom(...valid), fc.nat()).map(([text, i]) => text.slice(0, i % text.length)),
    fc
      .tuple(fc.constantFrom(...Object.values(GOLDEN)), fc.string(), fc.anything())
      .map(([m, key, value]) => JSON.stringify({ proto: "rankscope", v: 1, run: "run-1", ...m, [key]: value })),
  );
  await collectDiagnostics(async () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.anything(), fc.string(), mutated),
        (data) => void decodeProtocolMessage("run-1", data, "fuzz"),
      ),
      { numRuns: 2000 },
    );
    await fc.assert(
      fc.asyncProperty(mutated, async (text) => {
        await agent.receive(text, () => undefined);
      }),
      { numRuns: 300 },
    );
  });
});
