/**
 * The one default-logger lookup (src/pipeline/default-logger.ts): a carrier given no logger
 * registers its ranks with `getOrCreateMetricLogger()`'s, whichever entry point it came from —
 * `rankscope`, `rankscope/nats` or `rankscope/host` each load the controller that provides it —
 * and a carrier's module imported alone says what to do instead of failing obscurely. Each case
 * runs in a child process, so what one import loads cannot leak into another.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { runSnippet, tempDir } from "../helpers.js";

const src = (path: string): string => JSON.stringify(fileURLToPath(new URL(`../../src/${path}`, import.meta.url)));

for (const entry of ["index.ts", "nats.ts", "host.ts"]) {
  test(`importing src/${entry} provides the default logger: getOrCreateMetricLogger()'s`, async () => {
    const code = `
      await import(${src(entry)});
      const { defaultLogger } = await import(${src("pipeline/default-logger.ts")});
      const logger = await defaultLogger();
      // Only now the controller's module (already loaded by the entry point, if it did its job).
      const { currentMetricLogger } = await import(${src("controller/metric-logger.ts")});
      process.stdout.write(String(logger === currentMetricLogger() && typeof logger.runId === "string"));
      await logger.shutdown();
    `;
    const { code: exit, stdout, stderr } = await runSnippet(code, { RANKSCOPE_ROOT: tempDir(), RANKSCOPE_QUIET: "1" });
    assert.equal(exit, 0, stderr);
    assert.equal(stdout, "true", "the carriers' default is the process's one MetricLogger");
  });
}

test("spawnRanks imported from its own module, with no controller loaded and no logger given, says what to pass", async () => {
  const code = `
    const { spawnRanks } = await import(${src("transport/controller/launcher.ts")});
    try {
      await spawnRanks({ module: "./no-such-module.ts" });
      process.stdout.write("resolved");
    } catch (error) {
      process.stdout.write(error.message);
    }
  `;
  const { code: exit, stdout, stderr } = await runSnippet(code, { RANKSCOPE_ROOT: tempDir(), RANKSCOPE_QUIET: "1" });
  assert.equal(exit, 0, stderr);
  assert.match(stdout, /no MetricLogger in this process to register ranks with: pass \{ logger \}/);
});
