import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { getCollector, metric, recordMetric } from "../../src/core/collector.js";
import { Reduce } from "../../src/core/registry.js";
import { getReduceDefinition } from "../../src/core/registry.js";
import { collectDiagnostics, TS_LOADER } from "../helpers.js";

const collector = getCollector();

function reducedValue(key: string): unknown {
  const states = collector.takeStates().filter((s) => s.key === key);
  assert.equal(states.length, 1, `one state for ${key}`);
  const s = states[0] as (typeof states)[number];
  return getReduceDefinition(s.reduce).value(s.state);
}

test("recordMetric accumulates per key until the states are taken, then starts afresh", () => {
  collector.clear();
  for (const n of [1, 2, 3]) {
    recordMetric("c/sum", n, Reduce.SUM);
    recordMetric("c/mean", n);
  }
  const states = collector.takeStates();
  assert.deepEqual(
    states.map((s) => s.key),
    ["c/mean", "c/sum"],
    "sorted by key",
  );
  assert.deepEqual(
    states.map((s) => s.state.count),
    [3, 3],
  );
  assert.deepEqual(collector.takeStates(), [], "nothing recorded since: nothing to report");
  recordMetric("c/sum", 10, Reduce.SUM);
  assert.equal(reducedValue("c/sum"), 10);
});

test("bigints are accepted as numbers", () => {
  collector.clear();
  recordMetric("c/tokens", 5n, Reduce.SUM);
  recordMetric("c/tokens", 7, Reduce.SUM);
  assert.equal(reducedValue("c/tokens"), 12);
});

test("the same key with a different reduce is a TypeError naming the key and both reductions", () => {
  collector.clear();
  recordMetric("c/loss", 1, Reduce.MEAN);
  assert.throws(() => recordMetric("c/loss", 1, Reduce.MAX), {
    name: "TypeError",
    message: /metric "c\/loss" was first recorded with reduce "mean" and is now recorded with the string "max"/,
  });
});

test("bad keys and values get TypeErrors that say what was given and what is accepted", () => {
  collector.clear();
  assert.throws(() => recordMetric("", 1), /key must be a non-empty string, got the string ""/);
  assert.throws(() => recordMetric(42 as unknown as string, 1), /key must be a non-empty string, got number 42/);
  assert.throws(
    () => recordMetric("c/v", "3" as unknown as number),
    /takes a number or a bigint, got the string "3"; for records \(objects\) use Reduce.SAMPLE/,
  );
  recordMetric("c/v2", 1);
  assert.throws(() => recordMetric("c/v2", null as unknown as number), /takes a number or a bigint, got null/);
  // Each refused call short enough to stay on the line below its directive once formatted.
  const notARecord = /takes a plain object record \(e\.g\. \{ prompt, reward \}\), got number 3/;
  // @ts-expect-error -- a number for a reduction of records is a compile error too; this checks the runtime error
  assert.throws(() => recordMetric("c/s", 3, Reduce.SAMPLE), notARecord);
  recordMetric("c/s", { reward: 1 }, Reduce.SAMPLE);
  // @ts-expect-error -- as above, once the key is known (the hot path sends it to the same error)
  assert.throws(() => recordMetric("c/s", 3, Reduce.SAMPLE), notARecord, "the same error once the key is known");
  const notANumber = /takes a number or a bigint, got an object \(Object\)/;
  // @ts-expect-error -- and a record for a reduction of numbers
  assert.throws(() => recordMetric("c/o", { reward: 1 }, Reduce.MEAN), notANumber);
  // @ts-expect-error -- an unknown reduce is a compile error too; this checks the runtime error (JavaScript callers)
  assert.throws(() => recordMetric("c/r", 1, "median"), /unknown reduce "median"; valid: mean, sum/);
});

test("NaN and Infinity are recorded and propagate", () => {
  collector.clear();
  recordMetric("c/nan", 1);
  recordMetric("c/nan", NaN);
  assert.ok(Number.isNaN(reducedValue("c/nan")));
  recordMetric("c/inf", Infinity, Reduce.MAX);
  assert.equal(reducedValue("c/inf"), Infinity);
});

test("a bound handle records into the same accumulator, across flushes", () => {
  collector.clear();
  const loss = metric("c/handle", Reduce.MEAN);
  loss.record(2);
  recordMetric("c/handle", 4);
  assert.equal(reducedValue("c/handle"), 3);
  loss.record(10);
  loss.record(20n);
  assert.equal(reducedValue("c/handle"), 15, "the handle stays valid after the states were taken");
  assert.throws(() => metric("c/handle", Reduce.SUM), /first recorded with reduce "mean"/);
  // @ts-expect-error -- handles take numbers: a reduction of records is a compile error too
  assert.throws(() => metric("c/sample", Reduce.SAMPLE), /binds numeric reductions only/);
});

test("past the key bound new keys are dropped, counted and warned about once", async () => {
  collector.clear();
  const previous = collector.maxKeys;
  collector.maxKeys = 3;
  try {
    const seen = await collectDiagnostics(() => {
      for (let i = 0; i < 10; i++) recordMetric(`c/id-${i}`, i);
      recordMetric("c/id-0", 100);
    });
    assert.equal(collector.entries.size, 3);
    assert.equal(collector.droppedKeyRecords, 7);
    const warnings = seen.filter((d) => d.code === "collector.maxKeys");
    assert.equal(warnings.length, 7, "counted every time");
    assert.equal(warnings[0]?.count, 1);
    assert.match(warnings[0]?.message ?? "", /more than 3 distinct metric keys.*first: "c\/id-3"/);
    assert.equal(reducedValue("c/id-0"), 50, "existing keys still record");
  } finally {
    collector.maxKeys = previous;
  }
});

test("recording a known key does not allocate", () => {
  collector.clear();
  const gc = (globalThis as { gc?: () => void }).gc;
  recordMetric("c/alloc", 1);
  const handle = metric("c/alloc-handle", Reduce.SUM);
  const run = (n: number): void => {
    for (let i = 0; i < n; i++) {
      recordMetric("c/alloc", i);
      handle.record(i);
    }
  };
  run(200_000); // warm up, let the JIT settle
  gc?.();
  const before = process.memoryUsage().heapUsed;
  run(1_000_000);
  const grown = process.memoryUsage().heapUsed - before;
  // 2M calls: even 8 bytes each would be 16 MB. Allow a little for the runtime's own activity.
  assert.ok(grown < 2_000_000, `heap grew by ${grown} bytes over 2M calls`);
});

test("RANKSCOPE_DISABLE_METRICS (true/1/yes, any case) makes recording a no-op", () => {
  const script = fileURLToPath(new URL("../fixtures/disabled-metrics.ts", import.meta.url));
  for (const value of ["true", "1", "YES", "Yes"]) {
    const out = spawnSync(process.execPath, ["--import", TS_LOADER, script], {
      env: { ...process.env, RANKSCOPE_DISABLE_METRICS: value },
      encoding: "utf8",
    });
    assert.equal(out.status, 0, out.stderr);
    assert.equal(out.stdout.trim(), "entries=0 states=0", `RANKSCOPE_DISABLE_METRICS=${value}`);
  }
  const on = spawnSync(process.execPath, ["--import", TS_LOADER, script], {
    env: { ...process.env, RANKSCOPE_DISABLE_METRICS: "false" },
    encoding: "utf8",
  });
  assert.equal(on.stdout.trim(), "entries=3 states=3", "with the switch off, all three keys record");
});

test("two copies of the module share one collector (globalThis + Symbol.for)", async () => {
  const copy = (await import(
    `../../src/core/collector.ts?copy=${Date.now()}`
  )) as typeof import("../../src/core/collector.js");
  assert.equal(copy.getCollector(), collector);
});

test("recordMetric refuses at the call a key the team server could not keep: too long, a NUL, a lone surrogate", () => {
  collector.clear();
  for (const [key, why] of [
    ["k".repeat(1_500), /longer than 1000 characters/],
    ["a\u0000b", /NUL/],
    ["half \ud800 pair", /lone UTF-16 surrogate/],
  ] as const) {
    assert.throws(() => recordMetric(key, 1), why, JSON.stringify(key.slice(0, 20)));
  }
  recordMetric("k".repeat(1_000), 1);
  recordMetric("emoji 😀", 1);
  assert.equal(collector.takeStates().length, 2, "a key at the bound and a whole surrogate pair are kept");
});
