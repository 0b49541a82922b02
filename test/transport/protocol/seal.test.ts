/**
 * Sealed messages: what a holder of the run secret seals opens once, on the subject and reply it
 * was sealed for; anything else — another secret, altered bytes, another subject or reply inbox,
 * a replay, a message out of the window — is refused with its kind, and nothing of the payload is
 * readable without the secret.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  MAX_SEAL_AGE_MS,
  Opener,
  REPLAY_WINDOW,
  RunKey,
  SEAL_OVERHEAD,
  Sealer,
  isSealed,
} from "../../../src/transport/protocol/seal.js";

const SECRET = "a-run-secret-of-at-least-32-characters!";
const key = RunKey.derive(SECRET, "run-1");
const text = (data: Uint8Array): string => Buffer.from(data).toString("utf8");

test("a sealed message opens once, as it was sent, on its subject and reply; its payload is not readable on the wire", () => {
  const sealer = new Sealer(key);
  const opener = new Opener(key);
  const payload = JSON.stringify({
    t: "reply",
    states: [{ key: "ones", reduce: "sum", state: { v: 1, count: 400, sum: 400 } }],
  });
  const sealed = sealer.seal("rankscope.run-1.ctl.X", undefined, payload);
  assert.ok(isSealed(sealed));
  assert.equal(sealed.length, payload.length + SEAL_OVERHEAD);
  assert.ok(
    !text(sealed).includes("ones") && !text(sealed).includes("sum"),
    "neither keys nor values appear in the sealed bytes",
  );
  const opened = opener.open("rankscope.run-1.ctl.X", undefined, sealed);
  assert.ok(opened.ok);
  assert.equal(text(opened.data), payload);
  assert.equal(opened.sender, sealer.sender.toString("hex"));
  // The same bytes again: a replay.
  const again = opener.open("rankscope.run-1.ctl.X", undefined, sealed);
  assert.deepEqual(again.ok ? "opened" : again.kind, "replayed");
  // Binary payloads (wire frames) too.
  const frame = Uint8Array.from([0x52, 0x53, 0x57, 0x46, 1, 2, 3]);
  const sealedFrame = sealer.seal("s", "inbox", frame);
  const openedFrame = opener.open("s", "inbox", sealedFrame);
  assert.ok(openedFrame.ok);
  assert.deepEqual([...openedFrame.data], [...frame]);
});

test("another secret, another run, altered bytes, another subject or another reply inbox: unauthenticated", () => {
  const sealer = new Sealer(key);
  const sealed = sealer.seal("rankscope.run-1.rank.A", "rankscope.run-1.ctl.X", '{"t":"shutdown","id":1}');
  const refused = (opener: Opener, subject: string, reply: string | undefined, data: Uint8Array): string => {
    const opened = opener.open(subject, reply, data);
    return opened.ok ? "opened" : opened.kind;
  };
  assert.equal(
    refused(
      new Opener(RunKey.derive("another-run-secret-of-32-characters!!", "run-1")),
      "rankscope.run-1.rank.A",
      "rankscope.run-1.ctl.X",
      sealed,
    ),
    "unauthenticated",
  );
  assert.equal(
    refused(new Opener(RunKey.derive(SECRET, "run-2")), "rankscope.run-1.rank.A", "rankscope.run-1.ctl.X", sealed),
    "unauthenticated",
  );
  assert.equal(
    refused(new Opener(key), "rankscope.run-1.rank.B", "rankscope.run-1.ctl.X", sealed),
    "unauthenticated",
    "moved to another rank's subject",
  );
  assert.equal(
    refused(new Opener(key), "rankscope.run-1.rank.A", "_INBOX.attacker", sealed),
    "unauthenticated",
    "given the attacker's reply inbox",
  );
  for (const at of [0, 5, 21, 30, 40, sealed.length - 1]) {
    const altered = Uint8Array.from(sealed);
    altered[at] = (altered[at] ?? 0) ^ 1;
    assert.equal(
      refused(new Opener(key), "rankscope.run-1.rank.A", "rankscope.run-1.ctl.X", altered),
      "unauthenticated",
      `byte ${at} altered`,
    );
  }
  assert.equal(
    refused(new Opener(key), "s", undefined, Buffer.from('{"t":"shutdown","id":1}')),
    "unauthenticated",
    "plain JSON",
  );
  assert.equal(refused(new Opener(key), "s", undefined, sealed.subarray(0, 40)), "unauthenticated", "cut short");
  // And the original still opens where it was meant to go.
  assert.equal(refused(new Opener(key), "rankscope.run-1.rank.A", "rankscope.run-1.ctl.X", sealed), "opened");
});

test("the window: out-of-order messages open once each, older than the window or the age bound are stale", () => {
  const sealer = new Sealer(key);
  const opener = new Opener(key);
  const now = Date.now();
  const messages = Array.from({ length: REPLAY_WINDOW + 10 }, (_v, i) => sealer.seal("s", undefined, `m${i}`, now));
  const kinds = (m: Uint8Array, at = now): string => {
    const opened = opener.open("s", undefined, m, at);
    return opened.ok ? "opened" : opened.kind;
  };
  assert.equal(kinds(messages[5] as Uint8Array), "opened");
  assert.equal(kinds(messages[2] as Uint8Array), "opened", "an earlier one, still in the window");
  assert.equal(kinds(messages[2] as Uint8Array), "replayed");
  assert.equal(kinds(messages[REPLAY_WINDOW + 9] as Uint8Array), "opened");
  assert.equal(kinds(messages[3] as Uint8Array), "stale", "more than a window behind the newest");
  assert.equal(kinds(messages[REPLAY_WINDOW + 5] as Uint8Array), "opened");
  assert.equal(kinds(messages[REPLAY_WINDOW + 5] as Uint8Array), "replayed");
  const old = sealer.seal("s", undefined, "old", now - MAX_SEAL_AGE_MS - 1000);
  assert.equal(kinds(old), "stale", "sealed longer ago than the age bound");
  const future = sealer.seal("s", undefined, "future", now + MAX_SEAL_AGE_MS + 1000);
  assert.equal(kinds(future), "stale", "sealed by a clock far ahead");
});

test("senders do not share sequence numbers: each has its own key and window", () => {
  const a = new Sealer(key);
  const b = new Sealer(key);
  const opener = new Opener(key);
  const fromA = a.seal("s", undefined, "x");
  const fromB = b.seal("s", undefined, "x");
  assert.notDeepEqual(
    [...fromA.subarray(36)],
    [...fromB.subarray(36)],
    "the same payload at the same number seals differently per sender",
  );
  assert.ok(opener.open("s", undefined, fromA).ok);
  assert.ok(opener.open("s", undefined, fromB).ok, "number 1 of another sender is not a replay");
});
