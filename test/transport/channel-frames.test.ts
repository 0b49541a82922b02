/**
 * Flush answers as wire frames over a rank's parent channel (a child's IPC, a worker's port):
 * the values logged are bit for bit those of JSON answers, for every reduction; and a rank that
 * forges frames gets nothing logged — each forgery is counted by kind, its flush fails at once
 * for that rank only, and the next flush is whole again. The bit-for-bit jobs run on the built
 * package (fixtures/built/), their ranks without tsx; the forging ranks need the sources' codec.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { MetricLogger, type FlushResult } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import * as built from "../fixtures/built/index.mjs";
import { ignoredMessageCounts, transportStats, type IgnoredKind } from "../../src/transport/protocol/messages.js";
import type { Forgery } from "../fixtures/forging-rank.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";

const EVERY_REDUCE_RANK = new URL("../fixtures/built/every-reduce-rank.mjs", import.meta.url);
const FORGING_RANK = new URL("../fixtures/forging-rank.ts", import.meta.url);
const STEPS = 4;

interface Job {
  /** metrics.jsonl of the controller, timestamps left out. */
  readonly lines: readonly string[];
  /** Bytes the controller received at the last flush (arithmetic keys only). */
  readonly arithmeticBytes: number;
}

/** A job of 4 ranks recording every reduction for `STEPS` flushes (the controller records too), logged to metrics.jsonl. */
async function runJob(kind: "process" | "thread", answers: "frames" | "json"): Promise<Job> {
  const runDir = tempDir();
  const logger = new built.MetricLogger({ processName: "Controller", runDir, flushDeadlineMs: 20_000 });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  // A bound of 20 keys per rank: each rank drops some `many/…` records, counted in every answer.
  const ranks = await built.spawnRanks({
    module: EVERY_REDUCE_RANK,
    replicas: 2,
    ranksPerReplica: 2,
    kind,
    logger,
    answers,
    processName: "Every",
    env: { RANKSCOPE_MAX_KEYS: "20" },
  });
  let bytes: number;
  try {
    for (let step = 0; step < STEPS; step++) {
      await ranks.fanout("recordAll", step);
      // The controller's own values merge in first, as before.
      built.recordMetric("all/sum", step + 0.1, built.Reduce.SUM);
      built.recordMetric("all/std", step * 0.3, built.Reduce.STD);
      const result = await logger.flush(step);
      assert.deepEqual(result.missingRanks, [], `every rank answers flush(${step})`);
    }
    // A flush of the arithmetic keys alone: its bytes show which format carried the answers.
    await ranks.fanout("recordArithmetic", STEPS);
    const before = transportStats().bytesIn;
    await logger.flush(STEPS);
    bytes = transportStats().bytesIn - before;
  } finally {
    await logger.shutdown();
  }
  const text = readFileSync(join(runDir, "metrics.jsonl"), "utf8");
  return {
    lines: text
      .trim()
      .split("\n")
      .map((line) => line.replace(/"timestamp":\d+,?/, "")),
    arithmeticBytes: bytes,
  };
}

for (const kind of ["process", "thread"] as const) {
  test(`${kind} ranks answering in wire frames log the values JSON answers log, bit for bit, for every reduction`, async () => {
    const framed = await runJob(kind, "frames");
    const json = await runJob(kind, "json");
    assert.deepEqual(framed.lines, json.lines);
    const logged = framed.lines.join("\n");
    for (const key of [
      "all/mean",
      "all/sum",
      "all/max",
      "all/min",
      "all/std",
      "all/quantiles/p50",
      "all/quantiles_custom/p99.9",
      "all/histogram/mean",
      "special/max_inf",
      "special/mean_nan",
      "special/sum_negzero",
      "only/rank0",
      "rankscope/dropped_key_records",
    ]) {
      assert.ok(logged.includes(`"key":"${key}"`), `${key} is logged`);
    }
    assert.match(logged, /"samples":/, "samples are logged");
    assert.match(logged, /100000000000000000001/, "a sample's bigint arrives exactly");
    // Frames did carry the answers: far fewer bytes than JSON.
    assert.ok(
      framed.arithmeticBytes < json.arithmeticBytes / 2,
      `frames ${framed.arithmeticBytes} B vs JSON ${json.arithmeticBytes} B for the arithmetic keys`,
    );
  });
}

/** The rejections of `kind` the controller logged (its own `rankscope/rejected/{kind}`) in these flushes. */
function rejectedLogged(
  results: ReadonlyArray<{ metrics: ReadonlyArray<{ key: string; value: number }> }>,
  kind: IgnoredKind,
): number {
  return results.reduce(
    (sum, r) => sum + (r.metrics.find((m) => m.key === `rankscope/rejected/${kind}`)?.value ?? 0),
    0,
  );
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
      /** honest/sum logged over every flush: each rank's genuine values once, nothing forged. */
      let logged = 0;
      const flush = async (): Promise<FlushResult> => {
        const result = await logger.flush(step++);
        logged += result.metrics.find((m) => m.key === "honest/sum")?.value ?? 0;
        assert.deepEqual(
          result.metrics.filter((m) => m.key.startsWith("evil/")),
          [],
          "nothing forged is logged",
        );
        return result;
      };
      try {
        // A genuine first answer: a gap in the answer numbers shows only after one was seen.
        await ranks.fanout("record", 1);
        assert.deepEqual((await flush()).missingRanks, []);
        for (const [forgery, rejection, effect] of FORGERIES) {
          const counted = ignoredMessageCounts()[rejection];
          await ranks.fanout("record", 1);
          await ranks.call(forger, "arm", forgery);
          const started = Date.now();
          const forged = await flush();
          assert.ok(Date.now() - started < 15_000, `${forgery}: the flush does not wait for the deadline`);
          assert.equal(ignoredMessageCounts()[rejection], counted + 1, `${forgery} is counted once as ${rejection}`);
          const honestSum = forged.metrics.find((m) => m.key === "honest/sum")?.value ?? 0;
          if (effect === "missing") {
            assert.deepEqual(forged.missingRanks, [forger], `${forgery}: the forger's answer is refused`);
            assert.ok(honestSum < 2, `${forgery}: the forger's value of this flush is not in it (${honestSum})`);
          } else {
            assert.deepEqual(forged.missingRanks, [], `${forgery}: ignored; the genuine answer is used`);
            assert.ok(honestSum >= 2, `${forgery}: both ranks' genuine values (${honestSum})`);
          }
          await ranks.fanout("record", 1);
          const next = await flush();
          assert.deepEqual(next.missingRanks, [], `${forgery}: the next flush is whole`);
          assert.equal(
            rejectedLogged([forged, next], rejection),
            1,
            `${forgery}: logged as rankscope/rejected/${rejection}`,
          );
        }
        // The forger's genuine answers that a forgery displaced are sent again (a gap in its answer
        // numbers) and logged later: every genuine value exactly once, in the end.
        const recorded = 2 + 2 * 2 * FORGERIES.length;
        await waitFor(async () => (await flush(), logged >= recorded), {
          timeoutMs: 20_000,
          what: "every genuine value to be logged",
        });
        assert.equal(logged, recorded, `${honest} and ${forger}'s genuine values, each once`);
      } finally {
        await logger.shutdown();
      }
    });
  });
}
