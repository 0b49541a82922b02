import { test } from "node:test";
import assert from "node:assert/strict";
import { getCollector, metric, recordMetric } from "../../src/core/collector.js";
import { attributedKey, splitAttributedKey, withSuffix } from "../../src/core/attributes.js";
import { Reduce } from "../../src/core/registry.js";
import { reduceStates } from "../../src/pipeline/reduce-states.js";

const collector = getCollector();

function flushed(): Map<string, number> {
  const { metrics } = reduceStates(collector.takeStates(), { step: 1, timestamp: 0 });
  return new Map(metrics.map((m) => [m.key, m.value]));
}

test("attributes make one key per set, names sorted and values escaped, whatever the order written", () => {
  collector.clear();
  recordMetric("latency", 1, Reduce.MEAN, { operation: "chat", model: "a" });
  recordMetric("latency", 3, Reduce.MEAN, { model: "a", operation: "chat" });
  recordMetric("latency", 10, Reduce.MEAN, { model: "b,{x}=y", operation: "chat" });
  recordMetric("latency", 100);
  const values = flushed();
  assert.deepEqual(
    [...values.entries()],
    [
      ["latency", 100],
      ["latency{model=a,operation=chat}", 2],
      ["latency{model=b\\,\\{x\\}\\=y,operation=chat}", 10],
    ],
  );
  assert.deepEqual(splitAttributedKey("latency{model=b\\,\\{x\\}\\=y,operation=chat}"), {
    name: "latency",
    attributes: { model: "b,{x}=y", operation: "chat" },
  });
  assert.deepEqual(splitAttributedKey("plain/key"), { name: "plain/key", attributes: {} });
  assert.deepEqual(splitAttributedKey("odd{not attributes}"), { name: "odd{not attributes}", attributes: {} });
});

test("a reduction's suffix goes on the name, before the attributes", () => {
  collector.clear();
  for (const v of [1, 2, 3]) recordMetric("ttft", v, Reduce.QUANTILES, { model: "a" });
  assert.deepEqual([...flushed().keys()], ["ttft/p50{model=a}", "ttft/p90{model=a}", "ttft/p99{model=a}"]);
  assert.equal(withSuffix("no{attrs", "p50"), "no{attrs/p50");
});

test("bound handles take attributes, and record under the attributed key", () => {
  collector.clear();
  const handle = metric("tokens", Reduce.SUM, { model: "a" });
  assert.equal(handle.key, "tokens{model=a}");
  handle.record(2);
  handle.record(5n);
  recordMetric("tokens", 3, Reduce.SUM, Object.freeze({ model: "a" }));
  assert.equal(flushed().get("tokens{model=a}"), 10);
});

test("the attribute sets of one name are bounded; values past the bound are dropped and counted", () => {
  collector.clear();
  collector.droppedKeyRecords = 0;
  const previous = collector.attributed.maxSets;
  collector.attributed.maxSets = 3;
  try {
    for (let i = 0; i < 5; i++) recordMetric("per_user", 1, Reduce.SUM, { user: `u${i}` });
    recordMetric("per_user", 1, Reduce.SUM, { user: "u0" });
    recordMetric("other", 1, Reduce.SUM, { user: "u9" });
    const values = flushed();
    assert.deepEqual(
      [...values.keys()],
      ["other{user=u9}", "per_user{user=u0}", "per_user{user=u1}", "per_user{user=u2}"],
    );
    assert.equal(values.get("per_user{user=u0}"), 2);
    assert.equal(collector.droppedKeyRecords, 2);
  } finally {
    collector.attributed.maxSets = previous;
    collector.droppedKeyRecords = 0;
  }
});

test("invalid attributes are errors that say what is valid", () => {
  assert.throws(() => recordMetric("k", 1, Reduce.SUM, { "bad name": "x" }), /attribute name "bad name" is not valid/);
  assert.throws(
    () => recordMetric("k", 1, Reduce.SUM, JSON.parse(`{"model":null}`)),
    /attribute "model" must be a string, number or boolean/,
  );
  assert.throws(() => attributedKey("k{x}", { a: "b" }), /must not hold "\{" or "\}"/);
  assert.equal(attributedKey("k", {}), "k");
});
