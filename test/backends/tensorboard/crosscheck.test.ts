/**
 * Cross-check with TensorBoard itself: a run written through a real MetricLogger is served by the
 * real `tensorboard` on 127.0.0.1 — once with its Rust data server (`--load_fast=true`, the
 * default reader where installed) and once with its Python event reader (`--load_fast=false`) —
 * and what its HTTP API returns is compared with what was recorded.
 *
 * TensorBoard comes from the shared test venv (test/helpers/python.ts: made once in
 * node_modules/.cache/rankscope-py from pip's configured sources, or `RANKSCOPE_PYTHON`). When it
 * cannot be set up the test is skipped and says why.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { after, it } from "node:test";
import { getCollector, recordMetric } from "../../../src/core/collector.js";
import { registerBackend, type Backend } from "../../../src/backends/backend.js";
import type { Metric, StreamRecord } from "../../../src/core/metric.js";
import { Reduce } from "../../../src/core/registry.js";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { isInternalKey } from "../../../src/core/internal-keys.js";
import { REDACTED } from "../../../src/run/run-files.js";
import { tempDir, waitFor } from "../../helpers.js";
import { pythonKit } from "../../helpers/python.js";

const kit = pythonKit("tensorboard");
const python = kit.python ?? "python3";
const tensorboardVersion = kit.version;
const skip = kit.skip;

const servers: ChildProcess[] = [];
after(() => {
  for (const server of servers) server.kill("SIGTERM");
  getCollector().clear();
});

/** Start TensorBoard on an ephemeral loopback port; resolves with its base URL. */
function startTensorBoard(logdir: string, loadFast: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      python,
      [
        "-m",
        "tensorboard.main",
        "--logdir",
        logdir,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        `--load_fast=${loadFast}`,
        "--reload_interval",
        "1",
      ],
      {
        stdio: ["pipe", "ignore", "pipe"],
      },
    );
    servers.push(child);
    let stderr = "";
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      stderr += chunk;
      const match = /at (http:\/\/127\.0\.0\.1:\d+)\//.exec(stderr);
      if (match !== null) resolve(match[1] as string);
    });
    child.on("exit", (code) => reject(new Error(`tensorboard exited with ${code}: ${stderr}`)));
  });
}

async function getJson(url: string, body?: unknown): Promise<unknown> {
  const response = await fetch(
    url,
    body === undefined
      ? {}
      : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
  );
  if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
  return response.json();
}

/**
 * TensorBoard's answer at `url` once `ready(answer)` holds (it loads files in the background, and
 * answers nothing until it is up); gives up after 60 s, naming the last answer.
 */
async function tensorBoardAnswer(url: string, ready: (answer: unknown) => boolean, body?: unknown): Promise<unknown> {
  let last: unknown;
  const found = await waitFor(
    async () => {
      last = await getJson(url, body).catch((error: unknown) => `not up yet (${String(error)})`);
      return ready(last) ? { answer: last } : undefined;
    },
    { timeoutMs: 60_000, what: `TensorBoard to show the data at ${url}`, intervalMs: 250 },
  ).catch((error: unknown) => {
    throw new Error(`${error instanceof Error ? error.message : String(error)}; last answer: ${JSON.stringify(last)}`);
  });
  return found.answer;
}

/** TensorBoard's JSON for a float: a number, or "NaN" / "Infinity" / "-Infinity". */
function tbNumber(value: unknown): number {
  return typeof value === "string" ? Number(value) : (value as number);
}

for (const loadFast of [true, false]) {
  it(
    `TensorBoard ${tensorboardVersion ?? ""} (${loadFast ? "Rust data server" : "Python reader"}) shows every recorded scalar, histogram, sample and hyperparameter`,
    { skip, timeout: 120_000 },
    async () => {
      const runDir = tempDir();
      // First attempt: steps 0..7. Second attempt resumes at step 5 with other values.
      const first = new MetricLogger({ runDir });
      await first.initBackends({ tensorboard: { loggingMode: "global_reduce" } });
      for (let step = 0; step < 8; step++) {
        recordMetric("loss", 1000 + step, Reduce.MEAN);
        await first.flush(step);
      }
      await first.shutdown();

      const logger = new MetricLogger({ runDir });
      // Raw values too, streamed per rank at their own times (and captured here to compare).
      const streamed: StreamRecord[] = [];
      registerBackend(`capture-${loadFast}`, (): Backend => ({
        logBatch() {},
        logStream: (batch) => void streamed.push(...batch),
      }));
      await logger.initBackends(
        {
          tensorboard: { loggingMode: "global_reduce" },
          stream: { loggingMode: "per_rank_no_reduce", type: "tensorboard" },
          capture: { loggingMode: "per_rank_no_reduce", type: `capture-${loadFast}` },
        },
        { resumeStep: 5, runConfig: { optimizer: "adam", wandb: { apiKey: "s3cret-key" } } },
      );
      await logger.logHyperparams({ lr: 3e-4, model: { name: "tiny", layers: 2 }, amp: true });
      const flushed: Metric[] = [];
      const specials = [NaN, Infinity, -Infinity, 0.1];
      for (let step = 5; step < 9; step++) {
        recordMetric("loss", 1 / step, Reduce.MEAN);
        recordMetric("special", specials[step - 5] as number, Reduce.MAX);
        for (const v of [0.5, 1, 3, 100]) recordMetric("weights", v * step, Reduce.HISTOGRAM);
        recordMetric("rollout", { prompt: `question ${step}`, reward: step }, Reduce.SAMPLE);
        flushed.push(...(await logger.flush(step)).metrics);
      }
      await logger.shutdown();

      const base = await startTensorBoard(runDir, loadFast);
      const run = "tensorboard";
      const tags = (await tensorBoardAnswer(`${base}/data/plugin/scalars/tags`, (t) =>
        Object.keys((t as Record<string, Record<string, unknown>>)[run] ?? {}).includes("weights/mean"),
      )) as Record<string, Record<string, unknown>>;
      // rankscope's own keys (rankscope/…, …__count) are left out of TensorBoard unless `internal: true`.
      const expectedTags = [...new Set(flushed.map((m) => m.key))].filter((k) => !isInternalKey(k)).sort();
      assert.deepEqual(Object.keys(tags[run] ?? {}).sort(), expectedTags);

      // Scalars: the resumed attempt's points replace the first attempt's from step 5 on.
      for (const key of expectedTags) {
        const points = (await tensorBoardAnswer(
          `${base}/data/plugin/scalars/scalars?run=${run}&tag=${encodeURIComponent(key)}`,
          (p) => Array.isArray(p) && p.length >= (key === "loss" ? 9 : 4),
        )) as [number, number, unknown][];
        const mine = flushed.filter((m) => m.key === key);
        const shown = key === "loss" ? points.slice(5) : points;
        if (key === "loss")
          assert.deepEqual(
            points.slice(0, 5).map(([, step, v]) => [step, tbNumber(v)]),
            [0, 1, 2, 3, 4].map((s) => [s, 1000 + s]),
          );
        assert.equal(shown.length, mine.length, `points of ${key}: ${JSON.stringify(points)}`);
        shown.forEach(([wallTime, step, value], i) => {
          const m = mine[i] as Metric;
          assert.equal(step, m.step);
          assert.ok(
            Object.is(tbNumber(value), Math.fround(m.value)),
            `${key}@${step}: TensorBoard shows ${String(value)}, recorded ${m.value}`,
          );
          assert.ok(
            Math.abs(wallTime - m.timestamp / 1000) < 1e-6,
            `${key}@${step} wall time ${wallTime} vs ${m.timestamp / 1000}`,
          );
        });
      }

      // Streamed values (one per step here): each at its step and its own wall time, in the rank's run.
      const streamRun = encodeURIComponent(`${run}/Controller`);
      const streamedLoss = streamed.filter((r) => r.key === "loss");
      assert.equal(streamedLoss.length, 4);
      const streamPoints = (await tensorBoardAnswer(
        `${base}/data/plugin/scalars/scalars?run=${streamRun}&tag=loss`,
        (p) => Array.isArray(p) && p.length >= streamedLoss.length,
      )) as [number, number, unknown][];
      assert.deepEqual(
        streamPoints.map(([wallTime, step, value]) => [wallTime, step, tbNumber(value)]),
        streamedLoss.map((r) => [r.timestamp / 1000, r.step, Math.fround(r.value)]),
      );

      // Histograms: [left, right, count] buckets adding up to every recorded value.
      const histograms = (await getJson(`${base}/data/plugin/histograms/histograms?run=${run}&tag=weights`)) as [
        number,
        number,
        [number, number, number][],
      ][];
      assert.deepEqual(
        histograms.map(([, step]) => step),
        [5, 6, 7, 8],
      );
      for (const [, step, buckets] of histograms) {
        const values = [0.5, 1, 3, 100].map((v) => v * step);
        assert.equal(
          buckets.reduce((n, [, , c]) => n + c, 0),
          values.length,
        );
        for (const [left, right, count] of buckets) {
          if (count > 0)
            assert.ok(
              values.some((v) => v >= left && v <= right),
              `bucket [${left}, ${right}] at step ${step} holds a recorded value`,
            );
        }
      }

      // Text: the sample table of each step.
      const texts = (await getJson(`${base}/data/plugin/text/text?run=${run}&tag=rollout`)) as {
        step: number;
        text: string;
      }[];
      assert.deepEqual(
        texts.map((t) => t.step),
        [5, 6, 7, 8],
      );
      for (const t of texts) {
        assert.match(t.text, /<table>/);
        assert.match(t.text, new RegExp(`question ${t.step}`));
      }

      // HParams: the run is a session group with the flattened config and its scalars as metrics.
      const groups = (await getJson(`${base}/data/plugin/hparams/session_groups`, {
        experimentName: "",
        allowedStatuses: ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        colParams: [],
        startIndex: 0,
        sliceSize: 10,
      })) as {
        sessionGroups: {
          name: string;
          hparams: Record<string, unknown>;
          metricValues: { name: { tag: string }; trainingStep: number }[];
        }[];
      };
      // The global run, and the rank's stream run (per-rank backends get the run config through the ranks' init).
      assert.deepEqual(groups.sessionGroups.map((g) => g.name).sort(), [run, `${run}/Controller`]);
      const group = groups.sessionGroups.find((g) => g.name === run) as (typeof groups.sessionGroups)[number];
      // The run config (secrets redacted) and version.json, logged by initBackends({ runConfig }), merged with logHyperparams.
      const version = JSON.parse(readFileSync(join(runDir, "version.json"), "utf8")) as Record<string, unknown>;
      const flat: Record<string, unknown> = {};
      const visit = (prefix: string, v: unknown): void => {
        if (v !== null && typeof v === "object")
          for (const [k, inner] of Object.entries(v)) visit(`${prefix}.${k}`, inner);
        else flat[prefix] = v === null ? "null" : v;
      };
      visit("version_info", version);
      assert.deepEqual(group.hparams, {
        lr: 3e-4,
        "model.name": "tiny",
        "model.layers": 2,
        amp: true,
        optimizer: "adam",
        "wandb.apiKey": REDACTED,
        ...flat,
      });
      assert.ok(group.metricValues.some((m) => m.name.tag === "loss" && m.trainingStep === 8));
      // logHyperparams reaches the global backends; the rank's run has initBackends' run config and version info.
      assert.deepEqual(groups.sessionGroups.find((g) => g.name === `${run}/Controller`)?.hparams, {
        optimizer: "adam",
        "wandb.apiKey": REDACTED,
        ...flat,
      });
    },
  );
}

for (const loadFast of [true, false]) {
  it(
    `TensorBoard ${tensorboardVersion ?? ""} (${loadFast ? "Rust data server" : "Python reader"}) keeps a resumed run's first hyperparameters (docs/tensorboard.md)`,
    { skip, timeout: 120_000 },
    async () => {
      const runDir = tempDir();
      for (const [optimizer, resumeStep] of [
        ["sgd", 0],
        ["adam", 2],
      ] as const) {
        getCollector().clear();
        const logger = new MetricLogger({ runDir });
        await logger.initBackends(
          { tensorboard: { loggingMode: "global_reduce" } },
          { resumeStep, runConfig: { optimizer } },
        );
        for (let step = resumeStep; step < resumeStep + 3; step++) {
          recordMetric("loss", step, Reduce.MEAN);
          await logger.flush(step);
        }
        await logger.shutdown();
      }
      const base = await startTensorBoard(runDir, loadFast);
      const request = {
        experimentName: "",
        allowedStatuses: ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        colParams: [],
        startIndex: 0,
        sliceSize: 10,
      };
      const groups = (await tensorBoardAnswer(
        `${base}/data/plugin/hparams/session_groups`,
        (g) => ((g as { sessionGroups?: unknown[] }).sessionGroups ?? []).length > 0,
        request,
      )) as { sessionGroups: { hparams: Record<string, unknown> }[] };
      assert.equal(groups.sessionGroups.length, 1);
      assert.equal(
        groups.sessionGroups[0]?.hparams["optimizer"],
        "sgd",
        "the first attempt's session_start_info is what the HParams tab shows",
      );
    },
  );
}
