/**
 * A rank's dropped-key count (issue 20, item 21): values dropped past a process's key bound
 * (`RANKSCOPE_MAX_KEYS`) reach the controller in every answer; it logs them as the internal key
 * `rankscope/dropped_key_records` (each rank's count since it started, summed) and warns once,
 * naming the ranks. Real rank processes with a bound of 3 keys.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { DROPPED_KEY_RECORDS_KEY, MetricLogger } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { collectDiagnostics, tempDir } from "../helpers.js";

const RANK_MODULE = new URL("../fixtures/sum-rank.ts", import.meta.url);

test(
  "ranks' dropped-key counts are logged as rankscope/dropped_key_records and warned about once on the controller",
  { timeout: 120_000 },
  async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, processName: "Ctl", flushDeadlineMs: 20_000, quiet: true });
    const dropped: (number | undefined)[] = [];
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
      const group = await spawnRanks({
        module: RANK_MODULE,
        ranksPerReplica: 2,
        processName: "Keys",
        logger,
        env: { RANKSCOPE_MAX_KEYS: "3" },
      });
      // 5 keys on each rank, of which 2 are past the bound: 2 values dropped per rank.
      for (let k = 0; k < 5; k++) await group.fanout("record", `k${k}`, 1, "sum");
      dropped.push((await logger.flush(0)).metrics.find((m) => m.key === DROPPED_KEY_RECORDS_KEY)?.value);
      // The same new keys again on rank 0 only: its count grows, rank 1's stays.
      await group.call(group.rankNames[0] ?? "", "record", "k4", 1, "sum");
      dropped.push((await logger.flush(1)).metrics.find((m) => m.key === DROPPED_KEY_RECORDS_KEY)?.value);
      await logger.shutdown();
    });
    assert.deepEqual(dropped, [4, 5], "each rank's count since it started, summed over the ranks");
    const warnings = seen.filter((d) => d.code === "flush.droppedKeys");
    assert.equal(warnings.length, 2, "counted at every flush with drops");
    assert.equal(warnings[0]?.count, 1);
    assert.match(
      warnings[0]?.message ?? "",
      /^flush\(0\): 4 recorded value\(s\) were dropped because their key was new past a process's key bound \(RANKSCOPE_MAX_KEYS\): Keys_\w{4}_r0 \(2\), Keys_\w{4}_r1 \(2\); logged as rankscope\/dropped_key_records/,
    );
    const logged = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.includes(DROPPED_KEY_RECORDS_KEY))
      .map((l) => (JSON.parse(l) as { value: number }).value);
    assert.deepEqual(logged, [4, 5]);
  },
);
