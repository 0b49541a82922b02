import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, test } from "node:test";
import { getCollector, recordMetric } from "../../src/core/collector.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { registerReduce } from "../../src/core/registry.js";
import { tempDir } from "../helpers.js";

afterEach(() => getCollector().clear());

interface Line {
  key: string;
  value: number;
  step: number;
  rankName?: string;
}

function read(path: string): Line[] {
  return readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Line);
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

  for (const [logged, covered] of [
    [2, [0, 1, 2]],
    [5, [3, 4, 5]],
    [6, [6]],
  ] as const) {
    const row = sparse.get(logged) as Record<string, number>;
    const perStepRows = covered.map((s) => perStep.get(s) as Record<string, number>);
    const all = covered.flatMap((s) => raw[s] as number[]);
    assert.equal(
      row["tokens"],
      perStepRows.reduce((s, r) => s + (r["tokens"] as number), 0),
      `sum at ${logged}`,
    );
    assert.equal(row["peak"], Math.max(...perStepRows.map((r) => r["peak"] as number)), `max at ${logged}`);
    assert.ok(
      Math.abs((row["loss"] as number) - all.reduce((s, v) => s + v, 0) / all.length) < 1e-12,
      `mean at ${logged}`,
    );
  }

  const rank = byStep(read(join(runDir, "rank-every2.jsonl")));
  assert.deepEqual([...rank.keys()], [1, 3, 5, 6], "per-rank mode: every second flush, the rest at shutdown");
  assert.equal(
    rank.get(1)?.["tokens"],
    (perStep.get(0)?.["tokens"] as number) + (perStep.get(1)?.["tokens"] as number),
  );
});

// The counting reduction below, declared so recordMetric takes numbers for it.
declare module "../../src/core/reduce.js" {
  interface RegisteredReduces {
    every_counted_sum: true;
  }
}

test("backends with the same every: N get one reduction of their kept flushes, identical to what one such backend gets", async () => {
  let values = 0;
  registerReduce("every_counted_sum", {
    create: () => {
      let sum = 0;
      let count = 0;
      return {
        get count() {
          return count;
        },
        append: (v: number) => {
          sum += v;
          count++;
        },
        value: () => sum,
        state: () => ({ v: 1, count, sum }),
        reset: () => {
          sum = 0;
          count = 0;
        },
      };
    },
    merge: (states) => ({
      v: 1,
      count: states.reduce((n, s) => n + s.count, 0),
      sum: states.reduce((n, s) => n + ("sum" in s && typeof s.sum === "number" ? s.sum : 0), 0),
    }),
    value: (state) => {
      values++;
      return "sum" in state && typeof state.sum === "number" ? state.sum : 0;
    },
  });
  /** Five flushes to `backends` jsonl files with every: 2; the reductions made and each file's text. */
  const run = async (names: readonly string[]): Promise<{ values: number; files: string[] }> => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir });
    await logger.initBackends(
      Object.fromEntries(
        names.map((name) => [name, { type: "jsonl", loggingMode: "global_reduce", file: `${name}.jsonl`, every: 2 }]),
      ),
    );
    values = 0;
    for (let step = 0; step < 5; step++) {
      recordMetric("tokens", step * 3 + 1, "every_counted_sum");
      recordMetric("tokens", 0.1 * step, "every_counted_sum");
      await logger.flush(step);
    }
    await logger.shutdown();
    getCollector().clear();
    return {
      values,
      files: names.map((name) => readFileSync(join(runDir, `${name}.jsonl`), "utf8").replace(/"timestamp":\d+/g, "")),
    };
  };
  const one = await run(["a"]);
  const three = await run(["a", "b", "c"]);
  assert.equal(three.values, one.values, "three backends with every: 2 cost the reductions of one");
  const [a, b, c] = three.files;
  assert.ok((a ?? "").includes('"step":1'), `the first kept pair is logged at step 1: ${a ?? ""}`);
  assert.equal(b, a);
  assert.equal(c, a);
  assert.equal(a, one.files[0], "the same lines as a single such backend writes");
});
