/**
 * The inference alerts of issue 40 item 5, through a real logger and the request API: "p99 TTFT
 * over X for N flushes" (`threshold` with `flushes`) and "error rate over Y" (`ratio`: a model's
 * errors of every type over its requests) each fire once, at the flush their condition has lasted
 * long enough, for the model it holds for and no other, and resolve when it ends — in the flush's
 * result and in the run's store (the dashboard's Alerts).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { MetricLoggerOptions } from "../../src/controller/logger-options.js";
import type { AlertEvent } from "../../src/core/alert.js";
import { attributedKey, withSuffix } from "../../src/core/attributes.js";
import { startRequest } from "../../src/inference/requests.js";
import { alerts as storedAlerts, closeStores } from "../../src/store/reader.js";
import { tempDir } from "../helpers.js";
import { runLogger } from "../inference/support.js";

/** A key of `model`'s, with an output suffix. */
function keyOf(name: string, model: string, suffix: string): string {
  return withSuffix(
    attributedKey(name, {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "sim",
      "gen_ai.request.model": model,
    }),
    suffix,
  );
}

/** Four requests of `model`: `failures` of them fail (timeout); the others' first token comes after `prefillMs`. */
async function serve(model: string, prefillMs: number, failures: number): Promise<void> {
  await Promise.all(
    Array.from({ length: 4 }, async (_, i) => {
      const request = startRequest({ model, provider: "sim" });
      if (prefillMs > 0) await sleep(prefillMs);
      if (i < failures) return request.fail("timeout");
      request.firstToken();
      request.token(3);
      request.end({ inputTokens: 10 });
    }),
  );
}

/** The rules: "p99 TTFT over X for N flushes" and "error rate over Y" (for N flushes). */
const ALERTS: MetricLoggerOptions["alerts"] = {
  minIntervalMs: 0,
  rules: [
    { rule: "threshold", name: "ttft_p99", key: "gen_ai.server.time_to_first_token/p99*", above: 0.2, flushes: 2 },
    {
      rule: "ratio",
      name: "error_rate",
      numerator: "inference/errors/total*",
      denominator: "inference/requests/total*",
      above: 0.2,
      flushes: 2,
    },
  ],
};

test("p99 TTFT over 0.2 s for 2 flushes and an error rate over 20 % for 2 flushes fire and resolve per model", async () => {
  const { logger, runDir } = await runLogger(
    tempDir("rankscope-inference-alerts-"),
    "serve",
    "alerts",
    "Controller",
    { store: { loggingMode: "global_reduce", waitForWrites: true } },
    { alerts: ALERTS },
  );
  // Per flush, the slow model's prefill (ms) and failures out of 4; the fast model is always fast and never fails.
  const plan: ReadonlyArray<readonly [prefillMs: number, failures: number]> = [
    [0, 0], // 0
    [300, 1], // 1: TTFT over, 25 % errors
    [0, 1], // 2: TTFT back under (the count starts again), 25 % errors again: the error rate fires
    [300, 0], // 3: TTFT over, no errors: the error rate resolves
    [300, 0], // 4: TTFT over a second flush in a row: fires
    [0, 0], // 5: resolves
  ];
  const events: string[] = [];
  let firing: AlertEvent | undefined;
  for (const [step, [prefillMs, failures]] of plan.entries()) {
    await Promise.all([serve("slow-model", prefillMs, failures), serve("fast-model", 0, 0)]);
    const result = await logger.flush(step);
    for (const alert of result.alerts ?? []) {
      events.push(`${step}: ${alert.state} ${alert.rule} ${alert.key ?? ""}`);
      if (alert.rule === "ttft_p99" && alert.state === "firing") firing = alert;
    }
  }
  await logger.shutdown();
  const ttft = keyOf("gen_ai.server.time_to_first_token", "slow-model", "p99");
  const requests = keyOf("inference/requests", "slow-model", "total");
  assert.deepEqual(events, [
    `2: firing error_rate ${requests}`,
    `3: resolved error_rate ${requests}`,
    `4: firing ttft_p99 ${ttft}`,
    `5: resolved ttft_p99 ${ttft}`,
  ]);
  assert.ok((firing?.value ?? 0) > 0.2, `the p99 TTFT of requests whose first token came after 300 ms`);
  assert.match(firing?.message ?? "", /above 0\.2 for 2 flushes$/);
  assert.deepEqual(
    storedAlerts(runDir).map((a) => `${a.step}: ${a.state} ${a.rule} ${a.key ?? ""}`),
    events,
    "the store (the dashboard's Alerts) holds the same events",
  );
  assert.equal(
    storedAlerts(runDir)[0]?.message,
    `inference/errors/total* / ${requests} = 0.25 at step 2, above 0.2 for 2 flushes`,
  );
  closeStores();
});
