/**
 * The controller and a rank 0 in a worker thread of the same process both trace: each is its own
 * process in the merged trace, with its own pid and name.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { getOrCreateMetricLogger } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/index.js";
import { mergeTraces } from "../../src/trace/merge.js";
import { savePerfTracer, traceScope } from "../../src/trace/perf-tracer.js";
import { CONTROLLER_TRACE_PID } from "../../src/trace/rank-file.js";
import type { TraceEvent } from "../../src/trace/trace-events.js";
import { tempDir } from "../helpers.js";

describe("trace processes by role", () => {
  it("a controller and a worker-thread rank 0 get distinct pids, each with its own process_name", async () => {
    const runDir = tempDir();
    const logger = await getOrCreateMetricLogger({ runDir, processName: "Controller" });
    await logger.initBackends({});
    const ranks = await spawnRanks({
      module: new URL("./fixtures/trace-rank.ts", import.meta.url),
      kind: "thread",
      processName: "Trainer",
      logger,
    });
    try {
      traceScope("controller.step", { category: "scheduler" }, () => {});
      await savePerfTracer();
      await ranks.fanout("traceStep", "rank.step");
    } finally {
      await logger.shutdown();
    }
    assert.ok(existsSync(join(runDir, "traces", "controller.jsonl")), "the controller writes traces/controller.jsonl");
    assert.ok(existsSync(join(runDir, "traces", "rank-0.jsonl")), "rank 0 writes traces/rank-0.jsonl");
    const merged = JSON.parse(readFileSync((await mergeTraces(runDir)).out, "utf8")) as {
      traceEvents: TraceEvent[];
      otherData: { ranks: number[] };
    };
    const names = merged.traceEvents.filter((e) => e.name === "process_name");
    assert.deepEqual(
      names.map((e) => [e.pid, e.args!["name"]]).sort((a, b) => Number(a[0]) - Number(b[0])),
      [
        [0, "[Trainer] Rank 0"],
        [CONTROLLER_TRACE_PID, "[Controller] Controller"],
      ],
      "one process_name per pid",
    );
    const pidOf = (name: string): number => merged.traceEvents.find((e) => e.name === name)!.pid;
    assert.equal(pidOf("controller.step"), CONTROLLER_TRACE_PID);
    assert.equal(pidOf("rank.step"), 0);
    assert.deepEqual(merged.otherData.ranks, [0]);
  });
});
