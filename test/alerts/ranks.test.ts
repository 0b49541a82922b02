/**
 * Alerts with real process ranks (spawnRanks) and a real local webhook receiver: each built-in
 * rule the controller judges fires exactly once per episode and resolves — `nonfinite` (a rank
 * records NaN), `rank_lost` (a rank stopped with SIGSTOP, then continued; and one killed with
 * SIGKILL, which never comes back: its episode ends with the run, `ended`), `stalled` (the loop
 * stops flushing) — and a rank's own
 * `alert()` reaches the controller with its next answer. The webhook, the store (the dashboard's
 * source) and the text log hold the same alerts. (`straggler` reads straggler attribution's chronic
 * ranks; it is fed directly in engine.test.ts and through the controller's alerts below.)
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { ControllerAlerts } from "../../src/alerts/controller-alerts.js";
import { alerts as storedAlerts } from "../../src/store/reader.js";
import { MetricLogger, spawnRanks } from "../fixtures/built/index.mjs";
import type { FlushResult } from "../../src/controller/logger-options.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";
import { WebhookReceiver } from "./receiver.js";

/** The job's logger and ranks run the built package (fixtures/built/): its ranks start without tsx. */
const RANK = fileURLToPath(new URL("./fixtures/alert-rank.mjs", import.meta.url));

let receiver: WebhookReceiver;
before(async () => {
  receiver = await WebhookReceiver.start();
});
after(async () => {
  await receiver.close();
});

/** Each alert id the webhook got, with its states in order. */
function episodes(bodies: readonly Record<string, unknown>[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const b of bodies) out.set(String(b["id"]), [...(out.get(String(b["id"])) ?? []), String(b["state"])]);
  return out;
}

test("nonfinite, rank_lost (SIGSTOP then SIGCONT; SIGKILL) and stalled fire once per episode and resolve, at the webhook, in the store and in the text log", async () => {
  const runDir = tempDir("rankscope-alerts-ranks-");
  const logger = new MetricLogger({
    processName: "Controller",
    runDir,
    flushDeadlineMs: 2000,
    alerts: {
      webhook: receiver.url,
      rules: ["nonfinite", "rank_lost", { rule: "stalled", minMs: 4000 }],
      minIntervalMs: 0,
    },
  });
  const results: FlushResult[] = [];
  let step = 0;
  let names: string[] = [];
  const flush = async (): Promise<FlushResult> => {
    const result = await logger.flush(step++);
    results.push(result);
    return result;
  };
  await collectDiagnostics(async () => {
    await logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } });
    const group = await spawnRanks({ module: RANK, ranksPerReplica: 3, processName: "Trainer", logger });
    names = group.rankNames;
    const [r0, r1, r2] = names as [string, string, string];
    const everyRank = (value: number | null): Promise<unknown> => group.fanout("recordLoss", value);

    // A healthy start, then one rank records NaN (the mean is NaN), then finite again.
    for (let i = 0; i < 4; i++) {
      await everyRank(1 / (i + 1));
      assert.equal((await flush()).alerts, undefined);
    }
    await Promise.all([
      group.call(r0, "recordLoss", null),
      group.call(r1, "recordLoss", 0.2),
      group.call(r2, "recordLoss", 0.2),
    ]);
    assert.deepEqual(
      (await flush()).alerts?.map((a) => [a.rule, a.state, a.key]),
      [["nonfinite", "firing", "loss"]],
    );
    await everyRank(0.2);
    assert.deepEqual(
      (await flush()).alerts?.map((a) => [a.rule, a.state]),
      [["nonfinite", "resolved"]],
    );

    // r1 stops (SIGSTOP): missing at the next flushes, one alert; continued, it answers again: resolved.
    const pid1 = group.pid(r1) as number;
    process.kill(pid1, "SIGSTOP");
    try {
      const stopped = await flush();
      assert.deepEqual(stopped.missingRanks, [r1]);
      assert.deepEqual(
        stopped.alerts?.map((a) => [a.rule, a.state, a.rankName, a.rank, typeof a.host]),
        [["rank_lost", "firing", r1, 1, "string"]],
      );
      assert.equal((await flush()).alerts, undefined, "still missing: the same episode");
    } finally {
      process.kill(pid1, "SIGCONT");
    }
    await waitFor(async () => (await flush()).alerts?.some((a) => a.rule === "rank_lost" && a.state === "resolved"), {
      timeoutMs: 30_000,
      what: `${r1} to answer a flush again`,
    });

    // r2's own alert() reaches the controller with its next answer.
    await group.call(r2, "raiseAlert", "checkpoint", "saved at step 10", "info");
    const carried = await flush();
    assert.deepEqual(carried.alerts, undefined, "user alerts are delivered as they arrive, not as a rule's events");
    await waitFor(() => receiver.bodies().some((b) => b["rule"] === "user"), {
      timeoutMs: 10_000,
      what: "the rank's alert at the webhook",
    });

    // r0 is killed: lost for good, one alert however many flushes follow.
    process.kill(group.pid(r0) as number, "SIGKILL");
    await waitFor(() => !logger.rankNames.includes(r0), { timeoutMs: 10_000, what: `${r0} to be deregistered` });
    const lost = await flush();
    assert.deepEqual(
      lost.alerts?.map((a) => [a.rule, a.state, a.rankName]),
      [["rank_lost", "firing", r0]],
    );
    assert.match(lost.alerts?.[0]?.message ?? "", /was lost \(exited \(killed by SIGKILL\)\) at step \d+/);
    for (let i = 0; i < 3; i++) assert.equal((await flush()).alerts, undefined);

    // The loop stops flushing: the watchdog fires once; the next flush resolves it.
    await waitFor(() => receiver.bodies().some((b) => b["rule"] === "stalled"), {
      timeoutMs: 30_000,
      what: "the stalled alert",
    });
    assert.deepEqual(
      (await flush()).alerts?.map((a) => [a.rule, a.state]),
      [["stalled", "resolved"]],
    );
    await logger.shutdown();
  });

  const [r0, r1, r2] = names;
  await waitFor(() => receiver.bodies().length >= 9, { timeoutMs: 10_000, what: "every alert at the webhook" });
  const got = episodes(receiver.bodies());
  const byRule = (rule: string, rankName?: string): string[][] =>
    [...got.entries()].filter(([id]) => id.startsWith(`${rule}:${rankName ?? ""}`)).map(([, states]) => states);
  assert.deepEqual(byRule("nonfinite"), [["firing", "resolved"]]);
  assert.deepEqual(byRule("rank_lost", r1), [["firing", "resolved"]]);
  assert.deepEqual(
    byRule("rank_lost", r0),
    [["firing", "ended"]],
    "a killed rank never comes back: its alert ends with the run (shutdown), never left firing",
  );
  assert.deepEqual(byRule("rank_lost", r2), [], "no alert about a healthy rank");
  assert.deepEqual(byRule("stalled"), [["firing", "resolved"]]);
  const user = receiver.bodies().filter((b) => b["rule"] === "user");
  assert.deepEqual(
    user.map((b) => [b["title"], b["message"], b["level"], b["rankName"], b["state"]]),
    [["checkpoint", "checkpoint: saved at step 10", "info", r2, "firing"]],
  );
  assert.equal(got.size, 5, `nothing else was sent: ${[...got.keys()].join(", ")}`);

  // The store holds the same events, in order (the dashboard's banner and Alerts tab read them).
  const stored = storedAlerts(runDir);
  assert.deepEqual(
    stored.map((a) => `${a.id} ${a.state}`),
    receiver.bodies().map((b) => `${String(b["id"])} ${String(b["state"])}`),
  );
  // And the text log: one line per event in logs/main.log.
  const log = readFileSync(join(runDir, "logs", "main.log"), "utf8");
  for (const a of stored)
    assert.ok(
      log.includes(`${a.state === "firing" ? "FIRING" : a.state} ${a.id}: `),
      `main.log has ${a.id} ${a.state}`,
    );
  assert.equal(logger.alertStats().webhook?.delivered, stored.length);
});

test("straggler: the chronic ranks straggler attribution reports at a flush fire once and resolve, at the webhook with rank, name and host", async () => {
  receiver.received.length = 0;
  const alerts = ControllerAlerts.create(
    { webhook: receiver.url, rules: ["straggler"] },
    { experiment: "exp", trial: "t" },
  );
  const slow = { rankName: "Trainer_ab_r6", rank: 6, host: "node-7" };
  const chronic = [false, true, true, true, false];
  chronic.forEach((isChronic, step) =>
    alerts.observeFlush({ step, at: Date.now(), metrics: [], stragglers: [{ ...slow, chronic: isChronic }] }),
  );
  await waitFor(() => receiver.received.length === 2, {
    timeoutMs: 10_000,
    what: "two straggler alerts at the webhook",
  });
  await alerts.close(1000);
  assert.deepEqual(
    receiver.bodies().map((b) => [b["rule"], b["state"], b["step"], b["rank"], b["rankName"], b["host"], b["level"]]),
    [
      ["straggler", "firing", 1, 6, "Trainer_ab_r6", "node-7", "warning"],
      ["straggler", "resolved", 4, 6, "Trainer_ab_r6", "node-7", "warning"],
    ],
  );
});
