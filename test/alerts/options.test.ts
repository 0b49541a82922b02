/**
 * The `alerts` option: `nonfinite` and `rank_lost` on by default, the four built-in rules when
 * given or a webhook is set, `false` (or `RANKSCOPE_ALERTS=0`) off even with the webhook variable, every value checked with an error saying what is valid,
 * and the webhook URL never shown (it is a secret).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { resolveAlertOptions } from "../../src/alerts/options.js";
import { BUILTIN_RULES } from "../../src/alerts/rule-config.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { tempDir } from "../helpers.js";

const HOOK = "https://hooks.example.com/services/T000/B000/SECRETTOKEN";

describe("when alerts are on", () => {
  it("no option and no RANKSCOPE_ALERT_WEBHOOK: nonfinite and rank_lost are on (a NaN loss or a lost rank is never silent)", () => {
    const resolved = resolveAlertOptions(undefined, {});
    assert.deepEqual(
      resolved.rules.map((r) => [r.kind, r.level]),
      [
        ["nonfinite", "error"],
        ["rank_lost", "error"],
      ],
    );
    assert.equal(resolved.webhook, undefined);
  });

  it("RANKSCOPE_ALERTS=0 turns the default rules off (and the webhook's); an alerts option given in code wins", () => {
    for (const value of ["0", "false", "off", "NO"]) {
      const off = resolveAlertOptions(undefined, { RANKSCOPE_ALERTS: value, RANKSCOPE_ALERT_WEBHOOK: HOOK });
      assert.deepEqual([off.rules, off.webhook], [[], undefined], value);
    }
    assert.equal(resolveAlertOptions({}, { RANKSCOPE_ALERTS: "0" }).rules.length, 4);
    assert.throws(
      () => resolveAlertOptions(undefined, { RANKSCOPE_ALERTS: "maybe" }),
      /RANKSCOPE_ALERTS="maybe" is not valid \(it sets getOrCreateMetricLogger's alerts\); valid: true\/1\/yes\/on or false\/0\/no\/off/,
    );
  });

  it("a webhook in the environment and no rules: the built-in rules are on", () => {
    const resolved = resolveAlertOptions(undefined, { RANKSCOPE_ALERT_WEBHOOK: HOOK });
    assert.equal(resolved.webhook, HOOK);
    assert.deepEqual(
      resolved.rules.map((r) => [r.kind, r.name, r.level]),
      BUILTIN_RULES.map((name) => [name, name, name === "straggler" ? "warning" : "error"]),
    );
  });

  it("the option given without rules: the built-in rules; with rules: exactly those", () => {
    assert.equal(resolveAlertOptions({}, {}).rules.length, 4);
    const only = resolveAlertOptions(
      { rules: [{ rule: "threshold", key: "loss", above: 3 }] },
      { RANKSCOPE_ALERT_WEBHOOK: HOOK },
    );
    assert.deepEqual(only.rules, [{ kind: "threshold", name: "threshold", level: "warning", key: "loss", above: 3 }]);
  });

  it("false turns alerts off, even with the webhook variable set", () => {
    const off = resolveAlertOptions(false, { RANKSCOPE_ALERT_WEBHOOK: HOOK });
    assert.deepEqual([off.rules, off.webhook], [[], undefined]);
  });

  it("defaults of every rule's numbers", () => {
    const rules = resolveAlertOptions(
      {
        rules: [
          { rule: "stalled" },
          { rule: "spike", key: "loss" },
          { rule: "rate_drop", key: "tps" },
          { rule: "nonfinite" },
          {
            rule: "ratio",
            numerator: "inference/errors/total*",
            denominator: "inference/requests/total*",
            above: 0.05,
          },
        ],
      },
      {},
    ).rules;
    assert.deepEqual(rules, [
      { kind: "stalled", name: "stalled", level: "error", factor: 10, minMs: 1000 },
      { kind: "spike", name: "spike", level: "warning", key: "loss", k: 6, window: 50, minPoints: 10 },
      { kind: "rate_drop", name: "rate_drop", level: "warning", key: "tps", fraction: 0.5, window: 20, minPoints: 5 },
      { kind: "nonfinite", name: "nonfinite", level: "error", key: "*" },
      {
        kind: "ratio",
        name: "ratio",
        level: "warning",
        numerator: "inference/errors/total*",
        denominator: "inference/requests/total*",
        above: 0.05,
      },
    ]);
  });
});

describe("bad input is an error saying what is valid", () => {
  const cases: [string, unknown, RegExp][] = [
    ["an unknown option", { webhok: HOOK }, /alerts: unknown option "webhok"; valid: webhook, webhookFormat, /],
    [
      "a webhook that is not a URL",
      { webhook: "hooks.example.com" },
      /alerts: webhook must be an http:\/\/ or https:\/\/ URL, got another value \(not shown: it is a secret\)/,
    ],
    [
      "an unknown rule",
      { rules: ["nan"] },
      /alerts\.rules\[0\]: rule must be one of nonfinite, rank_lost, stalled, straggler, threshold, spike, rate_drop, ratio, got "nan"/,
    ],
    [
      "a threshold without a bound",
      { rules: [{ rule: "threshold", key: "loss" }] },
      /alerts\.rules\[0\] \(threshold\): give above, below or both/,
    ],
    [
      "a threshold without a key",
      { rules: [{ rule: "threshold", above: 1 }] },
      /alerts\.rules\[0\] \(threshold\): key must be a metric key or a pattern with \*/,
    ],
    [
      "a field of another rule",
      { rules: [{ rule: "spike", key: "x", above: 3 }] },
      /alerts\.rules\[0\] \(spike\): unknown option "above"; valid: rule, name, level, key, k, window, minPoints/,
    ],
    [
      "a ratio without its denominator",
      { rules: [{ rule: "ratio", numerator: "errors", above: 0.1 }] },
      /alerts\.rules\[0\] \(ratio\): denominator must be a metric key or a pattern with \*/,
    ],
    [
      "a ratio with a key",
      { rules: [{ rule: "ratio", key: "errors", numerator: "errors", denominator: "requests", above: 0.1 }] },
      /alerts\.rules\[0\] \(ratio\): unknown option "key"; valid: rule, name, level, numerator, denominator, above, below, flushes/,
    ],
    [
      "a bad level",
      { rules: [{ rule: "nonfinite", level: "critical" }] },
      /alerts\.rules\[0\] \(nonfinite\): level must be one of info, warning, error, got "critical"/,
    ],
    [
      "a bad number",
      { rules: [{ rule: "spike", key: "x", window: 2.5 }] },
      /alerts\.rules\[0\] \(spike\): window must be an integer from 3 to 10000, got 2\.5/,
    ],
    [
      "a threshold lasting 0 flushes",
      { rules: [{ rule: "threshold", key: "x", above: 1, flushes: 0 }] },
      /alerts\.rules\[0\] \(threshold\): flushes must be an integer from 1 to 10000, got 0/,
    ],
    ["k of 0", { rules: [{ rule: "spike", key: "x", k: 0 }] }, /k must be a number above 0 up to 1000000, got 0/],
    [
      "two rules with one name for one key",
      {
        rules: [
          { rule: "threshold", key: "loss", above: 1 },
          { rule: "threshold", key: "loss", below: 0 },
        ],
      },
      /two rules are named "threshold" for key "loss"; give one a name of its own/,
    ],
    ["rules that are not a list", { rules: "nonfinite" }, /alerts\.rules must be a list of rules/],
    [
      "a rate limit out of range",
      { maxPerMinute: 0 },
      /alerts: maxPerMinute must be an integer from 1 to 100000, got 0/,
    ],
  ];
  for (const [what, options, message] of cases) {
    it(what, () =>
      assert.throws(
        () => resolveAlertOptions(options as never, {}),
        (error: unknown) => error instanceof TypeError && message.test(error.message),
      ),
    );
  }

  it("a bad webhook in the environment names the variable, never its value", () => {
    assert.throws(
      () => resolveAlertOptions(undefined, { RANKSCOPE_ALERT_WEBHOOK: "ftp://secret-token@x" }),
      (error: unknown) =>
        error instanceof TypeError &&
        /RANKSCOPE_ALERT_WEBHOOK is not valid \(its value is not shown: it is a secret\)/.test(error.message) &&
        !error.message.includes("secret-token"),
    );
  });

  it("the logger rejects a bad alerts option before it starts, and a second getOrCreateMetricLogger compares alerts by value", async () => {
    assert.throws(
      () => new MetricLogger({ runDir: tempDir(), alerts: { rules: [{ rule: "threshold", key: "x" }] } }),
      /give above, below or both/,
    );
    const { getOrCreateMetricLogger } = await import("../../src/controller/metric-logger.js");
    const logger = await getOrCreateMetricLogger({ runDir: tempDir(), alerts: { rules: ["nonfinite"] } });
    try {
      assert.equal(await getOrCreateMetricLogger({ alerts: { rules: ["nonfinite"] } }), logger);
      await assert.rejects(
        getOrCreateMetricLogger({ alerts: { rules: ["stalled"] } }),
        /these options differ from it: alerts: \{"rules":\["stalled"\]\}/,
      );
    } finally {
      await logger.shutdown();
    }
  });
});
