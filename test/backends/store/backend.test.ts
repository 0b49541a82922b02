/** The `store` backend through the logger: default config, per-rank mode, resume, failures. */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { DEFAULT_BACKENDS, getOrCreateMetricLogger } from "../../../src/controller/metric-logger.js";
import { recordMetric } from "../../../src/core/collector.js";
import { Reduce } from "../../../src/core/registry.js";
import {
  CONTROLLER_RANK,
  closeStores,
  config,
  histograms,
  keys,
  runInfo,
  samples,
  series,
} from "../../../src/store/reader.js";
import { captureStdout, collectDiagnostics, tempDir } from "../../helpers.js";

after(() => closeStores());

describe("store backend", () => {
  test("initBackends() with no config writes the console and the store; the store has every flushed step", async () => {
    assert.deepEqual(Object.keys(DEFAULT_BACKENDS).sort(), ["console", "store"]);
    const root = tempDir();
    let runDir = "";
    const out = await captureStdout(async () => {
      const logger = await getOrCreateMetricLogger({ root, experiment: "exp", trial: "t1" });
      runDir = logger.run.runDir;
      await logger.initBackends(undefined, { runConfig: { batch: 8, password: "hunter2" } });
      await logger.logHyperparams({ lr: 0.01 });
      for (let step = 0; step < 5; step++) {
        recordMetric("train/loss", step === 3 ? NaN : 1 / (step + 1), Reduce.MEAN);
        recordMetric("rollout/len", 10 + step, Reduce.HISTOGRAM);
        recordMetric("rollout/sample", { reward: step, text: "a<b>" }, Reduce.SAMPLE);
        await logger.flush(step);
      }
      await logger.shutdown();
    });
    assert.match(out, /train\/loss/, "the console still prints");
    assert.ok(existsSync(join(runDir, "metrics.db")));
    const info = runInfo(runDir);
    assert.equal(info.experiment, "exp");
    assert.equal(info.status, "finished");
    const loss = series(runDir, "train/loss");
    assert.equal(loss.rank, -1);
    assert.deepEqual(
      loss.points.map((p) => p.step),
      [0, 1, 2, 3, 4],
    );
    assert.ok(Number.isNaN(loss.points[3]?.value));
    assert.equal(loss.points[1]?.value, 0.5);
    assert.equal(keys(runDir).find((k) => k.key === "train/loss")?.reduce, "mean");
    assert.equal(histograms(runDir, "rollout/len").length, 5);
    assert.equal(samples(runDir, "rollout/sample").at(-1)?.records[0]?.["text"], "a<b>");
    // initBackends' runConfig (redacted) and version.json are the run's hyperparameters too.
    const version = JSON.parse(readFileSync(join(runDir, "version.json"), "utf8")) as unknown;
    assert.deepEqual(config(runDir), { batch: 8, password: "***REDACTED***", version_info: version, lr: 0.01 });
  });

  test("per-rank modes write the recorder's line; streams go in as raw values; resume replaces later steps", async () => {
    const root = tempDir();
    const opts = { root, experiment: "exp", trial: "ranks" };
    const runDir = join(root, "exp", "ranks");
    {
      const logger = await getOrCreateMetricLogger(opts);
      await logger.initBackends({
        store: { loggingMode: "per_rank_reduce" },
        raw: { type: "store", loggingMode: "per_rank_no_reduce" },
      });
      for (let step = 0; step < 10; step++) {
        recordMetric("loss", 1, Reduce.MEAN);
        recordMetric("loss", 3, Reduce.MEAN);
        await logger.flush(step);
      }
      await logger.shutdown();
    }
    const loss = series(runDir, "loss");
    assert.equal(loss.rank, CONTROLLER_RANK, "the controller's own values are its own line, never rank 0's");
    assert.equal(loss.points.length, 10);
    assert.ok(loss.points.every((p) => p.value === 2));
    const raw = series(runDir, "loss", { kind: "stream", maxPoints: Infinity });
    assert.equal(raw.points.length, 20, "every recorded value, unreduced");

    {
      const logger = await getOrCreateMetricLogger(opts);
      await logger.initBackends({ store: { loggingMode: "per_rank_reduce", waitForWrites: true } }, { resumeStep: 6 });
      for (let step = 6; step < 8; step++) {
        recordMetric("loss", 5, Reduce.MEAN);
        await logger.flush(step);
        assert.equal(
          series(runDir, "loss", { after: step - 1 }).points.length,
          1,
          "waitForWrites: readable once flush resolves",
        );
      }
      await logger.shutdown();
    }
    const resumed = series(runDir, "loss", { maxPoints: Infinity });
    assert.deepEqual(
      resumed.points.map((p) => [p.step, p.value]),
      [0, 1, 2, 3, 4, 5]
        .map((s) => [s, 2])
        .concat([
          [6, 5],
          [7, 5],
        ]),
    );
    assert.equal(runInfo(runDir).resumeStep, 6);
  });

  test("many quick flushes of many keys are all stored by shutdown (the writer thread merges them)", async () => {
    const root = tempDir();
    const logger = await getOrCreateMetricLogger({ root, experiment: "exp", trial: "fast" });
    await logger.initBackends({ store: { loggingMode: "global_reduce", maxPendingBatches: 8 } });
    const keyCount = 50;
    const steps = 300;
    for (let step = 0; step < steps; step++) {
      for (let k = 0; k < keyCount; k++) recordMetric(`layer${k}/grad_norm`, k + step, Reduce.MAX);
      await logger.flush(step);
    }
    await logger.shutdown();
    const runDir = join(root, "exp", "fast");
    assert.equal(keys(runDir).length, keyCount);
    for (const k of [0, 17, 49]) {
      const { points } = series(runDir, `layer${k}/grad_norm`, { maxPoints: Infinity });
      assert.equal(points.length, steps);
      assert.ok(points.every((p, step) => p.step === step && p.value === k + step));
    }
  });

  test("a store that cannot be opened is reported and the other backends go on", async () => {
    const root = tempDir();
    const other = tempDir();
    writeFileSync(join(root, "exp"), "a file where the experiment directory should be");
    {
      const diagnostics = await collectDiagnostics(async () => {
        const logger = await getOrCreateMetricLogger({ root, experiment: "exp", trial: "ro" });
        await logger.initBackends({
          store: { loggingMode: "global_reduce" },
          jsonl: { loggingMode: "global_reduce", file: join(other, "m.jsonl") },
        });
        recordMetric("loss", 1, Reduce.MEAN);
        const result = await logger.flush(0);
        assert.equal(result.metrics.length, 1);
        await logger.shutdown();
      });
      assert.match(
        readFileSync(join(other, "m.jsonl"), "utf8"),
        /"key":"loss"/,
        "the jsonl backend still got the flush",
      );
      assert.ok(
        diagnostics.some((d) => /backend "store" failed in init: could not open the store/.test(d.message)),
        JSON.stringify(diagnostics),
      );
    }
  });

  test("bad options are refused with what is valid", async () => {
    const logger = await getOrCreateMetricLogger({ root: tempDir(), experiment: "exp", trial: "bad" });
    // @ts-expect-error -- a wrong option type is a compile error too; this checks the runtime error
    await assert.rejects(logger.initBackends({ store: { loggingMode: "global_reduce", worker: "yes" } }), {
      name: "TypeError",
      message: 'backend "store": worker must be true or false, got "yes"',
    });
    await logger.shutdown();
  });
});
