/**
 * The `jsonl` backend's records (src/backends/jsonl/index.ts): NaN and ±Infinity as strings that
 * parse back, raw stream records of per_rank_no_reduce, a file at an absolute path. (The fields of
 * each kind of line, per-rank files and option errors: jsonl.test.ts.)
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { getOrCreateMetricLogger, parseNumber, recordMetric, Reduce } from "../../../src/index.js";
import { getCollector } from "../../../src/core/collector.js";
import { tempDir } from "../../helpers.js";

const collector = getCollector();
afterEach(() => collector.clear());

/** The lines of a jsonl file, parsed. */
function readLines(file: string): Record<string, unknown>[] {
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

test("jsonl writes one line per metric and NaN/±Infinity read back as themselves", async () => {
  collector.clear();
  const runDir = tempDir();
  const logger = await getOrCreateMetricLogger({ runDir });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  recordMetric("loss", NaN);
  recordMetric("grad_norm", Infinity, Reduce.MAX);
  recordMetric("floor", -Infinity, Reduce.MIN);
  recordMetric("reward", 0.5);
  await logger.flush(7);
  await logger.shutdown();
  const lines = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(
    lines.map((l) => l["key"]),
    ["floor", "grad_norm", "loss", "reward"],
  );
  const values = Object.fromEntries(lines.map((l) => [l["key"], parseNumber(l["value"])]));
  assert.equal(values["floor"], -Infinity);
  assert.equal(values["grad_norm"], Infinity);
  assert.ok(Number.isNaN(values["loss"]));
  assert.equal(values["reward"], 0.5);
  for (const l of lines) {
    assert.equal(l["step"], 7);
    assert.equal(typeof l["timestamp"], "number");
    assert.ok(typeof l["reduce"] === "string");
  }
});

test("the file option takes an absolute path as given", async () => {
  const elsewhere = join(tempDir(), "all.jsonl");
  const logger = new MetricLogger({ runDir: tempDir() });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce", file: elsewhere } });
  recordMetric("reward", 0.25);
  await logger.flush(2);
  await logger.shutdown();
  assert.deepEqual(
    readLines(elsewhere)
      .filter((l) => l["key"] === "reward")
      .map((l) => [l["value"], l["step"]]),
    [[0.25, 2]],
  );
});

test("per_rank_no_reduce writes every raw value with its step and who recorded it (the controller's own: role, no rank)", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir, processName: "Actor" });
  await logger.initBackends({ jsonl: { loggingMode: "per_rank_no_reduce" } });
  for (const v of [0.5, NaN, -Infinity]) recordMetric("score", v, Reduce.MEAN);
  await logger.flush(0);
  // Recorded after flush(N): step N + 1.
  recordMetric("score", 4, Reduce.MEAN);
  await logger.flush(1);
  await logger.shutdown();
  const lines = readLines(join(runDir, "metrics-Actor.jsonl")).filter((l) => l["key"] === "score");
  assert.deepEqual(
    lines.map((l) => [
      parseNumber(l["value"]),
      l["step"],
      l["role"],
      "rank" in l,
      l["rankName"],
      typeof l["timestamp"],
    ]),
    [
      [0.5, 0, "controller", false, "Actor", "number"],
      [NaN, 0, "controller", false, "Actor", "number"],
      [-Infinity, 0, "controller", false, "Actor", "number"],
      [4, 1, "controller", false, "Actor", "number"],
    ],
  );
  assert.ok(
    lines.every((l) => !("reduce" in l)),
    "raw values have no reduction",
  );
});
