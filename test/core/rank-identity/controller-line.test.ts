/**
 * The controller's own values are a line of their own (issue 20, item 1). The job: the
 * controller records `loss = 100`, two spawned process ranks record `loss = 1`, with a per-rank
 * store, stream and Prometheus backend. Rank 0's series holds exactly rank 0's values and the
 * controller's its own — in the store, the stream files, a real Prometheus (`sum by (rank)`),
 * `rankscope tail --rank` and the dashboard's JSON API — while the global line still includes the
 * controller's values.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { CONTROLLER_RANK, GLOBAL_RANK, keys, series } from "../../../src/store/reader.js";
import { startDashboard } from "../../../src/ui/server.js";
import { PrometheusServer, prometheusMissing, promValue } from "../../backends/prometheus/prometheus-server.js";
import { readStream } from "../../stream/helpers.js";
import { freePortRun } from "../../transport/support.js";
import { REPO_ROOT, runNode, tempDir, waitFor } from "../../helpers.js";
import { MetricLogger, recordMetric, Reduce, spawnRanks } from "./fixtures/recorder.mjs";

/** The built package (plain node), as in topologies.test.ts: the controller and its ranks start without tsx. */
const RANK_MODULE = new URL("./fixtures/recorder.mjs", import.meta.url);
const STEPS = 3;

describe("the controller's own line", () => {
  it(
    "is never rank 0's: store, stream files, Prometheus, tail and the dashboard each keep them apart",
    { timeout: 180_000 },
    async () => {
      const root = tempDir();
      const runDir = join(root, "exp", "t");
      const missing = prometheusMissing();
      // The controller's process serves on `port`, rank r on `port + 1 + r`.
      const port = await freePortRun(3);
      const prom =
        missing === undefined
          ? await PrometheusServer.start({
              controller: `127.0.0.1:${port}`,
              r0: `127.0.0.1:${port + 1}`,
              r1: `127.0.0.1:${port + 2}`,
            })
          : undefined;
      const logger = new MetricLogger({ runDir, processName: "Learner", flushDeadlineMs: 20_000, quiet: true });
      try {
        await logger.initBackends({
          store: { loggingMode: "per_rank_reduce", waitForWrites: true },
          global: { type: "store", loggingMode: "global_reduce", waitForWrites: true },
          raw: { type: "store", loggingMode: "per_rank_no_reduce", waitForWrites: true },
          ...(prom === undefined ? {} : { prometheus: { loggingMode: "per_rank_reduce", port } }),
        });
        const group = await spawnRanks({ module: RANK_MODULE, ranksPerReplica: 2, processName: "Rollout", logger });
        for (let step = 0; step < STEPS; step++) {
          recordMetric("loss", 100, Reduce.MEAN);
          await group.fanout("record", "loss", [1], "mean");
          await logger.flush(step);
        }
        if (prom !== undefined) {
          await waitFor(async () => (await prom.query("loss")).length === 3, {
            timeoutMs: 30_000,
            what: "Prometheus to scrape the controller and both ranks",
          });
          const byRank = new Map(
            (await prom.query("sum by (rank) (loss)")).map((s) => [s.metric["rank"], promValue(s.value?.[1] ?? "NaN")]),
          );
          assert.deepEqual(
            Object.fromEntries(byRank),
            { controller: 100, "0": 1, "1": 1 },
            "sum by (rank) keeps the controller apart from rank 0",
          );
        }
      } finally {
        await logger.shutdown();
        await prom?.stop();
      }

      // The store: rank 0's line is rank 0's values alone, the controller's is its own; the global line has all.
      const values = (rank: number, kind: "scalar" | "stream" = "scalar"): number[] =>
        series(runDir, "loss", { kind, rank, maxPoints: Infinity }).points.map((p) => p.value);
      assert.deepEqual(values(0), [1, 1, 1]);
      assert.deepEqual(values(1), [1, 1, 1]);
      assert.deepEqual(values(CONTROLLER_RANK), [100, 100, 100]);
      assert.deepEqual(values(GLOBAL_RANK), [34, 34, 34], "the global mean still includes the controller's values");
      assert.deepEqual(values(0, "stream"), [1, 1, 1]);
      assert.deepEqual(values(CONTROLLER_RANK, "stream"), [100, 100, 100]);
      assert.deepEqual(keys(runDir, "scalar").find((k) => k.key === "loss")?.ranks, [
        GLOBAL_RANK,
        0,
        1,
        CONTROLLER_RANK,
      ]);

      // The stream files: the controller's raw values are not in rank 0's file.
      assert.deepEqual(
        readStream(join(runDir, "streams", "rank-0.jsonl")).records.map((r) => [r["rank"], r["value"]]),
        [
          [0, 1],
          [0, 1],
          [0, 1],
        ],
      );
      assert.deepEqual(
        readStream(join(runDir, "streams", "controller.jsonl")).records.map((r) => [r["role"], r["rank"], r["value"]]),
        [
          ["controller", undefined, 100],
          ["controller", undefined, 100],
          ["controller", undefined, 100],
        ],
      );

      // rankscope tail: --rank 0 is rank 0's line, --rank controller the controller's.
      const cli = join(REPO_ROOT, "dist", "cli", "main.js");
      for (const [rank, value, label] of [
        ["0", 1, "rank 0"],
        ["controller", 100, "controller"],
      ] as const) {
        const tail = await runNode(
          [cli, "tail", runDir, "--rank", rank, "--no-follow", "--filter", "loss"],
          {},
          { raw: true },
        );
        assert.equal(tail.code, 0, tail.stderr);
        assert.match(tail.stdout, new RegExp(`^step 2  loss \\[${label}\\]  ${value}(\\.0)?$`, "m"), tail.stdout);
      }

      // The dashboard's JSON API: labels by the one rule, and each line's own values.
      const dashboard = await startDashboard({ root, port: 0 });
      try {
        const get = async <T>(path: string): Promise<T> => {
          const response = await fetch(new URL(path, dashboard.url));
          assert.equal(response.status, 200, `${path}: ${await response.clone().text()}`);
          return (await response.json()) as T;
        };
        const api = await get<{ rankLabels: Record<string, string> }>("/api/keys?run=exp/t");
        assert.equal(api.rankLabels["-2"], "controller (Learner)");
        assert.match(api.rankLabels["0"] ?? "", /^rank 0 \(Rollout_\w{4}_r0\)$/);
        const line = async (rank: number): Promise<number[]> =>
          (await get<{ values: number[] }>(`/api/series?run=exp/t&key=loss&rank=${rank}`)).values;
        assert.deepEqual(await line(0), [1, 1, 1]);
        assert.deepEqual(await line(CONTROLLER_RANK), [100, 100, 100]);
      } finally {
        await dashboard.close();
      }
    },
  );
});
