// The console backend as a user sees it on stdout: AReaL's grid when asked, rankscope's own keys
// only when they say something, and a clear error for a bad option.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { getOrCreateMetricLogger, recordMetric, Reduce, type RankHandle } from "../../../src/index.js";
import { getCollector } from "../../../src/core/collector.js";
import { tempDir } from "../../helpers.js";

const collector = getCollector();
const dirs: string[] = [];
const runDir = (): string => {
  const dir = tempDir("rankscope-console-");
  dirs.push(dir);
  return dir;
};
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * What the console backend printed during `fn` (its tables). Anything else written to stdout
 * meanwhile (the test runner reports on the same stdout while a flush waits out a missing rank)
 * goes through to the real stdout, untouched.
 */
async function consoleTables(fn: () => unknown): Promise<string> {
  const original = process.stdout.write;
  let out = "";
  process.stdout.write = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]): boolean {
    if (typeof chunk === "string" && chunk.startsWith("=== [")) {
      out += chunk;
      return true;
    }
    return Reflect.apply(original, this, [chunk, ...rest]) === true;
  };
  try {
    await fn();
  } finally {
    process.stdout.write = original;
  }
  return out;
}

test('layout "grid" prints AReaL\'s box table, pairsPerRow pairs per row, values in .4e', async () => {
  collector.clear();
  const logger = await getOrCreateMetricLogger({ runDir: runDir(), quiet: true });
  await logger.initBackends({ console: { loggingMode: "global_reduce", layout: "grid", pairsPerRow: 2 } });
  recordMetric("loss", 0.25, Reduce.MEAN);
  recordMetric("reward", 1, Reduce.MEAN);
  recordMetric("kl", NaN, Reduce.MEAN);
  const out = await consoleTables(() => logger.flush(7));
  await logger.shutdown();
  assert.equal(
    out,
    [
      "=== [GlobalReduce] - METRICS STEP 7 ===",
      "╒══════╤════════════╤════════╤════════════╕",
      "│ kl   │        nan │ reward │ 1.0000e+00 │",
      "├──────┼────────────┼────────┼────────────┤",
      "│ loss │ 2.5000e-01 │        │            │",
      "╘══════╧════════════╧════════╧════════════╛",
      "",
    ].join("\n"),
  );
});

test("rankscope's rank counts appear only at a step where a rank did not answer", async () => {
  collector.clear();
  const logger = await getOrCreateMetricLogger({ runDir: runDir(), quiet: true, flushDeadlineMs: 200 });
  await logger.initBackends({ console: { loggingMode: "global_reduce" } });
  let answering = true;
  // A rank reached through a handle, as a transport registers it; it stops answering after step 0.
  const rank: RankHandle = {
    rankName: "Trainer_0000_r0",
    init: async () => undefined,
    flush: (step) =>
      answering
        ? Promise.resolve({ rankName: "Trainer_0000_r0", step, states: [], droppedKeyRecords: 0 })
        : new Promise(() => undefined),
    shutdown: async () => undefined,
  };
  await logger.registerRank(rank);
  recordMetric("loss", 1, Reduce.MEAN);
  const healthy = await consoleTables(() => logger.flush(0));
  assert.equal(healthy, ["=== [GlobalReduce] - METRICS STEP 0 ===", "loss: 1.0", "===============", ""].join("\n"));
  answering = false;
  recordMetric("loss", 2, Reduce.MEAN);
  const missing = await consoleTables(() => logger.flush(1));
  await logger.shutdown();
  assert.equal(
    missing,
    [
      "=== [GlobalReduce] - METRICS STEP 1 ===",
      "loss:                      2.0",
      "rankscope/ranks_expected:  1.0",
      "rankscope/ranks_reporting: 0.0",
      "===============",
      "",
    ].join("\n"),
  );
  logger.deregisterRank(rank.rankName);
});

test("a bad console option is a TypeError that lists what is valid", async () => {
  const logger = await getOrCreateMetricLogger({ runDir: runDir(), quiet: true });
  // From JavaScript or a config file: TypeScript rejects this config already (BackendOptionsMap).
  const unchecked = { console: { loggingMode: "global_reduce", layout: "table" } };
  await using _shutdown = { [Symbol.asyncDispose]: () => logger.shutdown() };
  await assert.rejects(
    logger.initBackends(
      // @ts-expect-error -- not a valid option of this backend
      unchecked,
    ),
    {
      name: "TypeError",
      message:
        'backend "console": layout "table" is not valid; valid: "list" (one key per line), "grid" (AReaL\'s table)',
    },
  );
  await assert.rejects(logger.initBackends({ console: { loggingMode: "global_reduce", pairsPerRow: 0 } }), {
    name: "TypeError",
    message: 'backend "console": pairsPerRow must be a positive integer (key/value pairs per grid row), got 0',
  });
});
