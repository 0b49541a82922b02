/**
 * `alert(title, text, level)`: bad input is a TypeError saying what is valid; on the controller
 * it is delivered at once (text log, store, webhook); elsewhere it waits in the process (bounded)
 * and rides with the process's next flush answer — from a rank it reaches the controller and is
 * recorded like the controller's own (ranks.test.ts does it with real processes); and a forged
 * answer cannot smuggle more, or longer, alerts than a rank sends: too many refuse the answer, a bad
 * one is left out; each is counted (rankscope/rejected/*) and never quoted or delivered.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { alert, hasQueuedAlerts, takeQueuedAlerts } from "../../src/alerts/user-alert.js";
import { MAX_QUEUED_ALERTS } from "../../src/core/alert.js";
import { alerts as storedAlerts, closeStores } from "../../src/store/reader.js";
import { Collector } from "../../src/core/collector.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { LocalRankHandle, RankRuntime } from "../../src/pipeline/runtime.js";
import {
  decodeProtocolMessage,
  encodeProtocolMessage,
  ignoredMessageCounts,
} from "../../src/transport/protocol/messages.js";
import { captureStderr, captureStdout, collectDiagnostics, tempDir } from "../helpers.js";

describe("alert()", () => {
  it("bad input is a TypeError saying what is valid", () => {
    assert.throws(() => alert(""), /alert\(title, text, level\): title must be a non-empty string, got ""/);
    assert.throws(() => alert(42 as never), /title must be a non-empty string, got 42/);
    assert.throws(() => alert("t", 7 as never), /text must be a string, got 7/);
    assert.throws(
      () => alert("t", "x", "critical" as never),
      /level must be one of info, warning, error, got "critical"/,
    );
  });

  it("without a logger in this process it waits for the next flush answer, at most 100, the oldest dropped and counted; long text is cut", async () => {
    takeQueuedAlerts();
    const seen = await collectDiagnostics(() => {
      for (let i = 0; i < MAX_QUEUED_ALERTS + 5; i++)
        alert(`t${i}`, "x".repeat(i === MAX_QUEUED_ALERTS + 4 ? 5000 : 1), "warning");
    });
    assert.ok(hasQueuedAlerts());
    const queued = takeQueuedAlerts();
    assert.equal(queued.length, MAX_QUEUED_ALERTS);
    assert.equal(queued[0]?.title, "t5");
    assert.equal(queued.at(-1)?.text.length, 4000);
    assert.ok(queued.at(-1)?.text.endsWith("…"));
    assert.equal(seen.filter((d) => d.code === "alerts.userQueueFull").length, 5);
    assert.ok(!hasQueuedAlerts());
  });

  it("on the controller: delivered at once, alerts waiting from before the logger first; recorded in the store at the next write", async () => {
    takeQueuedAlerts();
    alert("before the logger", "queued", "info");
    const runDir = tempDir();
    let out = "";
    const err = await captureStderr(async () => {
      out = await captureStdout(async () => {
        const logger = new MetricLogger({ processName: "Controller", runDir });
        assert.equal(logger.alertStats().user, 1, "the waiting alert was taken by the new logger");
        await logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } });
        alert("disk", "92% full", "warning");
        assert.equal(logger.alertStats().user, 2);
        await logger.flush(0);
        await logger.shutdown();
      });
    });
    assert.match(out, /rankscope\.alerts INFO: alert FIRING user#1: before the logger: queued rule=user/);
    // A warning goes to stderr, as Node's console.warn (docs/logging.md).
    assert.match(err, /rankscope\.alerts WARNING: alert FIRING user#2: disk: 92% full rule=user/);
    assert.deepEqual(
      storedAlerts(runDir).map((a) => [a.id, a.title, a.message, a.level, a.step]),
      [
        ["user#1", "before the logger", "before the logger: queued", "info", null],
        ["user#2", "disk", "disk: 92% full", "warning", null],
      ],
    );
    closeStores();
  });

  it("in a rank's process (no logger there) it rides with the rank's next answer, named by the rank", async () => {
    takeQueuedAlerts();
    const runtime = new RankRuntime({
      rank: 2,
      rankName: "Worker_x_r2",
      processName: "Worker",
      localRank: 2,
      localWorldSize: 4,
    });
    alert("oom soon", "rss 95%", "error");
    const snapshot = await new LocalRankHandle(runtime).flush(0);
    assert.deepEqual(
      snapshot.alerts?.map((a) => [a.title, a.text, a.level, a.rankName]),
      [["oom soon", "rss 95%", "error", "Worker_x_r2"]],
    );
    assert.equal((await new LocalRankHandle(runtime).flush(1)).alerts, undefined, "taken once");
    const other = new RankRuntime(
      { rank: 3, rankName: "Worker_x_r3", processName: "Worker", localRank: 3, localWorldSize: 4 },
      new Collector(),
    );
    alert("not this one's", "", "info");
    assert.equal(
      (await new LocalRankHandle(other).flush(0)).alerts,
      undefined,
      "only the process's own collector's runtime carries them",
    );
    takeQueuedAlerts();
  });
});

describe("a forged answer", () => {
  const reply = (alerts: unknown): string =>
    encodeProtocolMessage("run-1", {
      t: "reply",
      id: 1,
      rankName: "r",
      ok: true,
      snapshot: { rankName: "r", step: 0, droppedKeyRecords: 0, states: [], alerts: alerts as never },
    });

  it("with more alerts than a rank keeps, or alerts that are not a list, is refused whole and counted", async () => {
    const ok = { title: "t", text: "x", level: "info", at: 1 };
    const before = ignoredMessageCounts().malformed;
    const seen = await collectDiagnostics(() => {
      for (const alerts of [Array.from({ length: 101 }, () => ok), "not a list", { 0: ok }])
        assert.equal(decodeProtocolMessage("run-1", reply(alerts), "test"), undefined);
    });
    assert.equal(ignoredMessageCounts().malformed - before, 3);
    assert.ok(seen.some((d) => /alerts must be a list of at most 100 alert\(\) calls/.test(d.message)));
    assert.ok(
      decodeProtocolMessage("run-1", reply(Array.from({ length: 100 }, () => ok)), "test") !== undefined,
      "a hundred, as a rank sends at most, pass",
    );
  });

  it("an alert that is not one is left out and counted (never delivered, never quoted); the answer's other alerts are used; the controller logs the count", async () => {
    const ok = { title: "fine", text: "x", level: "info", at: 1, rankName: "r" };
    const secret = "SMUGGLED-7f3a";
    const bad = [
      { ...ok, title: secret.repeat(20) }, // a title over 200 characters
      { ...ok, text: `${secret} ${"x".repeat(4001)}` },
      { ...ok, level: "fatal", text: secret },
      { ...ok, at: "now", text: secret },
      { ...ok, title: "", text: secret },
      { ...ok, extra: secret },
      { ...ok, rankName: "../../etc", text: secret },
    ];
    const before = { ...ignoredMessageCounts() };
    const runDir = tempDir();
    const logger = new MetricLogger({ processName: "Controller", runDir, alerts: { rules: [] } });
    await logger.initBackends({});
    await logger.flush(0); // logs what earlier tests left counted: this test's counts start here
    const seen = await collectDiagnostics(async () => {
      const message = decodeProtocolMessage("run-1", reply([ok, ...bad, { ...ok, title: "also fine" }]), "test");
      assert.ok(message !== undefined && message.t === "reply" && message.ok, "the answer itself is used");
      const snapshot = message.snapshot;
      assert.deepEqual(
        snapshot?.alerts?.map((a) => a.title),
        ["fine", "also fine"],
      );
      const flushed = await logger.flush(1);
      const counted = (kind: string): number | undefined =>
        flushed.metrics.find((m) => m.key === `rankscope/rejected/${kind}`)?.value;
      assert.equal(counted("malformed"), 6, "six malformed alerts, in the controller's next flush");
      assert.equal(counted("invalidName"), 1, "one with a rank name that is not a name");
    });
    assert.equal(ignoredMessageCounts().malformed - before.malformed, 6);
    assert.equal(ignoredMessageCounts().invalidName - before.invalidName, 1);
    assert.ok(
      seen.some((d) =>
        /an alert\(\) call in test's answer is left out: its level must be one of info, warning, error/.test(d.message),
      ),
    );
    assert.ok(
      seen.every((d) => !d.message.includes(secret)),
      "no refused alert's title or text is quoted",
    );
    assert.equal(logger.alertStats().user, 0, "none of them was delivered");
    await logger.shutdown();
  });
});
