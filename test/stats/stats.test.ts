import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, test } from "node:test";
import { getCollector } from "../../src/core/collector.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { stats, StatReduce } from "../../src/stats/index.js";
import { WorkerRankHandle } from "../fixtures/worker-rank-handle.js";
import { tempDir } from "../helpers.js";

afterEach(() => getCollector().clear());

/** The user's metrics by key (without rankscope's own, such as `rankscope/ranks_reporting`). */
function valuesOf(metrics: readonly { key: string; value: number }[]): Record<string, number> {
  return Object.fromEntries(metrics.filter((m) => !m.key.startsWith("rankscope/")).map((m) => [m.key, m.value]));
}

test("scalar: A records 0.5 and 1.0, B records 0.0 → 0.5 with count 3 through a real flush across two ranks", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir, processName: "A" });
  const b = new WorkerRankHandle("B", 1);
  try {
    await logger.registerRank(b);
    await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
    stats.scalar({ reward: 0.5 });
    stats.scalar({ reward: 1.0 });
    await b.request("scalar", [{ reward: 0.0 }]);
    const result = await logger.flush(0);
    // ranksReporting counts registered ranks (B); the controller's own process (A) always reports.
    assert.equal(result.ranksReporting, 1);
    assert.equal(result.ranksExpected, 1);
    assert.deepEqual(valuesOf(result.metrics), { reward: 0.5, reward__count: 3 });
    await logger.shutdown();
    const lines = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { key: string; value: number });
    assert.deepEqual(valuesOf(lines), { reward: 0.5, reward__count: 3 }, "the store-like backend keeps __count");
  } finally {
    await b.terminate();
  }
});

test("masked stat across two ranks equals the direct computation over both ranks' masked entries", async () => {
  const logger = new MetricLogger({ runDir: tempDir(), processName: "A" });
  const b = new WorkerRankHandle("B", 1);
  try {
    await logger.registerRank(b);
    await logger.initBackends({});
    const maskA = [true, false, true, true];
    const lossA = [0.25, 99, -1.5, 2];
    const maskB = [false, true, true];
    const lossB = [50, 3.5, 0.75];
    stats.denominator({ nValidTokens: maskA });
    stats.stat({ loss: lossA }, { denominator: "nValidTokens" });
    await b.request("stat", { mask: maskB, values: { loss: lossB } });
    const result = await logger.flush(0);
    const masked = [...lossA.filter((_, i) => maskA[i]), ...lossB.filter((_, i) => maskB[i])];
    const values = valuesOf(result.metrics);
    assert.equal(values["loss/avg"], masked.reduce((s, v) => s + v, 0) / masked.length);
    assert.equal(values["loss/min"], Math.min(...masked));
    assert.equal(values["loss/max"], Math.max(...masked));
    assert.equal(values["nValidTokens"], 5, "the denominator is logged as the number of valid entries");
    await logger.shutdown();
  } finally {
    await b.terminate();
  }
});

test("worked example: mask [T, F, T], values [1, 2, 3] → avg 2, min 1, max 3; other reductions", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  stats.denominator({ mask: new Uint8Array([1, 0, 1]) });
  stats.stat({ x: new Float32Array([1, 2, 3]) }, { denominator: "mask" });
  stats.stat({ xAvg: [1, 2, 3] }, { denominator: "mask", reduce: StatReduce.AVG });
  stats.stat({ xSum: [1, 2, 3] }, { denominator: "mask", reduce: StatReduce.SUM });
  stats.stat({ xMin: [1, 2, 3] }, { denominator: "mask", reduce: StatReduce.MIN });
  stats.stat({ xMax: [1, 2, 3] }, { denominator: "mask", reduce: StatReduce.MAX });
  const values = valuesOf((await logger.flush(0)).metrics);
  assert.deepEqual(values, { mask: 2, "x/avg": 2, "x/min": 1, "x/max": 3, xAvg: 2, xSum: 4, xMin: 1, xMax: 3 });
  await logger.shutdown();
});

test("masked stats match a direct computation over many random arrays and flushes", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  let seed = 7;
  const random = (): number => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed / 2 ** 32;
  };
  for (let step = 0; step < 5; step++) {
    const all: number[] = [];
    for (let call = 0; call < 3; call++) {
      const n = 1 + Math.floor(random() * 300);
      const mask = Array.from({ length: n }, () => random() < 0.6);
      const values = Float64Array.from({ length: n }, () => random() * 10 - 5);
      stats.denominator({ tokens: mask });
      stats.stat({ v: values }, { denominator: "tokens" });
      values.forEach((v, i) => mask[i] && all.push(v));
    }
    const got = valuesOf((await logger.flush(step)).metrics);
    const expectedAvg = all.reduce((s, v) => s + v, 0) / all.length;
    assert.ok(
      Math.abs((got["v/avg"] as number) - expectedAvg) < 1e-12,
      `step ${step}: avg ${got["v/avg"]} vs ${expectedAvg}`,
    );
    assert.equal(got["v/min"], Math.min(...all));
    assert.equal(got["v/max"], Math.max(...all));
    assert.equal(got["tokens"], all.length);
  }
  await logger.shutdown();
});

test("a key whose denominator totals 0 is omitted", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  stats.denominator({ none: [false, false] });
  stats.stat({ loss: [1, 2] }, { denominator: "none" });
  const keys = (await logger.flush(0)).metrics.map((m) => m.key);
  assert.ok(!keys.some((k) => k.startsWith("loss")), `no loss keys expected, got ${keys.join(", ")}`);
  await logger.shutdown();
});

test("bad input: length mismatch names both lengths; unknown denominator and reduce say what is valid", () => {
  stats.denominator({ m: [true, false, true] });
  assert.throws(
    () => stats.stat({ loss: [1, 2] }, { denominator: "m" }),
    /"loss" has 2 values but denominator "m" has 3 entries/,
  );
  assert.throws(
    () => stats.stat({ loss: [1, 2] }, { denominator: "nope" }),
    /denominator "nope" is not set.*stats\.denominator/,
  );
  assert.throws(
    () => stats.stat({ loss: [1, 2, 3] }, { denominator: "m", reduce: "median" as never }),
    /valid: avg_min_max, avg, sum, min, max/,
  );
  assert.throws(() => stats.scope("/bad", () => 0), /without leading or trailing/);
  assert.throws(() => stats.scalar({ x: "1" as unknown as number }), /takes numbers/);
});

test("scopes nest, named trackers prefix, denominators are found in parent scopes", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  stats.scope("ppo_actor", () => {
    stats.denominator({ nValidTokens: [true, true] });
    stats.scope("update", () => {
      stats.scalar({ loss: 1 });
      stats.stat({ ratio: [1, 3] }, { denominator: "nValidTokens", reduce: StatReduce.AVG });
    });
  });
  stats.get("rollout").scalar({ reward: 2 });
  stats.get("rollout").scope("eval", () => stats.get("rollout").scalar({ reward: 4 }));
  const values = valuesOf((await logger.flush(0)).metrics);
  assert.deepEqual(values, {
    "ppo_actor/nValidTokens": 2,
    "ppo_actor/update/loss": 1,
    "ppo_actor/update/loss__count": 1,
    "ppo_actor/update/ratio": 2,
    "rollout/eval/reward": 4,
    "rollout/eval/reward__count": 1,
    "rollout/reward": 2,
    "rollout/reward__count": 1,
  });
  await logger.shutdown();
});

test("scopes are per async context: concurrent tasks never see each other's scope", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
  const task = (name: string, value: number): Promise<void> =>
    stats.scope(name, async () => {
      for (let i = 0; i < 20; i++) {
        await tick();
        stats.scope("inner", () => stats.scalar({ v: value }));
        await stats.scope("deep", async () => {
          await tick();
          stats.scalar({ v: value });
        });
      }
    });
  await Promise.all([task("a", 1), task("b", 2), task("c", 3)]);
  stats.scalar({ root: 0 });
  const values = valuesOf((await logger.flush(0)).metrics);
  for (const [name, v] of [
    ["a", 1],
    ["b", 2],
    ["c", 3],
  ] as const) {
    assert.equal(values[`${name}/inner/v`], v);
    assert.equal(values[`${name}/inner/v__count`], 20);
    assert.equal(values[`${name}/deep/v`], v);
    assert.equal(values[`${name}/deep/v__count`], 20);
  }
  assert.equal(values["root"], 0, "after the tasks, the caller is at the root again");
  assert.equal(Object.keys(values).length, 14);
  await logger.shutdown();
});

test("the `using` form enters a scope until the end of the block, also across awaits", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  {
    using outer = stats.scope("actor");
    assert.equal(outer.prefix, "actor/");
    {
      using _inner = stats.scope("update");
      stats.scalar({ loss: 1 });
    }
    stats.scalar({ entropy: 2 });
  }
  stats.scalar({ top: 3 });
  const run = async (): Promise<void> => {
    using _s = stats.scope("async");
    await new Promise((r) => setImmediate(r));
    stats.scalar({ x: 4 });
  };
  await stats.scope("task", run);
  stats.scalar({ after: 5 });
  const keys = (await logger.flush(0)).metrics.map((m) => m.key).filter((k) => !k.endsWith("__count"));
  assert.deepEqual(keys, ["actor/entropy", "actor/update/loss", "after", "task/async/x", "top"]);
  await logger.shutdown();
});

test("recordTiming records seconds as a scalar under timeperf/, for sync, async and `using`", async () => {
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({});
  const out = stats.recordTiming("sync", () => 42);
  assert.equal(out, 42);
  assert.equal(await stats.recordTiming("rollout", async () => "done"), "done");
  assert.throws(
    () =>
      stats.recordTiming("fails", () => {
        throw new Error("boom");
      }),
    /boom/,
  );
  await assert.rejects(
    stats.recordTiming("rejects", async () => {
      throw new Error("late boom");
    }),
    /late boom/,
  );
  const own = Promise.resolve(7);
  assert.equal(
    stats.recordTiming("same", () => own),
    own,
    "the caller gets its own promise back",
  );
  await own;
  stats.scope("actor", () => {
    using _t = stats.recordTiming("inScope");
  });
  const values = valuesOf((await logger.flush(0)).metrics);
  for (const name of ["sync", "rollout", "fails", "rejects", "same", "inScope"]) {
    assert.ok((values[`timeperf/${name}`] as number) >= 0, `timeperf/${name}`);
    assert.equal(values[`timeperf/${name}__count`], 1);
  }
  await logger.shutdown();
});

test("a `using` scope in an async function called without its own scope is left when the function ends", async () => {
  const enter = async (expected: string): Promise<void> => {
    using _s = stats.scope("x");
    await new Promise((r) => setImmediate(r));
    assert.equal(stats.prefix, expected);
  };
  const pending = enter("x/");
  await pending;
  assert.equal(stats.prefix, "", "the caller is back at the root once the scope is disposed");
  await stats.scope("outer", async () => {
    await enter("outer/x/");
    assert.equal(stats.prefix, "outer/");
  });
  assert.equal(stats.prefix, "");
});
