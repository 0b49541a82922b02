// The jsonl backend as a user reads its file: one JSON object per line, the fields docs/jsonl.md
// lists for each kind of line, NaN kept as "NaN", one file per rank in a per-rank mode.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import {
  getOrCreateMetricLogger,
  isInternalKey,
  parseNumber,
  recordMetric,
  Reduce,
  stats,
} from "../../../src/index.js";
import { getCollector } from "../../../src/core/collector.js";
import { REPO_ROOT, tempDir } from "../../helpers.js";

const collector = getCollector();
const dirs: string[] = [];
const runDir = (): string => {
  const dir = tempDir("rankscope-jsonl-");
  dirs.push(dir);
  return dir;
};
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function lines(file: string): Record<string, unknown>[] {
  const text = readFileSync(file, "utf8");
  assert.ok(text.endsWith("\n"), `${file} ends with a newline`);
  return text
    .trimEnd()
    .split("\n")
    .map((line) => {
      const value: unknown = JSON.parse(line);
      assert.ok(
        value !== null && typeof value === "object" && !Array.isArray(value),
        `a line is a JSON object: ${line}`,
      );
      return { ...value };
    });
}

test('global_reduce: metrics.jsonl holds one line per reduced value, NaN as "NaN", samples and histograms as their own lines', async () => {
  collector.clear();
  const dir = runDir();
  const logger = await getOrCreateMetricLogger({ runDir: dir, quiet: true });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  recordMetric("loss", 0.5, Reduce.MEAN);
  recordMetric("loss", 1.5, Reduce.MEAN);
  recordMetric("tokens", 3, Reduce.SUM);
  await logger.flush(0);
  recordMetric("loss", NaN, Reduce.MEAN);
  recordMetric("rollout", { prompt: "2+2", reward: 1 }, Reduce.SAMPLE);
  for (const v of [1, 2, 4]) recordMetric("latency", v, Reduce.HISTOGRAM);
  await logger.flush(1);
  await logger.shutdown();

  const all = lines(join(dir, "metrics.jsonl"));
  const scalars = all.filter((l) => "value" in l);
  assert.deepEqual(
    scalars.map(({ key, value, reduce, step }) => ({ key, value, reduce, step })),
    [
      { key: "loss", value: 1, reduce: "mean", step: 0 },
      { key: "tokens", value: 3, reduce: "sum", step: 0 },
      { key: "latency/count", value: 3, reduce: "histogram", step: 1 },
      { key: "latency/max", value: 4, reduce: "histogram", step: 1 },
      { key: "latency/mean", value: 7 / 3, reduce: "histogram", step: 1 },
      { key: "latency/min", value: 1, reduce: "histogram", step: 1 },
      { key: "loss", value: "NaN", reduce: "mean", step: 1 },
    ],
    "one line per value, sorted by key within a flush (a histogram's summary values included)",
  );
  for (const line of scalars) {
    assert.deepEqual(
      Object.keys(line),
      ["key", "value", "reduce", "step", "timestamp"],
      "a reduced value's fields, in order",
    );
    assert.equal(typeof line["timestamp"], "number");
  }
  assert.ok(Number.isNaN(parseNumber(scalars.at(-1)?.["value"])), "parseNumber reads the NaN back");
  assert.ok(
    !all.some((l) => typeof l["key"] === "string" && isInternalKey(l["key"])),
    "a job without ranks writes no rankscope/ keys",
  );

  const sample = all.find((l) => l["key"] === "rollout");
  assert.deepEqual(sample && { samples: sample["samples"], step: sample["step"] }, {
    samples: [{ prompt: "2+2", reward: 1 }],
    step: 1,
  });
  const histogram = all.find((l) => l["key"] === "latency");
  const data = histogram?.["histogram"];
  assert.ok(data !== null && typeof data === "object", "the histogram line carries its buckets");
  assert.deepEqual(
    { ...data, bucketLimits: undefined, bucketCounts: undefined },
    { count: 3, min: 1, max: 4, sum: 7, sumSquares: 21, bucketLimits: undefined, bucketCounts: undefined },
  );
});

test("per_rank_reduce: each rank writes metrics-{rankName}.jsonl with its rankName on every line; `file` names the file", async () => {
  collector.clear();
  const dir = runDir();
  const logger = await getOrCreateMetricLogger({ runDir: dir, quiet: true, processName: "Trainer" });
  await logger.initBackends({
    jsonl: { loggingMode: "per_rank_reduce" },
    named: { type: "jsonl", loggingMode: "global_reduce", file: "custom/all.jsonl" },
  });
  recordMetric("reward", 2, Reduce.MAX);
  await logger.flush(5);
  await logger.shutdown();
  assert.deepEqual(
    lines(join(dir, "metrics-Trainer.jsonl")).map(({ key, value, step, rankName }) => ({ key, value, step, rankName })),
    [{ key: "reward", value: 2, step: 5, rankName: "Trainer" }],
  );
  assert.deepEqual(
    lines(join(dir, "custom", "all.jsonl")).map(({ key, value, step }) => ({ key, value, step })),
    [{ key: "reward", value: 2, step: 5 }],
  );
  assert.ok(!existsSync(join(dir, "metrics.jsonl")), "no default file when every jsonl backend is named or per rank");
});

test("an unknown jsonl option is a TypeError naming it and the valid ones", async () => {
  const logger = await getOrCreateMetricLogger({ runDir: runDir(), quiet: true });
  // From JavaScript or a config file: TypeScript rejects this config already (BackendOptionsMap).
  const unchecked = { jsonl: { loggingMode: "global_reduce", path: "x.jsonl" } };
  await assert.rejects(
    logger.initBackends(
      // @ts-expect-error -- not a valid option of this backend
      unchecked,
    ),
    (error: unknown) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /backend "jsonl": unknown option "path"; valid: .*\bfile\b/);
      return true;
    },
  );
  await logger.shutdown();
});

test("a jsonl file option that is not a path is a TypeError saying what is valid, before anything starts", async () => {
  for (const file of [42, "", "  ", null, { path: "x" }]) {
    const dir = runDir();
    const logger = await getOrCreateMetricLogger({ runDir: dir, quiet: true });
    // From JavaScript or a config file: TypeScript rejects these already (BackendOptionsMap).
    const unchecked = { jsonl: { loggingMode: "global_reduce", file } };
    await assert.rejects(
      logger.initBackends(
        // @ts-expect-error -- not a valid value of this option
        unchecked,
      ),
      (error: unknown) => {
        assert.ok(error instanceof TypeError, `file: ${JSON.stringify(file)}`);
        assert.match(
          error.message,
          /backend "jsonl": file must be a non-empty path \(relative to the run directory, or absolute\), e\.g\. "metrics\.jsonl", got /,
        );
        return true;
      },
    );
    await logger.shutdown();
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.endsWith(".jsonl")),
      [],
      "no file was written",
    );
  }
});

test("docs/jsonl.md's example lines are what the backend writes for the records the page names (timestamps aside)", async () => {
  const page = readFileSync(join(REPO_ROOT, "docs", "jsonl.md"), "utf8");
  const block = /```json\n([\s\S]*?)```/.exec(page);
  assert.ok(block !== null, "docs/jsonl.md has a json example");
  assert.match(
    page,
    /recordMetric\("loss", 0\.25, Reduce\.MEAN\)` and two `stats\.get\("rollout"\)\.scalar\(\{ reward \}\)`/,
  );
  const withoutTime = (line: string): unknown => ({ ...JSON.parse(line), timestamp: 0 });
  collector.clear();
  const dir = runDir();
  const logger = await getOrCreateMetricLogger({ runDir: dir, quiet: true });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  recordMetric("loss", 0.25, Reduce.MEAN);
  stats.get("rollout").scalar({ reward: 0.5 });
  stats.get("rollout").scalar({ reward: 1.0 });
  await logger.flush(3);
  await logger.shutdown();
  const written = readFileSync(join(dir, "metrics.jsonl"), "utf8").trimEnd().split("\n");
  assert.deepEqual(written.map(withoutTime), (block[1] ?? "").trimEnd().split("\n").map(withoutTime));
});
