/**
 * The `jsonl` backend (src/backends/jsonl/index.ts): the files a user reads back — one JSON object
 * per line, where each mode puts its file, NaN and ±Infinity as strings that parse back, raw
 * stream records, samples and histograms.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { getCollector, getOrCreateMetricLogger, parseNumber, recordMetric, Reduce } from "../../../src/index.js";
import { tempDir } from "../../helpers.js";

const collector = getCollector();
afterEach(() => collector.clear());

/** The lines of a jsonl file, parsed. */
function readLines(file: string): Record<string, unknown>[] {
  return readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
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
  const lines = readFileSync(join(runDir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(lines.map((l) => l["key"]), ["floor", "grad_norm", "loss", "reward"]);
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

test("per-rank modes write metrics-{rankName}.jsonl, each line naming its rank", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir, processName: "Trainer" });
  await logger.initBackends({ jsonl: { loggingMode: "per_rank_reduce" } });
  recordMetric("loss", 1, Reduce.SUM);
  recordMetric("loss", 2, Reduce.SUM);
  await logger.flush(0);
  await logger.shutdown();
  const files = readdirSync(runDir).filter((name) => name.endsWith(".jsonl") && name.startsWith("metrics"));
  assert.deepEqual(files, ["metrics-Trainer.jsonl"], `files in the run folder: ${readdirSync(runDir).join(", ")}`);
  const [line, ...more] = readLines(join(runDir, "metrics-Trainer.jsonl")).filter((l) => l["key"] === "loss");
  assert.deepEqual(more, []);
  assert.deepEqual({ ...line, timestamp: 0 }, { key: "loss", value: 3, reduce: "sum", step: 0, timestamp: 0, rankName: "Trainer" });
});

test("the file option: a relative path is under the run folder, an absolute one is used as given", async () => {
  const runDir = tempDir();
  const elsewhere = join(tempDir(), "all.jsonl");
  const logger = new MetricLogger({ runDir });
  await logger.initBackends({ near: { type: "jsonl", loggingMode: "global_reduce", file: "mine.jsonl" }, far: { type: "jsonl", loggingMode: "global_reduce", file: elsewhere } });
  recordMetric("reward", 0.25);
  await logger.flush(2);
  await logger.shutdown();
  for (const file of [join(runDir, "mine.jsonl"), elsewhere]) {
    assert.deepEqual(readLines(file).filter((l) => l["key"] === "reward").map((l) => [l["value"], l["step"]]), [[0.25, 2]], file);
  }
});

test("per_rank_no_reduce writes every raw value with its step, rank and rank name", async () => {
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
    lines.map((l) => [parseNumber(l["value"]), l["step"], l["rank"], l["rankName"], typeof l["timestamp"]]),
    [
      [0.5, 0, 0, "Actor", "number"],
      [NaN, 0, 0, "Actor", "number"],
      [-Infinity, 0, 0, "Actor", "number"],
      [4, 1, 0, "Actor", "number"],
    ],
  );
  assert.ok(lines.every((l) => !("reduce" in l)), "raw values have no reduction");
});

test("samples and histograms: one line per key with its records or buckets", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  recordMetric("rollout", { prompt: "2+2", response: "4", reward: 1 }, Reduce.SAMPLE);
  for (const v of [1, 2, 3, 1000]) recordMetric("weights", v, Reduce.HISTOGRAM);
  await logger.flush(5);
  await logger.shutdown();
  const lines = readLines(join(runDir, "metrics.jsonl"));
  const samples = lines.filter((l) => "samples" in l);
  assert.deepEqual(samples.map((l) => [l["key"], l["samples"], l["step"]]), [["rollout", [{ prompt: "2+2", response: "4", reward: 1 }], 5]]);
  const histograms = lines.filter((l) => "histogram" in l);
  assert.deepEqual(histograms.map((l) => [l["key"], l["step"]]), [["weights", 5]]);
  const histogram: unknown = histograms[0]?.["histogram"];
  assert.ok(typeof histogram === "object" && histogram !== null, `a histogram line has its buckets: ${JSON.stringify(histograms[0])}`);
  const fields = new Map(Object.entries(histogram));
  assert.deepEqual(["count", "min", "max", "sum"].map((name) => fields.get(name)), [4, 1, 1000, 1006]);
  const bucketCounts = fields.get("bucketCounts");
  assert.ok(Array.isArray(bucketCounts), "bucketCounts is an array");
  assert.equal(bucketCounts.reduce((total: number, n: unknown) => total + Number(n), 0), 4, "every recorded value is in a bucket");
});
