/**
 * The webhook against a real local HTTP receiver: the JSON each alert is POSTed as (and Slack's
 * `text`), retries through the one retry helper, a refusal counted and named, a bounded queue —
 * and a webhook that never answers: every flush returns while its requests hang (no flush waits
 * for it), and what it never took is counted (`alertStats()`, `rankscope/alerts_undelivered`) and
 * named in a warning.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { AlertEvent } from "../../src/core/alert.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import type { FlushResult } from "../../src/controller/logger-options.js";
import { recordMetric } from "../../src/core/collector.js";
import { ALERTS_UNDELIVERED_KEY } from "../../src/core/internal-keys.js";
import { WebhookSender } from "../../src/alerts/webhook.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";
import { WebhookReceiver } from "./receiver.js";

function event(i: number, extra: Partial<AlertEvent> = {}): AlertEvent {
  return {
    id: `nonfinite:loss#${i}`,
    rule: "nonfinite",
    level: "error",
    run: "exp/t1",
    step: i,
    key: "loss",
    value: NaN,
    message: `loss became NaN at step ${i}`,
    state: "firing",
    at: 1_700_000_000_000 + i,
    ...extra,
  };
}

describe("webhook", () => {
  let receiver: WebhookReceiver;
  before(async () => {
    receiver = await WebhookReceiver.start();
  });
  after(async () => {
    await receiver.close();
  });

  it('POSTs each alert as JSON: the issue\'s fields, NaN as "NaN"; the Slack format adds text', async () => {
    receiver.received.length = 0;
    const json = new WebhookSender({ url: receiver.url, format: "json", deadlineMs: 5000, retryMs: 0, capacity: 10 });
    json.push(event(1));
    const slack = new WebhookSender({ url: receiver.url, format: "slack", deadlineMs: 5000, retryMs: 0, capacity: 10 });
    slack.push(
      event(2, { rank: 3, rankName: "Trainer_a_r3", host: "node-a", level: "warning", state: "resolved", value: 0.5 }),
    );
    await waitFor(() => json.stats.delivered + slack.stats.delivered === 2, {
      timeoutMs: 10_000,
      what: "two alerts delivered",
    });
    const [a, b] = [...receiver.received].sort((x, y) => String(x.body["id"]).localeCompare(String(y.body["id"])));
    assert.equal(a?.contentType, "application/json");
    assert.deepEqual(a?.body, {
      id: "nonfinite:loss#1",
      rule: "nonfinite",
      level: "error",
      run: "exp/t1",
      step: 1,
      key: "loss",
      value: "NaN",
      message: "loss became NaN at step 1",
      state: "firing",
      at: 1_700_000_000_001,
    });
    assert.deepEqual(b?.body, {
      id: "nonfinite:loss#2",
      rule: "nonfinite",
      level: "warning",
      run: "exp/t1",
      step: 2,
      key: "loss",
      rank: 3,
      rankName: "Trainer_a_r3",
      host: "node-a",
      value: 0.5,
      message: "loss became NaN at step 2",
      state: "resolved",
      at: 1_700_000_000_002,
      text: "⚠️ [exp/t1] resolved nonfinite: loss became NaN at step 2",
    });
    await json.close(1000);
    await slack.close(1000);
  });

  it("retries a 5xx (the one retry helper) and delivers; a 4xx is refused, counted and named", async () => {
    receiver.received.length = 0;
    receiver.answers.push(503, 200, 400);
    const sender = new WebhookSender({
      url: receiver.url,
      format: "json",
      deadlineMs: 5000,
      retryMs: 20_000,
      capacity: 10,
    });
    const seen = await collectDiagnostics(async () => {
      sender.push(event(1));
      sender.push(event(2));
      await waitFor(() => sender.stats.delivered + sender.stats.undelivered === 2, {
        timeoutMs: 20_000,
        what: "both alerts settled",
      });
    });
    assert.deepEqual({ ...sender.stats }, { delivered: 1, undelivered: 1, dropped: 0, queued: 0, retries: 1 });
    assert.deepEqual(
      receiver.bodies().map((b) => b["id"]),
      ["nonfinite:loss#1", "nonfinite:loss#1", "nonfinite:loss#2"],
    );
    const warning = seen.find((d) => d.code === "alerts.undelivered:refused");
    assert.match(
      warning?.message ?? "",
      /^alert nonfinite:loss#2 \(nonfinite, firing\) was not delivered to the webhook: the webhook answered HTTP 400; 1 undelivered so far/,
    );
    assert.ok(!(warning?.message ?? "").includes(receiver.url), "the URL is never printed");
    await sender.close(1000);
  });

  it("a full queue drops the oldest waiting alert, counted; what is left at close is counted too", async () => {
    receiver.received.length = 0;
    receiver.fallback = "hang";
    const sender = new WebhookSender({
      url: receiver.url,
      format: "json",
      deadlineMs: 60_000,
      retryMs: 0,
      capacity: 3,
    });
    const seen = await collectDiagnostics(async () => {
      for (let i = 1; i <= 10; i++) sender.push(event(i));
      await waitFor(() => receiver.hanging === 1, {
        timeoutMs: 10_000,
        what: "the first alert's request held by the receiver",
      });
      // One in flight (held), three waiting, six dropped.
      assert.deepEqual({ ...sender.stats }, { delivered: 0, undelivered: 6, dropped: 6, queued: 4, retries: 0 });
      await sender.close(100);
    });
    assert.deepEqual({ ...sender.stats }, { delivered: 0, undelivered: 10, dropped: 6, queued: 0, retries: 0 });
    assert.ok(
      seen.some((d) => d.code === "alerts.undelivered:queueFull" && /alert nonfinite:loss#2 /.test(d.message)),
      "the oldest waiting one (#2; #1 was in flight) is named",
    );
    assert.ok(seen.some((d) => d.code === "alerts.undelivered:shutdown"));
    receiver.fallback = 200;
  });

  it("a webhook that never answers: every flush returns while its request hangs, and the alerts it never took are counted", async () => {
    receiver.received.length = 0;
    receiver.fallback = "hang";
    const logger = new MetricLogger({
      processName: "Controller",
      runDir: tempDir(),
      alerts: {
        webhook: receiver.url,
        webhookDeadlineMs: 600_000,
        webhookRetryMs: 0,
        rules: ["nonfinite"],
        minIntervalMs: 0,
      },
    });
    await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
    const results: FlushResult[] = [];
    const seen = await collectDiagnostics(async () => {
      for (let step = 0; step < 20; step++) {
        recordMetric("loss", step % 4 === 2 ? NaN : 1 / (step + 1), "mean");
        results.push(await logger.flush(step));
      }
      // Every flush returned; the webhook still holds the first alert's request unanswered (its
      // deadline is ten minutes), so none of those flushes waited for it.
      assert.equal(results.length, 20);
      assert.equal(receiver.hanging, 1);
      const raised = results.reduce((n, r) => n + (r.alerts?.length ?? 0), 0);
      assert.equal(raised, 10, "five NaN episodes: five firings and five resolves");
      assert.deepEqual(
        { ...logger.alertStats().webhook },
        { delivered: 0, undelivered: 0, dropped: 0, queued: 10, retries: 0 },
      );
      await logger.shutdown({ deadlineMs: 500 });
    });
    assert.deepEqual(
      { ...logger.alertStats().webhook },
      { delivered: 0, undelivered: 10, dropped: 0, queued: 0, retries: 0 },
    );
    const named = seen.filter((d) => d.code.startsWith("alerts.undelivered:")).map((d) => d.message);
    assert.equal(named.length, 10, "each undelivered alert is named (printed once per kind, counted each time)");
    assert.match(named[0] ?? "", /^alert nonfinite:loss#1 \(nonfinite, firing\) was not delivered to the webhook/);
    receiver.fallback = 200;
  });

  it("rankscope/alerts_undelivered: the alerts the webhook missed since the last flush, from the first it missed", async () => {
    receiver.received.length = 0;
    receiver.fallback = "hang";
    const logger = new MetricLogger({
      processName: "Controller",
      runDir: tempDir(),
      alerts: {
        webhook: receiver.url,
        webhookDeadlineMs: 200,
        webhookRetryMs: 0,
        rules: ["nonfinite"],
        minIntervalMs: 0,
      },
    });
    await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
    const undelivered = (r: { metrics: readonly { key: string; value: number }[] }): number | undefined =>
      r.metrics.find((m) => m.key === ALERTS_UNDELIVERED_KEY)?.value;
    await collectDiagnostics(async () => {
      recordMetric("loss", 1, "mean");
      assert.equal(undelivered(await logger.flush(0)), undefined, "not logged while nothing was missed");
      recordMetric("loss", NaN, "mean");
      const fired = await logger.flush(1);
      assert.equal(fired.alerts?.length, 1);
      await waitFor(() => logger.alertStats().webhook?.undelivered === 1, {
        timeoutMs: 10_000,
        what: "the hanging request's deadline",
      });
      recordMetric("loss", NaN, "mean");
      assert.equal(undelivered(await logger.flush(2)), 1);
      recordMetric("loss", NaN, "mean");
      assert.equal(undelivered(await logger.flush(3)), 0, "per flush, then 0 while nothing more is missed");
      await logger.shutdown({ deadlineMs: 500 });
    });
    receiver.fallback = 200;
  });
});
