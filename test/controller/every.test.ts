import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, test } from "node:test";
import { getCollector, recordMetric } from "../../src/core/collector.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { tempDir } from "../helpers.js";

afterEach(() => getCollector().clear());

interface Line {
  key: string;
  value: number;
  step: number;
  rankName?: string;
}

function read(path: string): Line[] {
  return readFileSync(path, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Line);
}

function byStep(lines: Line[]): Map<number, Record<string, number>> {
  const out = new Map<number, Record<string, number>>();
  for (const l of lines) {
    const row = out.get(l.step) ?? {};
    row[l.key] = l.value;
    out.set(l.step, row);
  }
  return out;
}

test("every: 3 logs every third flush with the skipped flushes merged in, equal to per-step logging of the same values", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir });
  await logger.initBackends({
    perStep: { type: "jsonl", loggingMode: "global_reduce", file: "per-step.jsonl" },
    sparse: { type: "jsonl", loggingMode: "global_reduce", file: "every3.jsonl", every: 3 },
    rankSparse: { type: "jsonl", loggingMode: "per_rank_reduce", file: "rank-every2.jsonl", every: 2 },
  });
  const raw: number[][] = [];
  for (let step = 0; step < 7; step++) {
    const values = Array.from({ length: step + 2 }, (_, i) => (step * 7 + i * 3) % 11);
    raw.push(values);
    for (const v of values) {
      recordMetric("loss", v, "mean");
      recordMetric("tokens", v, "sum");
      recordMetric("peak", v, "max");
    }
    await logger.flush(step);
  }
  await logger.shutdown();

  const perStep = byStep(read(join(runDir, "per-step.jsonl")));
  assert.deepEqual([...perStep.keys()], [0, 1, 2, 3, 4, 5, 6]);
  const sparse = byStep(read(join(runDir, "every3.jsonl")));
  assert.deepEqual([...sparse.keys()], [2, 5, 6], "logged at the 3rd and 6th flush, and the rest at shutdown");

  for (const [logged, covered] of [[2, [0, 1, 2]], [5, [3, 4, 5]], [6, [6]]] as const) {
    const row = sparse.get(logged) as Record<string, number>;
    const perStepRows = covered.map((s) => perStep.get(s) as Record<string, number>);
    const all = covered.flatMap((s) => raw[s] as number[]);
    assert.equal(row["tokens"], perStepRows.reduce((s, r) => s + (r["tokens"] as number), 0), `sum at ${logged}`);
    assert.equal(row["peak"], Math.max(...perStepRows.map((r) => r["peak"] as number)), `max at ${logged}`);
    assert.ok(Math.abs((row["loss"] as number) - all.reduce((s, v) => s + v, 0) / all.length) < 1e-12, `mean at ${logged}`);
  }

  const rank = byStep(read(join(runDir, "rank-every2.jsonl")));
  assert.deepEqual([...rank.keys()], [1, 3, 5, 6], "per-rank mode: every second flush, the rest at shutdown");
  assert.equal(rank.get(1)?.["tokens"], (perStep.get(0)?.["tokens"] as number) + (perStep.get(1)?.["tokens"] as number));
});
