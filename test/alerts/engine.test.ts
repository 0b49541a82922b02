/**
 * The rules, fed directly (no logger): each built-in and user rule fires exactly once per episode
 * and resolves when its condition ends; keys and ranks outside a condition raise nothing; the
 * rate limits hold firings back without leaving a resolve alone. The `straggler` rule reads only
 * the attribution's chronic ranks (`AttributionSnapshot`), fed here as straggler attribution
 * will feed it at every flush.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AlertEvent } from "../../src/core/alert.js";
import type { Metric } from "../../src/core/metric.js";
import {
  AlertEngine,
  globMatches,
  type FlushObservation,
  type RankRef,
  type StragglerInput,
} from "../../src/alerts/engine.js";
import { resolveAlertOptions } from "../../src/alerts/options.js";
import { attributedKey, withSuffix } from "../../src/core/attributes.js";
import type { AlertRuleConfig } from "../../src/alerts/rule-config.js";

function engine(
  rules: readonly AlertRuleConfig[],
  limits: { minIntervalMs?: number; maxPerMinute?: number } = {},
): AlertEngine {
  const options = resolveAlertOptions(
    {
      rules,
      minIntervalMs: limits.minIntervalMs ?? 0,
      ...(limits.maxPerMinute === undefined ? {} : { maxPerMinute: limits.maxPerMinute }),
    },
    {},
  );
  return new AlertEngine("exp/trial", options, () => assert.fail("no watchdog in these tests"));
}

function metrics(values: Record<string, number>, step: number): Metric[] {
  return Object.entries(values).map(([key, value]) => ({ key, value, reduce: "mean", step, timestamp: 1000 + step }));
}

/** Feed one series of values per key, a flush per step; the events per step. */
function feed(
  e: AlertEngine,
  series: Record<string, readonly number[]>,
  extra: (step: number) => Partial<FlushObservation> = () => ({}),
): AlertEvent[][] {
  const steps = Math.max(...Object.values(series).map((s) => s.length));
  const out: AlertEvent[][] = [];
  for (let step = 0; step < steps; step++) {
    const values: Record<string, number> = {};
    for (const [key, s] of Object.entries(series)) if (step < s.length) values[key] = s[step] ?? NaN;
    out.push(e.observeFlush({ step, at: 1000 + step * 100, metrics: metrics(values, step), ...extra(step) }));
  }
  return out;
}

/** `step: state id` for every event, in order. */
function timeline(events: AlertEvent[][]): string[] {
  return events.flatMap((list, step) => list.map((e) => `${step}: ${e.state} ${e.id}`));
}

describe("built-in rules", () => {
  it("nonfinite: a finite key that becomes NaN or ±Infinity fires once per episode and resolves when finite again", () => {
    const e = engine(["nonfinite"]);
    const events = feed(e, {
      loss: [1, 0.5, NaN, NaN, Infinity, 0.4, 0.3, -Infinity, 0.2],
      fine: [1, 2, 3, 4, 5, 6, 7, 8, 9],
    });
    assert.deepEqual(timeline(events), [
      "2: firing nonfinite:loss#1",
      "5: resolved nonfinite:loss#1",
      "7: firing nonfinite:loss#2",
      "8: resolved nonfinite:loss#2",
    ]);
    const [firing] = events[2] ?? [];
    assert.equal(firing?.key, "loss");
    assert.ok(Number.isNaN(firing?.value));
    assert.equal(firing?.level, "error");
    assert.equal(firing?.run, "exp/trial");
    assert.equal(firing?.step, 2);
    assert.equal(firing?.message, "loss became NaN at step 2 (it was finite before)");
    assert.equal(events[7]?.[0]?.value, -Infinity);
  });

  it("nonfinite: a key NaN from its first value was never finite (no alert), and `*` leaves rankscope's own keys alone", () => {
    const e = engine(["nonfinite"]);
    const events = feed(e, {
      nan_from_start: [NaN, NaN, 1, NaN],
      "rankscope/alerts_undelivered": [0, NaN, 1, Infinity],
      acc__count: [1, NaN],
    });
    assert.deepEqual(timeline(events), ["3: firing nonfinite:nan_from_start#1"]);
  });

  it("rank_lost: a missing or lost rank fires once while it stays away and resolves when it answers; each rank its own episode", () => {
    const e = engine(["rank_lost"]);
    const r1: RankRef = { rankName: "Trainer_a_r1", rank: 1, host: "node-a" };
    const r2: RankRef = { rankName: "Trainer_a_r2", rank: 2, host: "node-b" };
    const presence: Record<number, { missing: RankRef[]; lost: RankRef[] }> = {
      1: { missing: [r1], lost: [] },
      2: { missing: [r1], lost: [] },
      3: { missing: [], lost: [r1] },
      4: { missing: [r2], lost: [r1] },
      5: { missing: [], lost: [] },
    };
    const events = feed(e, { loss: [1, 1, 1, 1, 1, 1, 1] }, (step) => ({
      ranks: presence[step] ?? { missing: [], lost: [] },
    }));
    assert.deepEqual(timeline(events), [
      "1: firing rank_lost:Trainer_a_r1#1",
      "4: firing rank_lost:Trainer_a_r2#2",
      "5: resolved rank_lost:Trainer_a_r1#1",
      "5: resolved rank_lost:Trainer_a_r2#2",
    ]);
    const fired = events[1]?.[0];
    assert.deepEqual(
      [fired?.rank, fired?.rankName, fired?.host, fired?.message],
      [1, "Trainer_a_r1", "node-a", "rank 1 (Trainer_a_r1) on node-a did not answer the flush at step 1"],
    );
    assert.equal(events[5]?.[0]?.host, "node-a", "the resolve names the rank as the firing did");
  });

  it("the run's end: episodes still firing end with it (`ended`, the last step), held-back ones send nothing, and nothing is judged after", () => {
    const e = engine(["nonfinite", "rank_lost"], { maxPerMinute: 2 });
    const r1: RankRef = { rankName: "Trainer_a_r1", rank: 1 };
    // a fires and r1 is lost (never to come back); b's firing is the third: held back by maxPerMinute.
    feed(e, { a: [1, NaN, NaN], b: [1, 1, NaN], c: [1, 1, 1] }, (step) => ({
      ranks: { missing: [], lost: step === 0 ? [] : [r1] },
    }));
    const ended = e.endRun(5000);
    assert.deepEqual(
      ended.map((x) => [x.state, x.id, x.step, x.at, x.message]),
      [
        ["ended", "nonfinite:a#1", 2, 5000, "the run ended while this was firing (last step 2)"],
        ["ended", "rank_lost:Trainer_a_r1#2", 2, 5000, "the run ended while this was firing (last step 2)"],
      ],
    );
    assert.equal(ended[1]?.rankName, "Trainer_a_r1", "the end names its subject as the firing did");
    assert.deepEqual({ ...e.counts }, { fired: 2, resolved: 0, ended: 2, suppressed: 1 });
    assert.deepEqual(e.endRun(), [], "once");
    assert.deepEqual(e.observeFlush({ step: 3, at: 6000, metrics: metrics({ a: 1 }, 3) }), []);
  });

  it("rank_lost: a flush without rank information is no evidence (an open episode stays open)", () => {
    const e = engine(["rank_lost"]);
    const r1: RankRef = { rankName: "r1" };
    const events = feed(e, { x: [1, 1, 1, 1] }, (step) =>
      step === 0 ? { ranks: { missing: [r1], lost: [] } } : step === 3 ? { ranks: { missing: [], lost: [] } } : {},
    );
    assert.deepEqual(timeline(events), ["0: firing rank_lost:r1#1", "3: resolved rank_lost:r1#1"]);
  });

  it("straggler: reads the attribution's ranks at each flush (StragglerInput), fires for a chronic one only, once per episode, resolved when no longer chronic", () => {
    const e = engine(["straggler"]);
    const slow: RankRef = { rankName: "Trainer_a_r5", rank: 5, host: "node-c" };
    // A transient straggler (named slow, not chronic) is in every report: never an alert.
    const transient: StragglerInput = { rankName: "Trainer_a_r2", rank: 2, host: "node-b", chronic: false };
    const chronic: Record<number, boolean> = { 1: false, 2: true, 3: true, 4: true, 5: false };
    const events = feed(e, { x: [1, 1, 1, 1, 1, 1, 1] }, (step) =>
      step === 6
        ? {}
        : { stragglers: [transient, ...(chronic[step] === undefined ? [] : [{ ...slow, chronic: chronic[step] }])] },
    );
    assert.deepEqual(timeline(events), ["2: firing straggler:Trainer_a_r5#1", "5: resolved straggler:Trainer_a_r5#1"]);
    const fired = events[2]?.[0];
    assert.deepEqual(
      [fired?.level, fired?.rank, fired?.rankName, fired?.host],
      ["warning", 5, "Trainer_a_r5", "node-c"],
    );
    assert.match(fired?.message ?? "", /^rank 5 \(Trainer_a_r5\) on node-c is a chronic straggler at step 2/);
  });
});

describe("user rules", () => {
  it("threshold: above and below, each key its own episode; NaN is no evidence", () => {
    const e = engine([{ rule: "threshold", key: "grad_norm/*", above: 10, below: 0.01 }]);
    const events = feed(e, {
      "grad_norm/a": [1, 12, 15, NaN, 3, 0.001, 1],
      "grad_norm/b": [1, 1, 1, 1, 1, 1, 1],
      other: [100, 100],
    });
    assert.deepEqual(timeline(events), [
      "1: firing threshold:grad_norm/a#1",
      "4: resolved threshold:grad_norm/a#1",
      "5: firing threshold:grad_norm/a#2",
      "6: resolved threshold:grad_norm/a#2",
    ]);
    assert.equal(events[1]?.[0]?.message, "grad_norm/a = 12 at step 1, above 10");
    assert.equal(events[4]?.[0]?.message, "grad_norm/a = 3 at step 4, back within [0.01, 10]");
  });

  it("threshold for N flushes: p99 TTFT over 0.5 s for 3 flushes in a row, per model on the attributed keys", () => {
    const ttft = (model: string, output: string): string =>
      withSuffix(
        attributedKey("gen_ai.server.time_to_first_token", {
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": "vllm",
          "gen_ai.request.model": model,
        }),
        output,
      );
    const e = engine([
      { rule: "threshold", name: "ttft_p99", key: "gen_ai.server.time_to_first_token/p99*", above: 0.5, flushes: 3 },
    ]);
    const big = ttft("llama-70b", "p99");
    const small = ttft("llama-8b", "p99");
    const events = feed(e, {
      // Two flushes over, one back under (the count starts again), then three over in a row.
      [big]: [0.3, 0.6, 0.7, 0.4, 0.6, 0.7, 0.8, 0.3],
      // NaN is no evidence: the run of flushes over goes on across it.
      [small]: [0.6, 0.6, NaN, 0.6, 0.2],
      // Not a p99: not matched.
      [ttft("llama-70b", "p50")]: [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    });
    assert.deepEqual(timeline(events), [
      `3: firing ttft_p99:${small}#1`,
      `4: resolved ttft_p99:${small}#1`,
      `6: firing ttft_p99:${big}#2`,
      `7: resolved ttft_p99:${big}#2`,
    ]);
    assert.equal(events[6]?.[0]?.message, `${big} = 0.8 at step 6, above 0.5 for 3 flushes`);
    assert.equal(events[6]?.[0]?.key, big);
  });

  it("ratio: a model's error rate (its errors of every error type over its requests) over 5 % for 2 flushes, per model", () => {
    const key = (name: string, model: string, extra: Record<string, string> = {}): string =>
      withSuffix(
        attributedKey(name, {
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": "vllm",
          "gen_ai.request.model": model,
          ...extra,
        }),
        "total",
      );
    const e = engine([
      {
        rule: "ratio",
        name: "error_rate",
        numerator: "inference/errors/total*",
        denominator: "inference/requests/total*",
        above: 0.05,
        flushes: 2,
      },
    ]);
    const requests70 = key("inference/requests", "llama-70b");
    const requests8 = key("inference/requests", "llama-8b");
    const timeouts70 = key("inference/errors", "llama-70b", { "error.type": "timeout" });
    const failures70 = key("inference/errors", "llama-70b", { "error.type": "500" });
    const timeouts8 = key("inference/errors", "llama-8b", { "error.type": "timeout" });
    const events = feed(e, {
      // 70b: 2 %, then 3 + 3 of 100 (6 %: both error types add up), 4 + 4 (8 %), 1 %, 6 % once.
      [requests70]: [100, 100, 100, 100, 100, 100],
      [timeouts70]: [2, 3, 4, 1, 6, 1],
      [failures70]: [0, 3, 4, 0, 0, 0],
      // 8b: errors only at the first flush (10 %), then no error key at all (0 %, not "no evidence").
      [requests8]: [10, 10, 10, 10, 10, 0],
      [timeouts8]: [1, 1],
    });
    assert.deepEqual(timeline(events), [
      `1: firing error_rate:${requests8}#1`,
      `2: firing error_rate:${requests70}#2`,
      `2: resolved error_rate:${requests8}#1`,
      `3: resolved error_rate:${requests70}#2`,
    ]);
    assert.equal(
      events[2]?.[0]?.message,
      `inference/errors/total* / ${requests70} = 0.08 at step 2, above 0.05 for 2 flushes`,
    );
    assert.equal(events[2]?.[0]?.key, requests70);
    assert.equal(events[2]?.[0]?.value, 0.08);
  });

  it("spike: a value more than k MADs from the rolling median fires once and resolves when values are back", () => {
    const e = engine([{ rule: "spike", key: "loss", k: 6, window: 20, minPoints: 10 }]);
    // Noise within ±0.05 around 1, one spike lasting two flushes, then noise again.
    const noise = Array.from({ length: 30 }, (_, i) => 1 + (((i * 7) % 11) - 5) / 100);
    const series = [...noise.slice(0, 15), 5, 4, ...noise.slice(15)];
    const events = feed(e, { loss: series });
    assert.deepEqual(timeline(events), ["15: firing spike:loss#1", "17: resolved spike:loss#1"]);
    assert.match(
      events[15]?.[0]?.message ?? "",
      /^loss = 5 at step 15: a spike, \d+(\.\d+)? MADs from the rolling median 1(\.\d+)? of its last 15 values \(k = 6\)$/,
    );
  });

  it("spike: nothing is judged before minPoints values, or when the window has no spread", () => {
    const e = engine([{ rule: "spike", key: "*", window: 10, minPoints: 5 }]);
    const events = feed(e, { early: [1, 2, 100, 1, 2, 1, 2], constant: [3, 3, 3, 3, 3, 3, 3, 3, 50] });
    assert.deepEqual(timeline(events), []);
  });

  it("rate_drop: below fraction × the rolling median fires once; the window holds still during the drop, so it resolves only on recovery", () => {
    const e = engine([{ rule: "rate_drop", key: "tokens_per_s", fraction: 0.5, window: 5, minPoints: 3 }]);
    const series = [100, 102, 98, 101, 40, 38, 41, 39, 37, 40, 42, 95, 99];
    const events = feed(e, { tokens_per_s: series });
    assert.deepEqual(timeline(events), ["4: firing rate_drop:tokens_per_s#1", "11: resolved rate_drop:tokens_per_s#1"]);
    assert.equal(
      events[4]?.[0]?.message,
      "tokens_per_s = 40 at step 4: below 50% of its rolling median 100.5 (last 4 values)",
    );
  });

  it("a rule on an exact internal key applies to it (`rankscope/…`); `*` patterns do not", () => {
    const e = engine([
      { rule: "threshold", key: "rankscope/ranks_reporting", below: 4 },
      { rule: "threshold", name: "any_high", key: "*", above: 100 },
    ]);
    const events = feed(e, { "rankscope/ranks_reporting": [4, 3, 4], "rankscope/ranks_expected": [400, 400, 400] });
    assert.deepEqual(timeline(events), [
      "1: firing threshold:rankscope/ranks_reporting#1",
      "2: resolved threshold:rankscope/ranks_reporting#1",
    ]);
  });

  it("glob patterns: * matches any run of characters, the rest literally", () => {
    assert.ok(globMatches("grad_norm/*", "grad_norm/layer.1/weight"));
    assert.ok(globMatches("*/loss", "train/loss"));
    assert.ok(globMatches("a*b*c", "a-b-c"));
    assert.ok(!globMatches("a*b*c", "a-c-b"));
    assert.ok(!globMatches("loss*", "val/loss"));
    assert.ok(globMatches("*", "anything"));
    assert.ok(!globMatches("a*a", "a"));
  });
});

describe("rate limits", () => {
  it("minIntervalMs: a new episode of the same rule and key soon after its last firing is recorded, not sent, and its end is not sent either", () => {
    const e = engine(["nonfinite"], { minIntervalMs: 500 });
    // Flushes 100 ms apart: NaN at 1 (sent), at 3 (held back: 200 ms after), at 8 (700 ms: sent).
    const events = feed(e, { loss: [1, NaN, 1, NaN, 1, 1, 1, 1, NaN, 1] });
    assert.deepEqual(timeline(events), [
      "1: firing nonfinite:loss#1",
      "2: resolved nonfinite:loss#1",
      "8: firing nonfinite:loss#3",
      "9: resolved nonfinite:loss#3",
    ]);
    assert.deepEqual({ ...e.counts }, { fired: 2, resolved: 2, ended: 0, suppressed: 1 });
  });

  it("maxPerMinute: firings past the limit (all rules together) are held back and counted", () => {
    const e = engine(["nonfinite"], { maxPerMinute: 2 });
    const events = feed(e, { a: [1, NaN, 1], b: [1, NaN, 1], c: [1, NaN, 1] });
    assert.deepEqual(timeline(events), [
      "1: firing nonfinite:a#1",
      "1: firing nonfinite:b#2",
      "2: resolved nonfinite:a#1",
      "2: resolved nonfinite:b#2",
    ]);
    assert.equal(e.counts.suppressed, 1);
  });

  it("user alerts are never rate limited", () => {
    const e = engine(["nonfinite"], { maxPerMinute: 1 });
    const events = Array.from({ length: 5 }, (_, i) =>
      e.userAlert({ title: `t${i}`, text: "x", level: "info", at: 1 }),
    );
    assert.deepEqual(
      events.map((x) => [x.rule, x.state, x.title, x.message]),
      [0, 1, 2, 3, 4].map((i) => ["user", "firing", `t${i}`, `t${i}: x`]),
    );
  });
});
