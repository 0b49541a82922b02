/**
 * What the runs table and zoom read from the server: tags, group and params set through the real
 * `initBackends`, last values (`/api/summary`), the internal flag on keys, and `before` windows.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { recordMetric } from "../../src/core/collector.js";
import { Reduce } from "../../src/core/registry.js";
import { getOrCreateMetricLogger } from "../../src/controller/metric-logger.js";
import { startDashboard, type Dashboard } from "../../src/ui/server.js";
import { tempDir } from "../helpers.js";
import { openRun, seedFinishedRun } from "./seed.js";

async function json<T>(base: string, path: string): Promise<T> {
  const answer = await fetch(new URL(path, base));
  const text = await answer.text();
  assert.equal(answer.status, 200, `${path}: ${text}`);
  return JSON.parse(text) as T;
}

interface RunRow {
  id: string;
  tags: string[];
  group: string | null;
  params: Record<string, unknown>;
}

describe("dashboard server: runs table and zoom", () => {
  let root: string;
  let dashboard: Dashboard;
  const trial = "lr=3e-4,bs=256";

  before(async () => {
    root = tempDir("rankscope-ui-runs-");
    seedFinishedRun(root);
    // A run labelled through the real API, with a store written by the real backend.
    const logger = await getOrCreateMetricLogger({ root, experiment: "sweep", trial });
    await logger.initBackends(
      { store: { loggingMode: "global_reduce", waitForWrites: true } },
      {
        runConfig: {
          lr: 3e-4,
          batch: 256,
          model: { layers: 4, act: "gelu" },
          wandb: { api_key: "hush-hush" },
          schedule: [1, 2],
        },
        tags: ["baseline", "sweep"],
        group: "sweep-3",
      },
    );
    for (let step = 0; step < 5; step++) {
      recordMetric("train/loss", 1 / (step + 1), Reduce.MEAN);
      recordMetric("train/acc__count", 8, Reduce.SUM);
      recordMetric("eval/score", step === 4 ? NaN : step, Reduce.MEAN);
      await logger.flush(step);
    }
    await logger.shutdown();
    // Internal keys in a seeded run too, and logged hyperparameters.
    const w = openRun(root, "exp", "internal");
    w.write({
      scalars: [
        { key: "loss", step: 0, wall: 1, value: 2 },
        { key: "rankscope/ranks_expected", step: 0, wall: 1, value: 4 },
        { key: "rankscope/stream_dropped", step: 0, wall: 1, value: 0 },
      ],
      hyperparams: { optimizer: { name: "adam", beta: [0.9, 0.99] }, secret_token: "nope" },
    });
    w.finish();
    dashboard = await startDashboard({ root, port: 0 });
  });

  after(async () => {
    await dashboard.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("initBackends keeps tags and group in run.json; /api/runs shows them with the params flattened and redacted", async () => {
    const file = JSON.parse(readFileSync(join(root, "sweep", trial, "run.json"), "utf8")) as unknown;
    assert.deepEqual(file, { tags: ["baseline", "sweep"], group: "sweep-3" });
    const { runs } = await json<{ runs: RunRow[] }>(dashboard.url, "/api/runs");
    const sweep = runs.find((r) => r.id === `sweep/${trial}`);
    assert.ok(sweep !== undefined, JSON.stringify(runs.map((r) => r.id)));
    assert.deepEqual(sweep.tags, ["baseline", "sweep"]);
    assert.equal(sweep.group, "sweep-3");
    assert.deepEqual(sweep.params, {
      lr: 3e-4,
      batch: 256,
      "model.layers": 4,
      "model.act": "gelu",
      "wandb.api_key": "***REDACTED***",
      schedule: "[1,2]",
    });
    const internal = runs.find((r) => r.id === "exp/internal");
    assert.deepEqual(internal?.tags, []);
    assert.equal(internal?.group, null);
    assert.deepEqual(internal?.params, {
      "optimizer.name": "adam",
      "optimizer.beta": "[0.9,0.99]",
      secret_token: "***REDACTED***",
    });
  });

  it("/api/runs filters, sorts and pages on the server, and says what is wrong with a bad filter", async () => {
    const ids = async (query: string): Promise<{ ids: string[]; total: number }> => {
      const page = await json<{ runs: RunRow[]; total: number }>(dashboard.url, `/api/runs?${query}`);
      return { ids: page.runs.map((r) => r.id), total: page.total };
    };
    const sweep = `sweep/${trial}`;
    assert.deepEqual(await ids("tag=sweep&tag=baseline"), { ids: [sweep], total: 1 });
    assert.deepEqual(await ids("group=sweep-3"), { ids: [sweep], total: 1 });
    assert.deepEqual(await ids(`param=${encodeURIComponent("lr<0.001")}`), { ids: [sweep], total: 1 });
    assert.deepEqual(await ids(`param=${encodeURIComponent("model.act=gelu")}`), { ids: [sweep], total: 1 });
    assert.deepEqual(await ids(`param=${encodeURIComponent("model.layers>4")}`), { ids: [], total: 0 });
    assert.deepEqual(await ids("q=INTERNAL"), { ids: ["exp/internal"], total: 1 });
    assert.deepEqual(await ids("status=running"), { ids: [], total: 0 });
    const all = await ids("sort=name");
    assert.deepEqual(all.ids, [...all.ids].sort());
    assert.deepEqual(await ids("sort=name&offset=1&limit=1"), { ids: all.ids.slice(1, 2), total: all.total });
    for (const [query, message] of [
      ["param=lr~3", /param filters are NAME OP VALUE/],
      ["param=lr<abc", /compares numbers/],
      ["status=done", /status must be one of/],
      ["sort=size", /sort must be started, updated, name, status, group, param:NAME or metric:KEY/],
      ["limit=0", /limit must be an integer from 1 to 1000/],
    ] as const) {
      const answer = await fetch(new URL(`/api/runs?${query}`, dashboard.url));
      assert.equal(answer.status, 400, query);
      assert.match(((await answer.json()) as { error: string }).error, message);
    }
  });

  it("refuses tags and groups that are not strings, saying what is valid", async () => {
    const logger = await getOrCreateMetricLogger({
      root: tempDir("rankscope-ui-runs-bad-"),
      experiment: "e",
      trial: "t",
    });
    try {
      await assert.rejects(
        logger.initBackends({}, { tags: "baseline" as unknown as string[] }),
        /tags must be an array of at most 100 non-empty strings/,
      );
      await assert.rejects(
        logger.initBackends({}, { group: 3 as unknown as string }),
        /group must be a non-empty string/,
      );
    } finally {
      await logger.shutdown();
    }
  });

  it("/api/summary answers the last value of each key, internal keys only when asked", async () => {
    const run = encodeURIComponent(`sweep/${trial}`);
    const summary = await json<Record<string, unknown>>(dashboard.url, `/api/summary?run=${run}`);
    assert.deepEqual(summary, { "eval/score": "NaN", "train/loss": 0.2 });
    const all = await json<Record<string, unknown>>(dashboard.url, `/api/summary?run=${run}&internal=1`);
    assert.deepEqual(Object.keys(all).sort(), ["eval/score", "train/acc__count", "train/loss"]);
    assert.equal(all["train/acc__count"], 8);
    const some = await json<Record<string, unknown>>(dashboard.url, `/api/summary?run=${run}&keys=train/loss,nope`);
    assert.deepEqual(some, { "train/loss": 0.2 });
    const listed = await json<Record<string, unknown>>(
      dashboard.url,
      `/api/summary?run=${run}&keys=${encodeURIComponent(JSON.stringify(["eval/score", "train/acc__count"]))}`,
    );
    assert.deepEqual(listed, { "eval/score": "NaN", "train/acc__count": 8 });
  });

  it("/api/keys flags internal keys for the app's toggle", async () => {
    const { metrics } = await json<{ metrics: { key: string; internal: boolean }[] }>(
      dashboard.url,
      "/api/keys?run=exp/internal",
    );
    assert.deepEqual(
      metrics.map((k) => [k.key, k.internal]),
      [
        ["loss", false],
        ["rankscope/ranks_expected", true],
        ["rankscope/stream_dropped", true],
      ],
    );
  });

  it("before bounds a series and a batch line from above", async () => {
    const series = await json<{ steps: number[]; downsampled: boolean; cursor: string }>(
      dashboard.url,
      "/api/series?run=exp/base&key=loss&after=49&before=60",
    );
    assert.deepEqual(series.steps, [50, 51, 52, 53, 54, 55, 56, 57, 58, 59]);
    assert.equal(series.cursor, "59");
    const lines = JSON.stringify([
      ["loss", null, "9", 20],
      ["loss", 1, null, "3"],
      ["loss", null, null, null],
      ["loss", null, null],
    ]);
    const { lines: answers } = await json<{ lines: { steps: number[] }[] }>(
      dashboard.url,
      `/api/lines?run=exp/base&lines=${encodeURIComponent(lines)}`,
    );
    assert.deepEqual(answers[0]?.steps, [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
    assert.deepEqual(answers[1]?.steps, [0, 1, 2]);
    assert.equal(answers[2]?.steps.length, 120);
    assert.equal(answers[3]?.steps.length, 120);
    const bad = await fetch(new URL("/api/series?run=exp/base&key=loss&before=soon", dashboard.url));
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { error: string }).error, /before must be a step number, got "soon"/);
  });
});
