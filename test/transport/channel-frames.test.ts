/**
 * Flush answers as wire frames over a rank's parent channel (a child's IPC, a worker's port):
 * the values logged are bit for bit those of JSON answers, for every reduction; and a rank that
 * forges frames gets nothing logged — each forgery is counted by kind, its flush fails at once
 * for that rank only, and the next flush is whole again.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { recordMetric, Reduce } from "../../src/index.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { ignoredMessageCounts, transportStats, type IgnoredKind } from "../../src/transport/protocol/messages.js";
import type { Forgery } from "../fixtures/forging-rank.js";
import { collectDiagnostics, tempDir } from "../helpers.js";

const EVERY_REDUCE_RANK = new URL("../fixtures/every-reduce-rank.ts", import.meta.url);
const FORGING_RANK = new URL("../fixtures/forging-rank.ts", import.meta.url);
const STEPS = 4;

interface Job {
  /** metrics.jsonl of the controller, timestamps left out. */
  readonly lines: readonly string[];
  /** Bytes the controller received per flush. */
  readonly bytesPerFlush: number;
}

/** A job of 4 ranks recording every reduction for `STEPS` flushes (the controller records too), logged to metrics.jsonl. */
async function runJob(kind: "process" | "thread", answers: "frames" | "json"): Promise<Job> {
  const runDir = tempDir();
  const logger = new MetricLogger({ processName: "Controller", runDir, flushDeadlineMs: 20_000 });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  // A bound of 20 keys per rank: each rank drops some `many/…` records, counted in every answer.
  const ranks = await spawnRanks({ module: EVERY_REDUCE_RANK, replicas: 2, ranksPerReplica: 2, kind, logger, answers, processName: "Every", env: { RANKSCOPE_MAX_KEYS: "20" } });
  let bytes = 0;
  try {
    for (let step = 0; step < STEPS; step++) {
      await ranks.fanout("recordAll", step);
      // The controller's own values merge in first, as before.
      recordMetric("all/sum", step + 0.1, Reduce.SUM);
      recordMetric("all/std", step * 0.3, Reduce.STD);
      const before = transportStats().bytesIn;
      const result = await logger.flush(step);
      bytes += transportStats().bytesIn - before;
      assert.deepEqual(result.missingRanks, [], `every rank answers flush(${step})`);
    }
  } finally {
    await logger.shutdown();
  }
  const text = readFileSync(join(runDir, "metrics.jsonl"), "utf8");
  return { lines: text.trim().split("\n").map((line) => line.replace(/"timestamp":\d+,?/, "")), bytesPerFlush: bytes / STEPS };
}

for (const kind of ["process", "thread"] as const) {
  test(`${kind} ranks answering in wire frames log the values JSON answers log, bit for bit, for every reduction`, async () => {
    const framed = await runJob(kind, "frames");
    const json = await runJob(kind, "json");
    assert.deepEqual(framed.lines, json.lines);
    const logged = framed.lines.join("\n");
    for (const key of ["all/mean", "all/sum", "all/max", "all/min", "all/std", "all/quantiles/p50", "all/quantiles_custom/p99.9", "all/histogram/mean", "special/max_inf", "special/mean_nan", "special/sum_negzero", "only/rank0", "rankscope/dropped_key_records"]) {
      assert.ok(logged.includes(`"key":"${key}"`), `${key} is logged`);
    }
    assert.match(logged, /"samples":/, "samples are logged");
    assert.match(logged, /100000000000000000001/, "a sample's bigint arrives exactly");
    // Frames did carry the answers: far fewer bytes than JSON.
    assert.ok(framed.bytesPerFlush < json.bytesPerFlush / 2, `frames ${framed.bytesPerFlush} B per flush vs JSON ${json.bytesPerFlush} B`);
  });
}

/** The rejections of `kind` the controller logged (its own `rankscope/rejected/{kind}`) in these flushes. */
function rejectedLogged(results: ReadonlyArray<{ metrics: ReadonlyArray<{ key: string; value: number }> }>, kind: IgnoredKind): number {
  return results.reduce((sum, r) => sum + (r.metrics.find((m) => m.key === `rankscope/rejected/${kind}`)?.value ?? 0), 0);
}

const FORGERIES: ReadonlyArray<[Forgery, IgnoredKind, "missing" | "answers"]> = [
  ["negativeM2", "invalidState", "missing"],
  ["badHistogram", "invalidState", "missing"],
  ["badReduceName", "invalidName", "missing"],
  ["truncated", "malformed", "missing"],
  ["keyFlood", "malformed", "missing"],
  ["garbage", "malformed", "answers"],
  ["otherRank", "foreign", "answers"],
];

for (const kind of ["process", "thread"] as const) {
  test(`${kind} ranks: forged flush-answer frames are counted by kind and never logged; the flush fails at once for that rank alone, the next is whole`, async () => {
    const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), flushDeadlineMs: 20_000 });
    const before = process.env["RANKSCOPE_MAX_KEYS"];
    // The controller holds at most 100 keys of a rank's table (the key flood defines 200).
    process.env["RANKSCOPE_MAX_KEYS"] = "100";
    await collectDiagnostics(async () => {
      await logger.initBackends({});
      let ranks;
      try {
        ranks = await spawnRanks({ module: FORGING_RANK, ranksPerReplica: 2, kind, logger, processName: "Forger" });
      } finally {
        if (before === undefined) delete process.env["RANKSCOPE_MAX_KEYS"];
        else process.env["RANKSCOPE_MAX_KEYS"] = before;
      }
      const [forger, honest] = ranks.rankNames as [string, string];
      let step = 0;
      try {
        for (const [forgery, rejection, effect] of FORGERIES) {
          const counted = ignoredMessageCounts()[rejection];
          await ranks.fanout("record", 1);
          await ranks.call(forger, "arm", forgery);
          const started = Date.now();
          const forged = await logger.flush(step++);
          assert.ok(Date.now() - started < 15_000, `${forgery}: the flush does not wait for the deadline`);
          assert.equal(ignoredMessageCounts()[rejection], counted + 1, `${forgery} is counted once as ${rejection}`);
          const logged = forged.metrics.filter((m) => m.key.startsWith("evil/"));
          assert.deepEqual(logged, [], `${forgery}: nothing forged is logged`);
          const honestSum = forged.metrics.find((m) => m.key === "honest/sum")?.value;
          if (effect === "missing") {
            assert.deepEqual(forged.missingRanks, [forger], `${forgery}: the forger's answer is refused`);
            assert.equal(honestSum, 1, `${forgery}: the honest rank's value alone`);
          } else {
            assert.deepEqual(forged.missingRanks, [], `${forgery}: ignored; the genuine answer is used`);
            assert.equal(honestSum, 2, `${forgery}: both ranks' genuine values`);
          }
          await ranks.fanout("record", 1);
          const next = await logger.flush(step++);
          assert.deepEqual(next.missingRanks, [], `${forgery}: the next flush is whole`);
          assert.equal(next.metrics.find((m) => m.key === "honest/sum")?.value, 2, `${forgery}: the next flush logs both ranks`);
          assert.equal(rejectedLogged([forged, next], rejection), 1, `${forgery}: logged as rankscope/rejected/${rejection}`);
        }
      } finally {
        await logger.shutdown();
      }
    });
  });
}
