/**
 * per_rank_no_reduce backends get their raw values through the stream ring (own file: it captures
 * stdout, which must not swallow other tests' reports).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  getOrCreateMetricLogger,
  recordMetric,
  Reduce,
  registerBackend,
  streamStats,
  type StreamRecord,
} from "../../src/index.js";
import { getCollector } from "../../src/core/collector.js";
import { captureStdout, tempDir } from "../helpers.js";
import { readStream } from "./helpers.js";

describe("per_rank_no_reduce backends", () => {
  it("receive every raw value through the ring; console prints stream lines and the file has them", async () => {
    const runDir = tempDir();
    const collector = getCollector();
    collector.clear();
    const out = await captureStdout(async () => {
      const logger = await getOrCreateMetricLogger({ runDir, processName: "Trainer" });
      await logger.initBackends({
        console: { loggingMode: "per_rank_no_reduce" },
        jsonl: { loggingMode: "global_reduce" },
      });
      assert.ok(streamStats().running, "a per_rank_no_reduce backend starts the stream");
      for (let i = 0; i < 3; i++) recordMetric("loss", i / 2, Reduce.MEAN);
      recordMetric("reward", 7, Reduce.SUM);
      const result = await logger.flush(0);
      assert.equal(
        result.metrics.find((m) => m.key === "rankscope/stream_dropped")?.value,
        0,
        "the drop count is reported at each flush",
      );
      recordMetric("loss", 2, Reduce.MEAN);
      await logger.flush(1);
      await logger.shutdown();
    });
    // Under `--test` the runner's own events share stdout, so pick the stream lines out by shape.
    // The controller's own raw values: never shown as rank 0's.
    const streamLines = out.match(/\[controller\] \[Trainer\] [\d-]+ [\d:]+ INFO [^\n]*/g) ?? [];
    assert.deepEqual(
      streamLines.map((l) => l.replace(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/, "TIME")),
      [
        "[controller] [Trainer] TIME INFO loss: 0",
        "[controller] [Trainer] TIME INFO loss: 0.5",
        "[controller] [Trainer] TIME INFO loss: 1",
        "[controller] [Trainer] TIME INFO reward: 7",
        "[controller] [Trainer] TIME INFO loss: 2",
      ],
    );
    const { records, ends } = readStream(join(runDir, "streams", "controller.jsonl"));
    assert.deepEqual(
      records.map((r) => [r["key"], r["value"], r["step"]]),
      [
        ["loss", 0, 0],
        ["loss", 0.5, 0],
        ["loss", 1, 0],
        ["reward", 7, 0],
        ["loss", 2, 1],
      ],
    );
    assert.equal(ends[0]?.["written"], 5);
    assert.equal(streamStats().running, false, "shutdown stops the stream it started");
    const global = readFileSync(join(runDir, "metrics.jsonl"), "utf8");
    assert.match(global, /"key":"rankscope\/stream_dropped","value":0,"reduce":"sum","step":1/);
  });
});

describe("a main thread too busy for logStream backends", () => {
  it("gets every record or counts it as backendDropped, while the file gets them all", async () => {
    const runDir = tempDir();
    const collector = getCollector();
    collector.clear();
    let delivered = 0;
    registerBackend("counting", () => ({
      logBatch() {},
      logStream(batch: readonly StreamRecord[]) {
        delivered += batch.length;
      },
    }));
    // A ring that holds everything, and a writer that wakes for every record: many small batches.
    process.env["RANKSCOPE_STREAM_CAPACITY"] = String(1 << 18);
    process.env["RANKSCOPE_STREAM_BATCH"] = "1";
    const logger = await getOrCreateMetricLogger({ runDir, processName: "Busy" });
    await logger.initBackends({ counting: { loggingMode: "per_rank_no_reduce" } });
    delete process.env["RANKSCOPE_STREAM_CAPACITY"];
    delete process.env["RANKSCOPE_STREAM_BATCH"];
    // A loop with some work per record that never yields: the writer's batches pile up on the
    // main thread's port until the bound, then are counted instead.
    const N = 50_000;
    let sink = 0;
    for (let i = 0; i < N; i++) {
      for (let k = 0; k < 1000; k++) sink = (sink * 1.000001 + k) % 1e9;
      recordMetric("busy", i, Reduce.SUM);
    }
    assert.ok(Number.isFinite(sink));
    await logger.flush(0);
    await logger.shutdown();
    const { records, ends } = readStream(join(runDir, "streams", "controller.jsonl"));
    const end = ends[0] ?? {};
    assert.equal(records.length, end["written"]);
    assert.equal(
      (end["written"] as number) + (end["ringFull"] as number),
      N,
      "every record is written or counted at the ring",
    );
    assert.equal(
      delivered + (end["backendDropped"] as number),
      end["written"],
      "the backend got every written record or it was counted",
    );
    assert.ok((end["backendDropped"] as number) > 0, "the bound on batches in flight was reached");
    assert.ok(delivered > 0);
  });
});
