/**
 * The `wandb` backend under faults, against the strict local W&B server (a contract test: the W&B
 * cloud is not reachable from here). Whatever happens — 500s, 429 with Retry-After, answers that
 * come too late, reset connections, a server that goes away and comes back, no network at all —
 * every recorded value must reach the server exactly once, live or through `rankscope wandb sync`.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { LocalRankHandle, RankRuntime } from "../../../src/pipeline/runtime.js";
import { Collector, recordMetric } from "../../../src/core/collector.js";
import { diagnosticCounts } from "../../../src/core/diagnostics.js";
import { Reduce } from "../../../src/core/registry.js";
import type { BackendConfigOf } from "../../../src/backends/options.js";
import { syncSpool, WandbBackend } from "../../../src/backends/wandb/index.js";
import type { FileStreamBody } from "../../../src/backends/wandb/client/api.js";
import { builtCli, collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { API_KEY, FAST, allFiles, filesContainingKey, resetProcess, startServer, valuesOf } from "./wandb-helpers.js";
import type { StrictWandbServer } from "./wandb-server.js";

let server: StrictWandbServer;

beforeEach(async () => {
  resetProcess();
  server = await startServer();
});
afterEach(async () => {
  await server.stop();
  assert.deepEqual(server.violations, [], "the strict server saw requests that break the W&B contract");
});

function config(extra: Partial<BackendConfigOf<"wandb">> = {}): BackendConfigOf<"wandb"> {
  return {
    loggingMode: "global_reduce",
    baseUrl: server.baseUrl,
    apiKey: API_KEY,
    project: "faults",
    ...FAST,
    ...extra,
  };
}

/** Record step-unique values of two keys and flush, for steps [from, to). */
async function steps(logger: MetricLogger, from: number, to: number): Promise<void> {
  for (let step = from; step < to; step++) {
    recordMetric("loss", step + 0.25, Reduce.MEAN);
    recordMetric("count", step * 2, Reduce.SUM);
    await logger.flush(step);
  }
}

function assertExactlyOnce(runId: string, count: number): void {
  const rows = server.history(runId);
  const expectedSteps = Array.from({ length: count }, (_, s) => s);
  assert.deepEqual(
    rows.map((r) => r["global_step"]),
    expectedSteps,
    "every step exactly once, in order",
  );
  assert.deepEqual(
    valuesOf(rows, "loss"),
    expectedSteps.map((s) => s + 0.25),
  );
  assert.deepEqual(
    valuesOf(rows, "count"),
    expectedSteps.map((s) => s * 2),
  );
  const run = server.run(runId);
  assert.equal(run?.complete, true, "the run is marked complete");
  assert.equal(run?.exitcode, 0);
}

const cli = builtCli();

/** Run the CLI in a child process (asynchronously: the strict server lives in this process). */
function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

describe("wandb under faults", () => {
  it("retries 500s and 429 (honouring Retry-After) and delivers every value once", async () => {
    server.injectFaults("graphql", { kind: "status", status: 503 });
    server.injectFaults(
      "file_stream",
      { kind: "status", status: 500 },
      { kind: "status", status: 429, retryAfter: "1" },
      { kind: "status", status: 502 },
    );
    const logger = new MetricLogger({ runDir: tempDir(), experiment: "f1", trial: "t" });
    await logger.initBackends({ wandb: config() });
    await steps(logger, 0, 8);
    await logger.shutdown();
    assertExactlyOnce("f1_t", 8);
    assert.equal(server.pendingFaults, 0, "every injected fault was hit");
    assert.ok((diagnosticCounts()["wandb.retry:f1_t"] ?? 0) >= 4, "retries are counted");
    assert.ok(
      server.requests.some((r) => r.status === 429),
      "a 429 was answered",
    );
  });

  it("waits at least what Retry-After asks before retrying", async () => {
    const times: number[] = [];
    server.injectFaults("file_stream", { kind: "status", status: 429, retryAfter: "1" });
    const backend = new WandbBackend(config({ runId: "retry-after" }));
    await backend.init(context(tempDir()));
    const original = server.requests.push.bind(server.requests);
    server.requests.push = (...items) => {
      for (const item of items) if (item.kind === "file_stream") times.push(Date.now());
      return original(...items);
    };
    backend.logBatch([{ key: "x", value: 1, reduce: "mean", step: 0, timestamp: Date.now() }], 0);
    await backend.flushed();
    await backend.finish();
    assert.ok(times.length >= 2);
    assert.ok(
      (times[1] as number) - (times[0] as number) >= 950,
      `the retry came ${(times[1] as number) - (times[0] as number)} ms after the 429 with Retry-After: 1`,
    );
    assert.deepEqual(valuesOf(server.history("retry-after"), "x"), [1]);
  });

  it("survives answers that come after the client's timeout and reset connections: retries are idempotent", async () => {
    server.injectFaults("file_stream", { kind: "late", ms: 1500 }, { kind: "reset" }, { kind: "late", ms: 1500 });
    const logger = new MetricLogger({ runDir: tempDir(), experiment: "f2", trial: "t" });
    await logger.initBackends({ wandb: config() });
    await steps(logger, 0, 6);
    await logger.shutdown();
    assertExactlyOnce("f2_t", 6);
    assert.equal(server.pendingFaults, 0);
  });

  it("keeps going when the server refuses connections for a while and comes back", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "f3", trial: "t" });
    await logger.initBackends({ wandb: config({ retryBudgetMs: 20_000, retryMaxMs: 100, finishTimeoutMs: 15_000 }) });
    await steps(logger, 0, 3);
    await server.stop();
    await steps(logger, 3, 7); // flush never waits on the network
    await new Promise((resolve) => setTimeout(resolve, 300));
    await server.start();
    await steps(logger, 7, 10);
    await logger.shutdown();
    assertExactlyOnce("f3_t", 10);
    assert.equal(existsSync(join(runDir, "wandb")), false, "nothing had to be spooled");
  });

  it("spools what it cannot send during a long outage; sync delivers the rest exactly once and a second sync is a no-op", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "f4", trial: "t" });
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({ wandb: config({ retryBudgetMs: 300, finishTimeoutMs: 500 }) });
      await steps(logger, 0, 4);
      await server.stop();
      await steps(logger, 4, 12);
      await logger.shutdown();
    });
    assert.ok(
      seen.some((d) => d.code === "wandb.spooling:f4_t" && /rankscope wandb sync/.test(d.message)),
      "the error says how to sync",
    );
    await server.start();
    const live = server.history("f4_t").length;
    assert.ok(live < 12, "part of the run waited in the spool");
    const first = await syncSpool(runDir, { apiKey: API_KEY, limits: FAST });
    assert.equal(first.runs[0]?.linesSent, 12 - live);
    assertExactlyOnce("f4_t", 12);
    const before = server.fileStreamRequests;
    const second = await syncSpool(runDir, { apiKey: API_KEY, limits: FAST });
    assert.equal(second.runs[0]?.linesSent, 0);
    assert.equal(server.fileStreamRequests, before, "the second sync sent nothing");
    assertExactlyOnce("f4_t", 12);
    assert.deepEqual(filesContainingKey(runDir), []);
  });

  it("after an outage longer than the retry budget, sends the spool itself at finish if the server is back", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "f9", trial: "t" });
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({ wandb: config({ retryBudgetMs: 300, finishTimeoutMs: 5000 }) });
      await steps(logger, 0, 3);
      await server.stop();
      await steps(logger, 3, 6);
      await waitFor(() => (diagnosticCounts()["wandb.spooling:f9_t"] ?? 0) > 0, {
        timeoutMs: 20_000,
        what: "the backend to start spooling (wandb.spooling:f9_t)",
        intervalMs: 20,
      });
      await server.start();
      await steps(logger, 6, 9);
      await logger.shutdown();
    });
    assertExactlyOnce("f9_t", 9);
    assert.ok(
      seen.some((d) => d.code.startsWith("wandb.recovered")),
      "a message says the spool was sent at finish",
    );
    assert.ok(!seen.some((d) => d.code.startsWith("wandb.spooled")), "no message asks for a manual sync");
    const before = server.fileStreamRequests;
    const again = await syncSpool(runDir, { apiKey: API_KEY, limits: FAST });
    assert.equal(again.runs[0]?.linesSent, 0);
    assert.equal(server.fileStreamRequests, before, "a manual sync afterwards is a no-op");
  });

  it("offline mode spools everything as it would have been sent; `rankscope wandb sync` replays it with a progress bar, once", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "f5", trial: "t" });
    await logger.initBackends({ wandb: config({ mode: "offline", config: { lr: 0.5 } }) }, { runConfig: { batch: 4 } });
    for (let step = 0; step < 20; step++) {
      recordMetric("loss", step + 0.25, Reduce.MEAN);
      recordMetric("count", step * 2, Reduce.SUM);
      if (step === 7) recordMetric("rollout", { prompt: "p", reward: 1 }, Reduce.SAMPLE);
      await logger.flush(step);
    }
    await logger.shutdown();
    assert.equal(server.requests.length, 0, "offline mode makes no request");
    const spoolFile = join(runDir, "wandb", "f5_t", "file_stream.jsonl");
    const lines = readFileSync(spoolFile, "utf8").trim().split("\n");
    assert.deepEqual(JSON.parse(lines[0] as string), { spool: 1, clientId: null, absoluteOffsets: false });
    const bodies = lines.slice(1).map((l) => JSON.parse(l) as FileStreamBody);
    const offsets = bodies.flatMap((b) => {
      const h = b.files?.["wandb-history.jsonl"];
      return h === undefined ? [] : h.content.map((_, i) => h.offset + i);
    });
    assert.deepEqual(
      offsets,
      Array.from({ length: 20 }, (_, i) => i),
      "contiguous offsets, as the server expects them",
    );
    assert.deepEqual(bodies[bodies.length - 1], { complete: true, exitcode: 0 });
    assert.deepEqual(filesContainingKey(runDir), []);

    const first = await runCli(["wandb", "sync", runDir, "--base-url", server.baseUrl], { WANDB_API_KEY: API_KEY });
    assert.equal(first.status, 0, first.stderr);
    assert.match(first.stderr, /\[#{30}\] 100% {2}20\/20 lines {2}f5_t/, "a progress bar on stderr");
    assert.match(first.stdout, /f5_t: 20 history line\(s\) sent, 0 already on the server, run marked complete/);
    assertExactlyOnce("f5_t", 20);
    const version = JSON.parse(readFileSync(join(runDir, "version.json"), "utf8")) as unknown;
    assert.deepEqual(server.run("f5_t")?.config, {
      lr: { value: 0.5 },
      batch: { value: 4 },
      version_info: { value: version },
    });
    // The spooled run files (the step's table, config.yaml, version.json, the summary) are uploaded by sync too.
    const table = server.history("f5_t")[7]?.["rollout"] as { _type: string; path: string };
    assert.equal(table._type, "table-file");
    const run = server.run("f5_t");
    assert.deepEqual(
      [...(run?.uploaded ?? [])].sort(),
      ["config.yaml", table.path, "version.json", "wandb-summary.json"].sort(),
    );
    assert.equal(run?.files.get("version.json")?.toString("utf8"), readFileSync(join(runDir, "version.json"), "utf8"));
    assert.deepEqual(JSON.parse(run?.files.get(table.path)?.toString("utf8") ?? ""), {
      columns: ["prompt", "reward"],
      data: [["p", 1]],
    });
    const before = server.fileStreamRequests;
    const second = await runCli(["wandb", "sync", runDir, "--base-url", server.baseUrl], { WANDB_API_KEY: API_KEY });
    assert.equal(second.status, 0, second.stderr);
    assert.match(second.stdout, /f5_t: 0 history line\(s\) sent, 20 already on the server/);
    assert.equal(server.fileStreamRequests, before, "the second sync is a no-op");
    assert.ok(!first.stderr.includes(API_KEY) && !first.stdout.includes(API_KEY));
  });

  it("sync says what was expected when there is no spool, and what to set when there is no key", async () => {
    const result = await runCli(["wandb", "sync", tempDir()], { WANDB_API_KEY: "" });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /no W&B spool under .*run\.json/);
    const runDir = tempDir();
    const backend = new WandbBackend(config({ runId: "nokey", mode: "offline" }));
    await backend.init(context(runDir));
    await backend.finish();
    const noKey = await runCli(["wandb", "sync", runDir], { WANDB_API_KEY: "" });
    assert.equal(noKey.status, 1);
    assert.match(noKey.stderr, /no W&B API key: set WANDB_API_KEY/);
  });

  it("keeps the queue within its byte bound during an outage, spooling the overflow", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "f6", trial: "t" });
    await logger.initBackends({ wandb: config({ maxQueuedBytes: 2000, retryBudgetMs: 60_000, finishTimeoutMs: 200 }) });
    await server.stop();
    for (let step = 0; step < 60; step++) {
      recordMetric("loss", step + 0.25, Reduce.MEAN);
      recordMetric("count", step * 2, Reduce.SUM);
      await logger.flush(step);
    }
    await logger.shutdown();
    await server.start();
    const result = await syncSpool(runDir, { apiKey: API_KEY, limits: FAST });
    assert.equal(result.runs[0]?.linesSent, 60);
    assertExactlyOnce("f6_t", 60);
    assert.ok((diagnosticCounts()["wandb.spooling:f6_t"] ?? 0) >= 1);
  });

  it("queue memory never exceeds the bound (writer counters)", async () => {
    await server.stop();
    const backend = new WandbBackend(
      config({ runId: "bound", maxQueuedBytes: 5000, retryBudgetMs: 60_000, finishTimeoutMs: 100 }),
    );
    const runDir = tempDir();
    await backend.init(context(runDir));
    for (let step = 0; step < 500; step++) {
      backend.logBatch(
        [{ key: "metric/with/a/longish/name", value: step, reduce: "mean", step, timestamp: Date.now() }],
        step,
      );
      await backend.flushed();
      assert.ok((backend.runWriter?.pendingBytes ?? 0) <= 5000);
    }
    assert.ok((backend.runWriter?.stats.maxQueuedBytes ?? Infinity) <= 5000);
    await backend.finish();
    assert.equal(backend.runWriter?.stats.linesSpooled, 500);
  });

  it("perRankShareRun offline: every rank's spool and the primary's completion replay in one sync", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, experiment: "f7", trial: "t" });
    const ranks = [0, 1].map(
      (r) =>
        new RankRuntime(
          { rank: r, rankName: `R${r}`, processName: "R", localRank: r, localWorldSize: 2 },
          new Collector(),
        ),
    );
    for (const rank of ranks) await logger.registerRank(new LocalRankHandle(rank));
    await logger.initBackends({
      wandb: config({ loggingMode: "per_rank_reduce", perRankShareRun: true, mode: "offline" }),
    });
    for (let step = 0; step < 5; step++) {
      ranks.forEach((rank, r) => rank.collector.recordSlow("loss", r + step / 10, Reduce.MEAN));
      await logger.flush(step);
    }
    await logger.shutdown();
    const files = allFiles(join(runDir, "wandb"))
      .map((f) => f.slice(runDir.length + 1))
      .sort();
    assert.ok(
      files.every((f) => f.startsWith(join("wandb", "f7_t"))),
      `one spool, for the shared run: ${files.join(", ")}`,
    );
    for (const name of [
      "file_stream.R0.jsonl",
      "file_stream.R1.jsonl",
      "file_stream.rankscope-primary.jsonl",
      "run.json",
    ]) {
      assert.ok(files.includes(join("wandb", "f7_t", name)), `${name} in ${files.join(", ")}`);
    }
    assert.ok(
      !files.some((f) => f.includes("Controller")),
      "the controller's own rank logged nothing and spooled nothing",
    );
    await syncSpool(runDir, { apiKey: API_KEY, limits: FAST });
    for (const r of [0, 1])
      assert.deepEqual(
        valuesOf(server.history("f7_t", `R${r}`), `R${r}/loss`),
        [0, 1, 2, 3, 4].map((s) => r + s / 10),
      );
    assert.equal(server.run("f7_t")?.complete, true);
    const before = server.fileStreamRequests;
    await syncSpool(runDir, { apiKey: API_KEY, limits: FAST });
    assert.equal(server.fileStreamRequests, before, "the second sync is a no-op");
  });

  it("without an API key, online mode spools and says how to fix it", async () => {
    const runDir = tempDir();
    const saved = process.env["WANDB_API_KEY"];
    delete process.env["WANDB_API_KEY"];
    try {
      const logger = new MetricLogger({ runDir, experiment: "f8", trial: "t" });
      const seen = await collectDiagnostics(async () => {
        await logger.initBackends({ wandb: config({ apiKey: undefined }) });
        await steps(logger, 0, 2);
        await logger.shutdown();
      });
      assert.ok(seen.some((d) => /no API key: set WANDB_API_KEY/.test(d.message)));
      assert.equal(server.requests.length, 0);
      await syncSpool(runDir, { apiKey: API_KEY, limits: FAST });
      assertExactlyOnce("f8_t", 2);
    } finally {
      if (saved !== undefined) process.env["WANDB_API_KEY"] = saved;
    }
  });
});

function context(runDir: string): Parameters<WandbBackend["init"]>[0] {
  return {
    backendName: "wandb",
    displayName: "GlobalReduce",
    loggingMode: "global_reduce",
    role: "controller",
    identity: { rank: 0, rankName: "Controller", processName: "Controller", localRank: 0, localWorldSize: 1 },
    runDir,
    experiment: "e",
    trial: "t",
    resumeStep: 0,
    primaryMetadata: {},
  };
}
