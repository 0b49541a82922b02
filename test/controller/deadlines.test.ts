/**
 * Issue 12's delivery cases, through the public API: a hanging backend, flush before init, a
 * second logger or init, secrets on every path, and the small silent cases (bad settings, a bad
 * store option, recording after shutdown, a huge bigint, a corrupt metrics.db).
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { join } from "node:path";
import { after, test } from "node:test";
import { closeStores, config, listRuns } from "../../src/store/reader.js";
import { resolveWandbOptions } from "../../src/backends/wandb/options.js";
import { formatRunsTable } from "../../src/cli/commands/runs.js";
import {
  configureTextLogs,
  getLogger,
  getOrCreateMetricLogger,
  recordMetric,
  registerBackend,
  type FlushResult,
  type Metric,
} from "../../src/index.js";
import { getCollector } from "../../src/core/collector.js";
import { startDashboard } from "../../src/ui/server.js";
import { collectDiagnostics, tempDir } from "../helpers.js";

const collector = getCollector();
const dirs: string[] = [];
function scratch(): string {
  const dir = tempDir("rankscope-deadlines-");
  dirs.push(dir);
  return dir;
}
after(() => {
  closeStores();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function jsonlSteps(file: string, key: string): number[] {
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { key: string; step: number })
    .filter((m) => m.key === key)
    .map((m) => m.step);
}

test(
  "a backend whose logBatch never resolves: flush returns, jsonl gets every step, the hang is reported by name and counted",
  { timeout: 60_000 },
  async () => {
    collector.clear();
    let hangCalls = 0;
    registerBackend("hang", () => ({
      logBatch: () => {
        hangCalls++;
        return new Promise<void>(() => {});
      },
    }));
    const runDir = scratch();
    const logger = await getOrCreateMetricLogger({ runDir });
    // The short deadline is the hung backend's alone: on a loaded machine jsonl's own writes could
    // outlast 300 ms, and it would be skipped too.
    await logger.initBackends({
      hang: { loggingMode: "global_reduce", deadlineMs: 300 },
      jsonl: { loggingMode: "global_reduce" },
    });
    let last: FlushResult | undefined;
    const seen = await collectDiagnostics(async () => {
      for (let step = 0; step < 4; step++) {
        recordMetric("x", step);
        last = await logger.flush(step);
      }
      await logger.shutdown();
    });
    assert.deepEqual(jsonlSteps(join(runDir, "metrics.jsonl"), "x"), [0, 1, 2, 3], "the other backend got every step");
    // One late call, then its calls are skipped (not queued behind the hung promise) and counted.
    assert.equal(hangCalls, 1);
    assert.deepEqual(last?.undelivered, { hang: { late: 1, skipped: 3, failed: 0, undelivered: 4 } });
    assert.deepEqual(jsonlSteps(join(runDir, "metrics.jsonl"), "rankscope/backend_undelivered/hang"), [1, 2, 3]);
    const deadline = seen.find((d) => d.code === "backend.deadline:hang:logBatch");
    assert.match(deadline?.message ?? "", /backend "hang" did not answer logBatch within 300 ms/);
    assert.ok(seen.some((d) => d.code === "backend.skipped:hang"));
  },
);

test(
  "a backend whose init never resolves does not hold up initBackends or the other backends",
  { timeout: 60_000 },
  async () => {
    collector.clear();
    const got: Metric[] = [];
    registerBackend("slowInit", () => ({ init: () => new Promise<void>(() => {}), logBatch: () => {} }));
    registerBackend("capture", () => ({ logBatch: (metrics: readonly Metric[]) => void got.push(...metrics) }));
    const logger = await getOrCreateMetricLogger({ runDir: scratch() });
    await collectDiagnostics(async () => {
      await logger.initBackends({
        slowInit: { loggingMode: "global_reduce", deadlineMs: 200 },
        capture: { loggingMode: "global_reduce" },
      });
      recordMetric("y", 7);
      const result = await logger.flush(0);
      assert.deepEqual(result.undelivered["slowInit"], { late: 1, skipped: 1, failed: 0, undelivered: 2 });
      await logger.shutdown();
    });
    assert.deepEqual(
      got.filter((m) => m.key === "y").map((m) => m.value),
      [7],
    );
  },
);

test("flush before initBackends keeps the values: the first flush after init logs them at their own step", async () => {
  collector.clear();
  const runDir = scratch();
  const logger = await getOrCreateMetricLogger({ runDir });
  const seen = await collectDiagnostics(async () => {
    recordMetric("early", 1);
    const before = await logger.flush(0);
    assert.equal(before.beforeInit, true);
    await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
    recordMetric("early", 2);
    await logger.flush(1);
    await logger.shutdown();
  });
  assert.deepEqual(jsonlSteps(join(runDir, "metrics.jsonl"), "early"), [0, 1]);
  assert.match(
    seen.find((d) => d.code === "flush.beforeInit")?.message ?? "",
    /kept and logged at their own steps by the first flush after initBackends/,
  );
});

test("a second getOrCreateMetricLogger with other options is an error; a second initBackends is an error", async () => {
  const logger = await getOrCreateMetricLogger({ runDir: scratch(), experiment: "first" });
  assert.equal(await getOrCreateMetricLogger(), logger, "no options: the existing logger");
  assert.equal(await getOrCreateMetricLogger({ experiment: "first" }), logger, "the same options: the existing logger");
  await assert.rejects(
    getOrCreateMetricLogger({ experiment: "other" }),
    /a logger already exists in this process .* experiment: "other" \(the logger has "first"\)\. Call shutdown\(\) on it first/,
  );
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  await assert.rejects(
    logger.initBackends({ console: { loggingMode: "global_reduce" } }),
    /initBackends\(\) was already called on this logger; .* call shutdown\(\) first .* or pass \{ replace: true \}/,
  );
  await logger.initBackends({ console: { loggingMode: "global_reduce" } }, { replace: true });
  await logger.shutdown();
  const next = await getOrCreateMetricLogger({ experiment: "other", runDir: scratch() });
  assert.notEqual(next, logger);
  await next.shutdown();
});

test("secrets are redacted on every path: metrics.db hyperparams, the wandb config option, text logs, config.yaml", async () => {
  const runDir = scratch();
  const logger = await getOrCreateMetricLogger({ runDir });
  await logger.initBackends(
    { store: { loggingMode: "global_reduce", waitForWrites: true } },
    { runConfig: { apiKey: "sk-config", lr: 0.1 } },
  );
  await logger.logHyperparams({
    apiKey: "sk-live-123",
    password: "hunter2",
    nested: { token: "tok-9", depth: 3 },
    lr: 0.01,
  });
  await logger.flush(0);
  await logger.shutdown();
  const stored = JSON.stringify(config(runDir));
  for (const secret of ["sk-live-123", "hunter2", "tok-9"])
    assert.ok(!stored.includes(secret), `${secret} in metrics.db: ${stored}`);
  assert.match(stored, /"lr":0\.01/);
  assert.match(stored, /REDACTED/);
  assert.ok(!readFileSync(join(runDir, "config.yaml"), "utf8").includes("sk-config"));

  const wandb = resolveWandbOptions(
    { loggingMode: "global_reduce", mode: "offline", config: { apiKey: "sk-w", nested: { password: "pw" }, lr: 1 } },
    {},
  );
  assert.deepEqual(wandb.config, { apiKey: "***REDACTED***", nested: { password: "***REDACTED***" }, lr: 1 });

  let printed = "";
  configureTextLogs({ console: { write: (s: string) => (printed += s) }, files: false, color: false });
  getLogger("Trainer").info({ apiKey: "sk-text", epoch: 2 }, "starting");
  configureTextLogs({});
  assert.match(printed, /starting/);
  assert.match(printed, /epoch=2/);
  assert.ok(!printed.includes("sk-text"), printed);
});

test("invalid settings are TypeErrors naming the setting, its source and what is valid", async () => {
  await assert.rejects(getOrCreateMetricLogger({ flushDeadlineMs: -5 }), {
    name: "TypeError",
    message: "getOrCreateMetricLogger: flushDeadlineMs must be an integer from 1 to 3600000, got -5",
  });
  await assert.rejects(
    getOrCreateMetricLogger({ flushDeadlineMs: "abc" as never }),
    /flushDeadlineMs must be an integer from 1 to 3600000, got "abc"/,
  );
  await assert.rejects(
    getOrCreateMetricLogger({ flushDeadlinMs: 5 } as never),
    /getOrCreateMetricLogger: unknown option "flushDeadlinMs"; valid: processName, flushDeadlineMs/,
  );
  process.env["RANKSCOPE_BACKEND_DEADLINE_MS"] = "soon";
  try {
    await assert.rejects(getOrCreateMetricLogger(), {
      name: "TypeError",
      message: `RANKSCOPE_BACKEND_DEADLINE_MS="soon" is not valid (it sets getOrCreateMetricLogger's backendDeadlineMs); valid: an integer from 1 to 3600000`,
    });
  } finally {
    delete process.env["RANKSCOPE_BACKEND_DEADLINE_MS"];
  }
});

test("an invalid store option makes initBackends throw the TypeError, before anything starts", async () => {
  const logger = await getOrCreateMetricLogger({ runDir: scratch() });
  // @ts-expect-error -- a wrong option type is a compile error too; this checks the runtime error
  await assert.rejects(logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: "yes" } }), {
    name: "TypeError",
    message: 'backend "store": waitForWrites must be true or false, got "yes"',
  });
  await logger.shutdown();
});

test("recordMetric after shutdown is counted and warned about once; a new logger logs again", async () => {
  collector.clear();
  const logger = await getOrCreateMetricLogger({ runDir: scratch() });
  recordMetric("late", 1);
  await logger.flush(0);
  await logger.shutdown();
  const seen = await collectDiagnostics(() => {
    for (let i = 0; i < 5; i++) recordMetric("late", i);
    recordMetric("brandNew", 1);
  });
  // Counted every time; said once.
  assert.equal(collector.recordedAfterClose, 6);
  const warned = seen.filter((d) => d.code === "collector.recordAfterShutdown");
  assert.equal(warned.length, 1);
  assert.match(
    warned[0]?.message ?? "",
    /recorded after the logger's shutdown\(\): values recorded now are not logged \(counted in getCollector\(\)\.recordedAfterClose\)/,
  );
  const next = await getOrCreateMetricLogger({ runDir: scratch() });
  recordMetric("late", 42);
  const result = await next.flush(0);
  assert.deepEqual(
    result.metrics.filter((m) => m.key === "late").map((m) => m.value),
    [42],
  );
  await next.shutdown();
  collector.clear();
});

test("a bigint beyond the float64 range is a RangeError, not a silent Infinity", () => {
  assert.throws(() => recordMetric("huge", 10n ** 400n), {
    name: "RangeError",
    message: /the bigint 1000000000.* is beyond the range of a float64 .* would become Infinity/,
  });
  recordMetric("fine", 2n ** 60n);
  collector.clear();
});

test(
  "a corrupt metrics.db: the dashboard answers a JSON error with the reason, rankscope runs a row with the reason",
  { timeout: 60_000 },
  async () => {
    const root = scratch();
    mkdirSync(join(root, "exp", "broken"), { recursive: true });
    writeFileSync(join(root, "exp", "broken", "metrics.db"), Buffer.alloc(8192, 7));
    const runs = listRuns(root);
    assert.equal(runs.length, 1);
    assert.equal(runs[0]?.experiment, "exp");
    assert.equal(runs[0]?.trial, "broken");
    assert.equal(runs[0]?.status, "unknown");
    assert.match(runs[0]?.error ?? "", /metrics\.db is not a SQLite database \(damaged, or not written by rankscope\)/);
    // The row is named from its path, and the reason is printed under it.
    assert.match(formatRunsTable(runs), /exp +broken +unknown[^\n]*\n {2}metrics\.db is not a SQLite database/);

    const dashboard = await startDashboard({ root, port: 0 });
    try {
      const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        get(new URL("/api/keys?run=exp/broken", dashboard.url), (res) => {
          let text = "";
          res.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        }).on("error", reject);
      });
      assert.equal(status, 500);
      assert.match(
        (JSON.parse(body) as { error: string }).error,
        /^run "exp\/broken": metrics\.db is not a SQLite database/,
      );
    } finally {
      await dashboard.close();
    }
  },
);

test(
  "a hung per-rank backend: the rank still answers the flush, and its misses reach the global backends",
  { timeout: 60_000 },
  async () => {
    collector.clear();
    registerBackend("hangRank", () => ({ logBatch: () => new Promise<void>(() => {}) }));
    const runDir = scratch();
    const logger = await getOrCreateMetricLogger({ runDir, flushDeadlineMs: 2000 });
    await collectDiagnostics(async () => {
      await logger.initBackends({
        hangRank: { loggingMode: "per_rank_reduce", deadlineMs: 200 },
        jsonl: { loggingMode: "global_reduce" },
      });
      for (let step = 0; step < 3; step++) {
        recordMetric("z", step);
        const result = await logger.flush(step);
        assert.deepEqual(result.missingRanks, []);
      }
      await logger.shutdown();
    });
    assert.deepEqual(jsonlSteps(join(runDir, "metrics.jsonl"), "z"), [0, 1, 2]);
    // Missed at step 0 (late), reported with step 1's states, then skipped at steps 1 and 2.
    assert.deepEqual(jsonlSteps(join(runDir, "metrics.jsonl"), "rankscope/backend_undelivered/hangRank"), [1, 2]);
  },
);
