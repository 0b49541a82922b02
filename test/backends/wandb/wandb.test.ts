/**
 * The `wandb` backend against a strict local W&B server (test/backends/wandb/wandb-server.ts).
 *
 * This is a contract test: the W&B cloud is not reachable from here, so the server on 127.0.0.1
 * implements W&B's HTTP contract (GraphQL UpsertBucket / RunResumeStatus, the file-stream endpoint)
 * and checks every request strictly. Every run goes through a real MetricLogger.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { LocalRankHandle, RankRuntime } from "../../../src/pipeline/runtime.js";
import { Collector, recordMetric } from "../../../src/core/collector.js";
import { diagnosticCounts } from "../../../src/core/diagnostics.js";
import { Reduce } from "../../../src/core/registry.js";
import type { RankIdentity } from "../../../src/backends/backend.js";
import type { BackendConfigOf } from "../../../src/backends/options.js";
import { WandbBackend } from "../../../src/backends/wandb/index.js";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REDACTED } from "../../../src/run/run-files.js";
import { collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { API_KEY, FAST, filesContainingKey, resetProcess, startServer, valuesOf } from "./wandb-helpers.js";
import { parseWandbJson, type StrictWandbServer } from "./wandb-server.js";

let server: StrictWandbServer;

before(async () => {
  server = await startServer();
});
after(async () => {
  await server.stop();
});
beforeEach(() => resetProcess());
afterEach(() => {
  const violations = server.violations.splice(0);
  assert.deepEqual(violations, [], "the strict server saw requests that break the W&B contract");
});

function wandbConfig(extra: Partial<BackendConfigOf<"wandb">> = {}): BackendConfigOf<"wandb"> {
  return {
    loggingMode: "global_reduce",
    baseUrl: server.baseUrl,
    apiKey: API_KEY,
    entity: "team",
    project: "proj",
    ...FAST,
    ...extra,
  };
}

function identity(rank: number): RankIdentity {
  return { rank, rankName: `Trainer_0_r${rank}`, processName: "Trainer", localRank: rank, localWorldSize: 2 };
}

describe("wandb global_reduce", () => {
  it("creates one run with its name, group and config, and sends every step's values, the summary and the exit status", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "exp1", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig({ jobType: "train", config: { lr: 0.001, layers: [1, 2] } }) });
    await logger.logHyperparams({ batch: 32 });
    const before = Date.now();
    for (let step = 0; step < 5; step++) {
      recordMetric("loss", 1 / (step + 1), Reduce.MEAN);
      recordMetric("loss", 3 / (step + 1), Reduce.MEAN);
      recordMetric("tokens", 100 + step, Reduce.SUM);
      await logger.flush(step);
    }
    recordMetric("loss", NaN, Reduce.MEAN);
    await logger.flush(5);
    await logger.shutdown();

    const run = server.run("exp1_t1");
    assert.ok(run, "the run exists on the server");
    assert.equal(run.entity, "team");
    assert.equal(run.project, "proj");
    assert.equal(run.displayName, "t1");
    assert.equal(run.groupName, "exp1_t1");
    assert.equal(run.jobType, "train");
    assert.deepEqual(run.config, { lr: { value: 0.001 }, layers: { value: [1, 2] }, batch: { value: 32 } });
    const rows = server.history("exp1_t1");
    assert.deepEqual(
      rows.map((r) => r["_step"]),
      [0, 1, 2, 3, 4, 5],
    );
    assert.deepEqual(
      rows.map((r) => r["global_step"]),
      [0, 1, 2, 3, 4, 5],
    );
    assert.deepEqual(valuesOf(rows, "loss").slice(0, 5), [2, 1, 2 / 3, 0.5, 0.4]);
    assert.ok(Number.isNaN(valuesOf(rows, "loss")[5]), "NaN reaches W&B as NaN");
    assert.deepEqual(valuesOf(rows, "tokens"), [100, 101, 102, 103, 104]);
    for (const r of rows) {
      assert.ok(
        (r["_timestamp"] as number) * 1000 >= before - 5 && (r["_timestamp"] as number) * 1000 <= Date.now(),
        "_timestamp is wall time in seconds",
      );
      assert.ok((r["_runtime"] as number) >= 0);
    }
    assert.equal(run.summary["tokens"], 104);
    assert.equal(run.complete, true);
    assert.equal(run.exitcode, 0);
    assert.deepEqual(filesContainingKey(runDir), []);
  });

  it("logs a flush at a lower step under max(step, last + 1), keeps the step as global_step, and warns", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "exp2", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig() });
    const seen = await collectDiagnostics(async () => {
      for (const step of [5, 6, 3, 4]) {
        recordMetric("x", step, Reduce.MEAN);
        await logger.flush(step);
      }
      await logger.shutdown();
    });
    const rows = server.history("exp2_t1");
    assert.deepEqual(
      rows.map((r) => [r["_step"], r["global_step"], r["x"]]),
      [
        [5, 5, 5],
        [6, 6, 6],
        [7, 3, 3],
        [8, 4, 4],
      ],
    );
    const warning = seen.find((d) => d.code.startsWith("wandb.stepBackwards"));
    assert.ok(warning, "a warning says the step went back");
    assert.match(warning.message, /_step 7 with global_step 3/);
  });

  it("resumes an existing run at its line count and above its last step (resume: allow)", async () => {
    const runDir = tempDir();
    let logger = new MetricLogger({ runDir, experiment: "exp3", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig() });
    for (let step = 0; step < 4; step++) {
      recordMetric("x", step, Reduce.MEAN);
      await logger.flush(step);
    }
    await logger.shutdown();
    resetProcess();
    // Restart from a checkpoint at step 2: steps 2 and 3 are logged again.
    logger = new MetricLogger({ runDir, experiment: "exp3", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig({ resume: "allow" }) }, { resumeStep: 2 });
    for (let step = 2; step < 5; step++) {
      recordMetric("x", step * 10, Reduce.MEAN);
      await logger.flush(step);
    }
    await logger.shutdown();
    const rows = server.history("exp3_t1");
    assert.deepEqual(
      rows.map((r) => [r["_step"], r["global_step"], r["x"]]),
      [
        [0, 0, 0],
        [1, 1, 1],
        [2, 2, 2],
        [3, 3, 3],
        [4, 2, 20],
        [5, 3, 30],
        [6, 4, 40],
      ],
    );
  });

  it("resumes above the last step when the server's history tail holds NaN, Infinity and -Infinity", async () => {
    const runDir = tempDir();
    let logger = new MetricLogger({ runDir, experiment: "exp3nf", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig() });
    const first = [NaN, Infinity, -Infinity, -Infinity];
    for (let step = 0; step < first.length; step++) {
      recordMetric("loss", first[step] as number, Reduce.MEAN);
      recordMetric("other", step === 3 ? NaN : step, Reduce.MEAN);
      await logger.flush(step);
    }
    await logger.shutdown();
    resetProcess();
    // The tail the resume status answers with ends in a row of -Infinity and NaN (bare tokens).
    const tail = server.history("exp3nf_t1");
    assert.equal(tail.at(-1)?.["loss"], -Infinity);
    // A fresh process that does not know where the run ended (resumeStep 0).
    logger = new MetricLogger({ runDir, experiment: "exp3nf", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig({ resume: "allow" }) });
    for (let step = 2; step < 4; step++) {
      recordMetric("loss", step * 10, Reduce.MEAN);
      await logger.flush(step);
    }
    await logger.shutdown();
    const rows = server.history("exp3nf_t1");
    const steps = rows.map((r) => r["_step"] as number);
    assert.deepEqual(steps, [0, 1, 2, 3, 4, 5], "_step increases across the resume");
    assert.deepEqual(
      rows.map((r) => r["loss"]),
      [NaN, Infinity, -Infinity, -Infinity, 20, 30],
    );
    assert.deepEqual(
      rows.map((r) => r["global_step"]),
      [0, 1, 2, 3, 2, 3],
    );
  });

  it("logs initBackends' runConfig (secrets redacted) and version.json as the run's config", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "expcfg", trial: "t1" });
    await logger.initBackends(
      { wandb: wandbConfig() },
      { runConfig: { lr: 0.01, data: { path: "/d", token: "tok-123" } } },
    );
    recordMetric("x", 1, Reduce.MEAN);
    await logger.flush(0);
    await logger.shutdown();
    const run = server.run("expcfg_t1");
    assert.ok(run);
    const version = JSON.parse(readFileSync(join(runDir, "version.json"), "utf8")) as unknown;
    assert.deepEqual(run.config, {
      lr: { value: 0.01 },
      data: { value: { path: "/d", token: REDACTED } },
      version_info: { value: version },
    });
  });

  it("refuses to write into an existing run with resume: never, and spools instead of losing the values", async () => {
    const runDir = tempDir();
    let logger = new MetricLogger({ runDir, experiment: "exp4", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig() });
    recordMetric("x", 1, Reduce.MEAN);
    await logger.flush(0);
    await logger.shutdown();
    resetProcess();
    logger = new MetricLogger({ runDir, experiment: "exp4", trial: "t1" });
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({ wandb: wandbConfig({ resume: "never" }) });
      recordMetric("x", 2, Reduce.MEAN);
      await logger.flush(1);
      await logger.shutdown();
    });
    assert.equal(server.history("exp4_t1").length, 1, "nothing was written into the existing run");
    const error = seen.find((d) => d.code.startsWith("wandb.spooling"));
    assert.ok(error);
    assert.match(error.message, /already exists and resume is "never"/);
  });

  it("with resume: must, a run that does not exist is an error and the values are spooled", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "exp12", trial: "t1" });
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({ wandb: wandbConfig({ resume: "must" }) });
      recordMetric("x", 1, Reduce.MEAN);
      await logger.flush(0);
      await logger.shutdown();
    });
    assert.equal(server.run("exp12_t1"), undefined, "no run was created");
    assert.ok(seen.some((d) => /does not exist and resume is "must"/.test(d.message)));
    assert.ok(
      seen.some((d) => d.code.startsWith("wandb.spooled")),
      "the values wait in the spool",
    );
  });

  it("rejects invalid options with a message that lists what is valid", async () => {
    const logger = new MetricLogger({ runDir: tempDir() });
    // @ts-expect-error -- an invalid mode is a compile error too; this checks the runtime error
    const badMode = logger.initBackends({ wandb: { loggingMode: "global_reduce", mode: "sometimes" } });
    await assert.rejects(badMode, /mode must be one of: online, offline, disabled/);
    await assert.rejects(
      logger.initBackends({ wandb: { loggingMode: "global_reduce", runId: "a/b" } }),
      /runId may contain only/,
    );
    await assert.rejects(
      logger.initBackends({ wandb: { loggingMode: "global_reduce", baseUrl: "wandb.ai" } }),
      /baseUrl must be an http\(s\) URL/,
    );
    await logger.shutdown();
  });
});

describe("wandb per-rank modes (ranks driven in-process with distinct identities)", () => {
  async function twoRanks(
    config: BackendConfigOf<"wandb">,
    experiment: string,
    runConfig?: unknown,
  ): Promise<{ logger: MetricLogger; ranks: RankRuntime[]; runDir: string }> {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment, trial: "t1", processName: "Controller" });
    const ranks = [0, 1].map((r) => new RankRuntime(identity(r), new Collector()));
    for (const rank of ranks) await logger.registerRank(new LocalRankHandle(rank));
    await logger.initBackends({ wandb: config }, runConfig === undefined ? {} : { runConfig });
    return { logger, ranks, runDir };
  }

  it("per_rank_reduce: one run per rank named {name}_{rankName}, in one group", async () => {
    const { logger, ranks, runDir } = await twoRanks(
      wandbConfig({ loggingMode: "per_rank_reduce", name: "job" }),
      "exp5",
      { lr: 0.5, password: "pw" },
    );
    for (let step = 0; step < 3; step++) {
      // Each rank records into its own collector, as it would in its own process.
      ranks.forEach((rank, r) => rank.collector.recordSlow("loss", (r + 1) * 100 + step, Reduce.MEAN));
      await logger.flush(step);
    }
    await logger.shutdown();
    for (const r of [0, 1]) {
      const run = server.run(`exp5_t1_Trainer_0_r${r}`);
      assert.ok(run, `rank ${r} has its own run`);
      assert.equal(run.displayName, `job_Trainer_0_r${r}`);
      assert.equal(run.groupName, "exp5_t1");
      assert.equal(run.complete, true);
      assert.deepEqual(
        valuesOf(server.history(run.name), "loss"),
        [0, 1, 2].map((s) => (r + 1) * 100 + s),
      );
      // Every rank's run has the run config (redacted) and version info, handed over in the ranks' init.
      const version = JSON.parse(readFileSync(join(runDir, "version.json"), "utf8")) as unknown;
      assert.deepEqual(run.config, {
        lr: { value: 0.5 },
        password: { value: REDACTED },
        version_info: { value: version },
      });
    }
    assert.equal(
      server.run("exp5_t1_Controller"),
      undefined,
      "the controller's own rank logged nothing and created no run",
    );
  });

  it("per-rank runs restarted without resume: rows queued before the server answered are moved above its last step", async () => {
    let { logger, ranks } = await twoRanks(wandbConfig({ loggingMode: "per_rank_reduce" }), "exp9");
    for (let step = 0; step < 3; step++) {
      ranks.forEach((rank) => rank.collector.recordSlow("x", step, Reduce.MEAN));
      await logger.flush(step);
    }
    await logger.shutdown();
    resetProcess();
    ({ logger, ranks } = await twoRanks(wandbConfig({ loggingMode: "per_rank_reduce" }), "exp9"));
    const seen = await collectDiagnostics(async () => {
      for (let step = 0; step < 2; step++) {
        ranks.forEach((rank) => rank.collector.recordSlow("x", 10 + step, Reduce.MEAN));
        await logger.flush(step);
      }
      await logger.shutdown();
    });
    for (const r of [0, 1]) {
      const rows = server.history(`exp9_t1_Trainer_0_r${r}`);
      assert.deepEqual(
        rows.map((x) => [x["_step"], x["global_step"], x["x"]]),
        [
          [0, 0, 0],
          [1, 1, 1],
          [2, 2, 2],
          [3, 0, 10],
          [4, 1, 11],
        ],
      );
    }
    assert.ok(
      seen.some((d) => d.code.startsWith("wandb.stepBackwards")),
      "a warning says rows were moved",
    );
  });

  it("perRankShareRun: the controller's primary creates one run, ranks write to it as shared-mode clients with prefixed keys", async () => {
    const { logger, ranks } = await twoRanks(
      wandbConfig({ loggingMode: "per_rank_reduce", perRankShareRun: true }),
      "exp6",
    );
    for (let step = 0; step < 4; step++) {
      ranks.forEach((rank, r) => rank.collector.recordSlow("reward", r * 10 + step, Reduce.MEAN));
      await logger.flush(step);
    }
    await logger.shutdown();
    assert.equal(
      [...server.runs.values()].filter((r) => r.project === "proj" && r.name.startsWith("exp6")).length,
      1,
      "one run for all ranks",
    );
    const run = server.run("exp6_t1");
    assert.ok(run);
    assert.equal(run.shared, true);
    for (const r of [0, 1]) {
      const rows = server.history("exp6_t1", `Trainer_0_r${r}`);
      assert.deepEqual(
        valuesOf(rows, `Trainer_0_r${r}/reward`),
        [0, 1, 2, 3].map((s) => r * 10 + s),
        `rank ${r}'s values, under its own prefix`,
      );
      assert.deepEqual(
        rows.map((x) => x["global_step"]),
        [0, 1, 2, 3],
      );
      assert.equal(valuesOf(rows, `Trainer_0_r${1 - r}/reward`).length, 0, "no rank writes the other's keys");
    }
    assert.equal(run.complete, true, "the primary completed the run after the ranks finished");
    assert.equal(run.summary["Trainer_0_r1/reward"], 13);
  });

  it("per_rank_no_reduce: every raw value is a row with global_step and the value's own _timestamp", async () => {
    const { logger, ranks } = await twoRanks(wandbConfig({ loggingMode: "per_rank_no_reduce" }), "exp7");
    const t0 = Date.now();
    for (let step = 0; step < 2; step++) {
      for (let i = 0; i < 3; i++) {
        ranks.forEach((rank, r) => rank.collector.recordSlow("latency", r * 1000 + step * 10 + i, Reduce.MEAN));
      }
      await logger.flush(step);
    }
    const t1 = Date.now();
    await logger.shutdown();
    for (const r of [0, 1]) {
      const rows = server.history(`exp7_t1_Trainer_0_r${r}`);
      assert.deepEqual(
        valuesOf(rows, "latency"),
        [0, 1, 2, 10, 11, 12].map((v) => r * 1000 + v),
      );
      assert.deepEqual(
        rows.map((x) => x["global_step"]),
        [0, 0, 0, 1, 1, 1],
      );
      for (const row of rows)
        assert.ok((row["_timestamp"] as number) * 1000 >= t0 && (row["_timestamp"] as number) * 1000 <= t1);
    }
  });

  it("per_rank_no_reduce keeps the caller's timestamps exactly", async () => {
    const runDir = tempDir();
    const backend = new WandbBackend(wandbConfig({ loggingMode: "per_rank_no_reduce", runId: "stream-ts" }));
    await backend.init({
      backendName: "wandb",
      displayName: "r0",
      loggingMode: "per_rank_no_reduce",
      role: "rank",
      identity: identity(0),
      runDir,
      experiment: "e",
      trial: "t",
      resumeStep: 0,
      primaryMetadata: {},
    });
    backend.logStream([
      {
        key: "probe",
        value: 1.5,
        step: 7,
        timestamp: 1_600_000_000_123,
        rank: 0,
        rankName: "Trainer_0_r0",
        role: "rank",
        thread: 0,
      },
      {
        key: "probe",
        value: -Infinity,
        step: 7,
        timestamp: 1_600_000_000_456,
        rank: 0,
        rankName: "Trainer_0_r0",
        role: "rank",
        thread: 0,
      },
    ]);
    await backend.finish();
    const rows = server.history("stream-ts_Trainer_0_r0");
    assert.deepEqual(
      rows.map((r) => [r["_timestamp"], r["global_step"], r["probe"]]),
      [
        [1_600_000_000.123, 7, 1.5],
        [1_600_000_000.456, 7, -Infinity],
      ],
    );
  });
});

describe("wandb values beyond scalars", () => {
  it("sends histograms as W&B histogram objects in the step's row, and warns once that samples are not sent", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "exp10", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig() });
    const seen = await collectDiagnostics(async () => {
      for (const v of [1, 2, 2, 3, 10]) recordMetric("weights", v, Reduce.HISTOGRAM);
      recordMetric("loss", 0.5, Reduce.MEAN);
      recordMetric("global_step", 99, Reduce.MAX);
      recordMetric("episode", { prompt: "p", reward: 1 }, Reduce.SAMPLE);
      await logger.flush(0);
      await logger.shutdown();
    });
    const rows = server.history("exp10_t1");
    assert.equal(rows.length, 1, "scalars and histograms of a step share one row");
    const h = rows[0]?.["weights"] as { _type: string; values: number[]; bins: number[] };
    assert.equal(h._type, "histogram");
    assert.equal(h.bins.length, h.values.length + 1, "n + 1 bin edges");
    assert.equal(
      h.values.reduce((a, b) => a + b, 0),
      5,
      "every value is counted",
    );
    assert.ok(
      h.bins.every((b, i) => i === 0 || b >= (h.bins[i - 1] as number)),
      "edges ascend",
    );
    assert.equal(rows[0]?.["loss"], 0.5);
    assert.equal(rows[0]?.["global_step"], 0, "the row's own global_step is not overwritten");
    assert.equal(rows[0]?.["metric/global_step"], 99, "a metric named like a row field is renamed");
    assert.ok(seen.some((d) => d.code === "wandb.reservedKey:global_step"));
    assert.equal(seen.filter((d) => d.code === "wandb.samples").length, 0, "no warning: samples are sent as tables");
  });

  it("sends samples as W&B tables: a .table.json run file, uploaded and listed as uploaded, referenced from the step's row; config.yaml, version.json and the summary are uploaded too", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "exp11", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig() }, { runConfig: { lr: 0.1 } });
    const specials = [NaN, Infinity];
    for (let step = 0; step < 2; step++) {
      recordMetric("loss", specials[step] as number, Reduce.MEAN);
      recordMetric(
        "rollout/episode",
        { prompt: `p${step}`, reward: step, extra: step === 1 ? -Infinity : "x" },
        Reduce.SAMPLE,
      );
      recordMetric("rollout/episode", { prompt: `q${step}`, reward: 10 + step }, Reduce.SAMPLE);
      await logger.flush(step);
    }
    await logger.shutdown();
    const run = server.run("exp11_t1");
    assert.ok(run);
    const rows = server.history("exp11_t1");
    assert.equal(rows.length, 2);
    for (const [step, row] of rows.entries()) {
      const ref = row["rollout/episode"] as {
        _type: string;
        path: string;
        sha256: string;
        size: number;
        ncols: number;
        nrows: number;
      };
      assert.equal(ref._type, "table-file");
      assert.match(ref.path, new RegExp(`^media/table/rollout/episode_${step}_[0-9a-f]{20}\\.table\\.json$`));
      const file = run.files.get(ref.path);
      assert.ok(file, `the table file ${ref.path} was uploaded`);
      assert.ok(run.uploaded.has(ref.path), "and listed as uploaded in the file stream");
      assert.equal(ref.size, file.length);
      assert.equal(ref.sha256, createHash("sha256").update(file).digest("hex"));
      assert.equal(ref.path.slice(-31, -11), ref.sha256.slice(0, 20));
      const table = parseWandbJson(file.toString("utf8")) as { columns: string[]; data: unknown[][] };
      assert.deepEqual(table.columns, ["prompt", "reward", "extra"]);
      assert.equal(ref.ncols, 3);
      assert.equal(ref.nrows, table.data.length);
      // The sample reduction keeps its records (top-k by arrival); every kept record is in the table.
      const prompts = table.data.map((r) => r[0]).sort();
      assert.deepEqual(prompts, [`p${step}`, `q${step}`]);
      const p = table.data.find((r) => r[0] === `p${step}`) as unknown[];
      assert.deepEqual(p, [`p${step}`, step, step === 1 ? -Infinity : "x"]);
    }
    assert.ok(Number.isNaN(rows[0]?.["loss"]));
    assert.equal(rows[1]?.["loss"], Infinity);
    // The run files W&B users expect.
    assert.equal(run.files.get("config.yaml")?.toString("utf8"), readFileSync(join(runDir, "config.yaml"), "utf8"));
    assert.equal(run.files.get("version.json")?.toString("utf8"), readFileSync(join(runDir, "version.json"), "utf8"));
    const summary = parseWandbJson(run.files.get("wandb-summary.json")?.toString("utf8") ?? "") as Record<
      string,
      unknown
    >;
    assert.equal(summary["loss"], Infinity);
    assert.deepEqual(summary["rollout/episode"], rows[1]?.["rollout/episode"]);
    for (const name of ["config.yaml", "version.json", "wandb-summary.json"])
      assert.ok(run.uploaded.has(name), `${name} listed as uploaded`);
  });
});

describe("wandb metrics on an axis of their own", () => {
  it("logs them in rows of their own with {axis}: step and no global_step, without a step-went-back warning", async () => {
    const backend = new WandbBackend({ ...wandbConfig(), runId: "axis-run" });
    await backend.init({
      backendName: "wandb",
      displayName: "GlobalReduce",
      loggingMode: "global_reduce",
      role: "controller",
      identity: identity(0),
      runDir: tempDir(),
      experiment: "e",
      trial: "t",
      resumeStep: 0,
      primaryMetadata: {},
    });
    const now = Date.now();
    const seen = await collectDiagnostics(async () => {
      backend.logBatch([{ key: "loss", value: 1, reduce: "mean", step: 0, timestamp: now }], 0);
      await backend.flushed();
      // The system monitor's metrics carry `axis` (Metric.axis): their step is not the training step.
      const system = [0, 1].map((s) => ({
        key: "system/gpu_util",
        value: 50 + s,
        reduce: "mean",
        step: s,
        timestamp: now,
        axis: "system/step",
      }));
      backend.logBatch(system, 0);
      await backend.flushed();
      backend.logBatch([{ key: "loss", value: 2, reduce: "mean", step: 1, timestamp: now }], 1);
      await backend.flushed();
      await backend.finish();
    });
    const rows = server.history("axis-run");
    assert.deepEqual(
      rows.map((r) => [r["_step"], r["global_step"], r["system/step"], r["loss"], r["system/gpu_util"]]),
      [
        [0, 0, undefined, 1, undefined],
        [1, undefined, 0, undefined, 50],
        [2, undefined, 1, undefined, 51],
        [3, 1, undefined, 2, undefined],
      ],
    );
    assert.ok(
      !seen.some((d) => d.code.startsWith("wandb.stepBackwards")),
      "rows on another axis are not a step going back",
    );
  });
});

describe("wandb never blocks the loop", () => {
  it("flush returns while the server has not answered yet", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "exp11", trial: "t1" });
    await logger.initBackends({ wandb: wandbConfig({ requestTimeoutMs: 20_000, finishTimeoutMs: 20_000 }) });
    server.injectFaults("file_stream", { kind: "late", ms: 3000 });
    recordMetric("x", 0, Reduce.MEAN);
    await logger.flush(0);
    const hanging = (): boolean => server.requests.some((r) => r.kind === "file_stream" && r.status === 0);
    await waitFor(hanging, {
      timeoutMs: 20_000,
      what: "the first file_stream request to reach the server",
      intervalMs: 10,
    });
    for (let step = 1; step < 5; step++) {
      recordMetric("x", step, Reduce.MEAN);
      await logger.flush(step);
    }
    assert.ok(hanging(), "four more flushes returned while the first request still waited for its answer");
    await logger.shutdown();
    assert.deepEqual(valuesOf(server.history("exp11_t1"), "x"), [0, 1, 2, 3, 4]);
  });
});

describe("wandb key hygiene", () => {
  it("never writes the API key to the run directory, diagnostics or errors", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "exp8", trial: "t1" });
    const seen = await collectDiagnostics(async () => {
      // A 401-producing key mismatch is not possible here (the key is right); force faults that produce messages.
      server.injectFaults("file_stream", { kind: "status", status: 500 }, { kind: "status", status: 400 });
      await logger.initBackends({ wandb: wandbConfig() });
      recordMetric("x", 1, Reduce.MEAN);
      await logger.flush(0);
      await logger.shutdown();
    });
    assert.ok(seen.length > 0, "faults produced diagnostics to check");
    for (const d of seen) assert.ok(!d.message.includes(API_KEY), `diagnostic ${d.code} does not contain the key`);
    assert.deepEqual(filesContainingKey(runDir), []);
    assert.ok((diagnosticCounts()["wandb.spooling:exp8_t1"] ?? 0) >= 1, "the 400 made the writer spool");
  });
});
