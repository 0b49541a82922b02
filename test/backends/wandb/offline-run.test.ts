/**
 * Offline runs for W&B's own `wandb sync`: an offline rankscope run writes
 * `wandb/offline-run-…-{id}/run-{id}.wandb`, and the official SDK reads it back.
 *
 * `wandb sync` (the official CLI; wandb-core reads the file) uploads it to the strict local
 * contract server (test/backends/wandb/wandb-server.ts on 127.0.0.1), which must receive every value.
 * The reader is test/backends/wandb/python/read_wandb_log.py: framing checked as wandb-core's reader
 * checks it, every record parsed with the SDK's own `wandb_internal_pb2.Record`. The SDK comes
 * from the shared test venv (test/helpers/python.ts); where it cannot be set up, that test is
 * skipped saying why, and the fallback test below checks the framing and the records against our
 * proto declaration.
 */
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { promisify } from "node:util";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, beforeEach, it } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { recordMetric } from "../../../src/core/collector.js";
import { Reduce } from "../../../src/core/registry.js";
import { REDACTED } from "../../../src/run/run-files.js";
import { createHash } from "node:crypto";
import { parseHistoryJson } from "../../../src/backends/wandb/client/history.js";
import { WandbRecord } from "../../../src/backends/wandb/offline/offline-run.js";
import { tempDir } from "../../helpers.js";
import { pythonKit } from "../../helpers/python.js";
import { decodeTransactionLog, resetProcess, wandbSdkEnv } from "./wandb-helpers.js";
import { StrictWandbServer } from "./wandb-server.js";

const execFileAsync = promisify(execFile);

const here = dirname(fileURLToPath(import.meta.url));
beforeEach(() => resetProcess());
const scratch: string[] = [];
after(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

const SPECIALS = [NaN, Infinity, -Infinity, 0.1, -0, 1e308];
const WIDE_KEYS = 1500; // one history record far larger than a 32 KiB block

/** One history row as recorded: W&B's `_step`, the caller's step, the scalar values. */
interface Row {
  readonly wandbStep: number;
  readonly globalStep: number;
  readonly values: Record<string, number>;
}

/**
 * An offline run through real MetricLoggers, in two attempts: steps 0..19, then a restart from a
 * checkpoint at step 15 (resumeStep 15) logging steps 15..24. Returns the run directory and the
 * rows of each attempt.
 */
async function offlineRun(): Promise<{ runDir: string; attempts: Row[][]; versions: unknown[] }> {
  const runDir = tempDir();
  scratch.push(runDir);
  const attempts: Row[][] = [];
  // Each attempt writes its own version.json (and logs it in its config).
  const versions: unknown[] = [];
  let wandbStep = 0;
  for (const [from, to, resumeStep] of [
    [0, 20, 0],
    [15, 25, 15],
  ] as const) {
    resetProcess();
    const logger = new MetricLogger({ runDir, experiment: "offexp", trial: "t1" });
    await logger.initBackends(
      { wandb: { loggingMode: "global_reduce", mode: "offline", project: "proj", entity: "team" } },
      { resumeStep, runConfig: { lr: 0.25, apiKey: "k" } },
    );
    const rows: Row[] = [];
    for (let step: number = from; step < to; step++) {
      const values: Record<string, number> = {
        special: SPECIALS[(step + resumeStep) % SPECIALS.length] as number,
        loss: 1 / (step + 1 + resumeStep),
      };
      if (step === 3) for (let k = 0; k < WIDE_KEYS; k++) values[`wide/k${k}`] = k * 0.5;
      for (const [key, value] of Object.entries(values)) recordMetric(key, value, Reduce.MEAN);
      recordMetric("episode", { prompt: `p${step}`, reward: step, score: values["special"] }, Reduce.SAMPLE);
      await logger.flush(step);
      rows.push({ wandbStep: wandbStep++, globalStep: step, values });
    }
    await logger.shutdown();
    attempts.push(rows);
    versions.push(JSON.parse(readFileSync(join(runDir, "version.json"), "utf8")) as unknown);
  }
  return { runDir, attempts, versions };
}

/** The offline run directories (one per attempt, in start order) and their `.wandb` files. */
function offlineRunDirs(runDir: string): { dir: string; file: string }[] {
  const root = join(runDir, "wandb");
  const dirs = readdirSync(root)
    .filter((d) => d.startsWith("offline-run-"))
    .sort();
  assert.equal(dirs.length, 2, `one offline run directory per attempt in ${root}: ${readdirSync(root).join(", ")}`);
  return dirs.map((d) => {
    assert.match(d, /^offline-run-\d{8}_\d{6}-offexp_t1$/);
    return { dir: join(root, d), file: join(root, d, "run-offexp_t1.wandb") };
  });
}

type Item = { key: string; value: unknown };
const fromSafe = (v: unknown): unknown =>
  v !== null && typeof v === "object" && "$nonFinite" in v ? Number((v as { $nonFinite: string }).$nonFinite) : v;

/** JSON as the readers print it (shapes checked by the assertions). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** One attempt's records as a reader decoded them, checked against what that attempt recorded. */
function checkRecords(records: Json[], rows: readonly Row[], version: unknown): void {
  const kinds = records.map((r) => Object.keys(r).find((k) => k !== "num"));
  assert.equal(kinds[0], "header");
  assert.equal(kinds[1], "run");
  assert.equal(kinds.at(-1), "final");
  assert.equal(kinds.at(-2), "exit");
  const run = records[1]?.["run"];
  assert.equal(run.run_id, "offexp_t1");
  assert.equal(run.project, "proj");
  assert.equal(run.entity, "team");
  const config = Object.fromEntries(
    (records.find((r) => "config" in r)?.["config"].update as Item[]).map((i) => [i.key, i.value]),
  );
  assert.deepEqual(config, { lr: 0.25, apiKey: REDACTED, version_info: version });
  const history = records.filter((r) => "history" in r).map((r) => r["history"]);
  assert.equal(history.length, rows.length);
  history.forEach((h, i) => {
    const row = rows[i] as Row;
    const values = Object.fromEntries((h.item as Item[]).map((it) => [it.key, fromSafe(it.value)]));
    assert.equal(Number(h.step?.num ?? 0), row.wandbStep, "step.num is _step (0 is proto3's default, not written)");
    assert.equal(values["_step"], row.wandbStep);
    assert.equal(values["global_step"], row.globalStep);
    for (const [key, value] of Object.entries(row.values))
      assert.ok(
        Object.is(values[key], value === 0 ? 0 : value),
        `${key}@${row.wandbStep}: ${String(values[key])} vs ${value}`,
      );
    const table = values["episode"] as Json;
    assert.equal(table?._type, "table-file");
    assert.match(table.path, new RegExp(`^media/table/episode_${row.globalStep}_[0-9a-f]{20}\\.table\\.json$`));
    assert.equal(table.nrows, 1);
    assert.equal(
      Object.keys(values).length,
      Object.keys(row.values).length + 5,
      "_step, _runtime, _timestamp, global_step, the table and the recorded keys",
    );
  });
  const last = rows.at(-1) as Row;
  // The summary as wandb-core builds it: every summary record's updates in order (one after each
  // flush's rows, as the SDK writes them, so a log cut short still has it; the full one at the end).
  const summaries = records.filter((r) => "summary" in r);
  assert.equal(summaries.length, rows.length + 1, "a summary record after each flush's history, and one at the end");
  const summary = Object.fromEntries(
    summaries.flatMap((r) => r["summary"].update as Item[]).map((i) => [i.key, fromSafe(i.value)]),
  );
  const afterFirst = Object.fromEntries(
    (summaries[0]?.["summary"].update as Item[]).map((i) => [i.key, fromSafe(i.value)]),
  );
  assert.equal(afterFirst["loss"], rows[0]?.values["loss"], "the first flush's summary holds its values");
  assert.ok(Object.is(summary["special"], last.values["special"] === 0 ? 0 : last.values["special"]));
  assert.equal(summary["loss"], last.values["loss"]);
  assert.equal(records.at(-2)?.["exit"].exit_code ?? 0, 0);
  // One files record per run file, as they were written (the SDK, too, writes them as files are saved).
  const files = records
    .filter((r) => "files" in r)
    .flatMap((r) => (r["files"].files as { path: string }[]).map((f) => f.path))
    .sort();
  assert.deepEqual(
    files,
    [...history.map((h) => (h.item as Json[]).find((it) => it.key === "episode").value.path), "version.json"].sort(),
    "this attempt's tables and version.json",
  );
}

/** The table of a step, as the offline run directory holds it. */
function tableOf(runPath: string, path: string): { columns: string[]; data: unknown[][] } {
  return parseHistoryJson(readFileSync(join(runPath, "files", ...path.split("/")), "utf8")) as {
    columns: string[];
    data: unknown[][];
  };
}

const kit = pythonKit("wandb");

it(
  `the official W&B SDK (${kit.version ?? "not installed"}) reads both attempts' offline runs: framing, every record and every value, NaN and ±Infinity included`,
  { skip: kit.skip, timeout: 120_000 },
  async () => {
    const { runDir, attempts, versions } = await offlineRun();
    offlineRunDirs(runDir).forEach(({ file }, i) => {
      const read = spawnSync(kit.python as string, [join(here, "python", "read_wandb_log.py"), file], {
        encoding: "utf8",
        maxBuffer: 64 * 1024 * 1024,
        timeout: 60_000,
      });
      assert.equal(read.status, 0, read.stderr);
      checkRecords(JSON.parse(read.stdout) as Json[], attempts[i] as Row[], versions[i]);
    });
  },
);

it(
  `the official \`wandb sync\` (wandb ${kit.version ?? "not installed"}) uploads both attempts' offline runs to the strict local server with every value, _step increasing across the resume`,
  { skip: kit.skip, timeout: 180_000 },
  async () => {
    const { runDir, attempts } = await offlineRun();
    const runs = offlineRunDirs(runDir);
    const key = "0123456789abcdef0123456789abcdef01234567"; // 40 characters, as W&B keys are
    const server = new StrictWandbServer(key, "team");
    await server.start();
    const home = tempDir("rankscope-wandb-home-");
    try {
      // Everything the SDK writes for itself goes to a scratch home; the only server is 127.0.0.1.
      const env = wandbSdkEnv(home, server.baseUrl, key);
      const result = await execFileAsync(
        join(dirname(kit.python as string), "wandb"),
        ["sync", ...runs.map((r) => r.dir)],
        { env, timeout: 120_000 },
      ).catch((error: Error & { stdout?: string; stderr?: string }) => {
        assert.fail(`wandb sync failed: ${error.message}\n${error.stdout ?? ""}\n${error.stderr ?? ""}`);
      });
      assert.deepEqual(
        server.violations,
        [],
        `the strict server refused part of what wandb sync sent (output: ${result.stderr})`,
      );
      const run = server.run("offexp_t1");
      assert.ok(run, `the run reached the server (requests: ${JSON.stringify(server.requests.map((r) => r.path))})`);
      assert.equal(run.complete, true);
      assert.equal(run.exitcode, 0);
      const rows = server.history("offexp_t1");
      const recorded = attempts.flat();
      assert.deepEqual(
        rows.map((r) => r["_step"]),
        recorded.map((r) => r.wandbStep),
        "_step increases across the resume, one row per flush",
      );
      assert.deepEqual(
        rows.map((r) => r["global_step"]),
        recorded.map((r) => r.globalStep),
      );
      rows.forEach((row, i) => {
        const want = recorded[i] as Row;
        for (const [k, value] of Object.entries(want.values))
          assert.ok(
            Object.is(row[k], value === 0 ? 0 : value),
            `${k}@${want.wandbStep}: the server got ${String(row[k])}, recorded ${value}`,
          );
        // The tables: uploaded by wandb sync from the attempt's files/, each as the row refers to it.
        const ref = row["episode"] as { path: string; sha256: string };
        const uploaded = run.files.get(ref.path);
        assert.ok(uploaded, `wandb sync uploaded ${ref.path}`);
        assert.equal(createHash("sha256").update(uploaded).digest("hex"), ref.sha256);
        const table = tableOf((runs[i < (attempts[0] as Row[]).length ? 0 : 1] as { dir: string }).dir, ref.path);
        assert.deepEqual(table.columns, ["prompt", "reward", "score"]);
        assert.deepEqual(table.data[0]?.slice(0, 2), [`p${want.globalStep}`, want.globalStep]);
        assert.ok(Object.is(table.data[0]?.[2], want.values["special"] === 0 ? 0 : want.values["special"]));
        assert.deepEqual(parseHistoryJson(uploaded.toString("utf8")), table);
      });
      const last = recorded.at(-1) as Row;
      assert.ok(Object.is(run.summary["special"], last.values["special"]));
      assert.equal(run.summary["loss"], last.values["loss"]);
      const version = JSON.parse(readFileSync(join(runDir, "version.json"), "utf8")) as unknown;
      assert.deepEqual(run.config["lr"], { value: 0.25 });
      assert.deepEqual(run.config["apiKey"], { value: REDACTED });
      assert.deepEqual(run.config["version_info"], { value: version });
      assert.equal(run.files.get("version.json")?.toString("utf8"), readFileSync(join(runDir, "version.json"), "utf8"));
    } finally {
      await server.stop();
      rmSync(home, { recursive: true, force: true });
    }
  },
);

it("fallback without the SDK: the .wandb framing and records match the wandb_internal.proto declaration", async () => {
  const { runDir, attempts, versions } = await offlineRun();
  let spanned = 0;
  offlineRunDirs(runDir).forEach(({ file }, attempt) => {
    const decoded = decodeTransactionLog(readFileSync(file));
    spanned += decoded.spanned;
    const raw = decoded.records;
    const records = raw.map((r) => {
      const object = WandbRecord.toObject(WandbRecord.decode(r), { longs: Number, defaults: false }) as Json;
      for (const kind of ["history", "summary", "config"]) {
        const list = object[kind]?.[kind === "history" ? "item" : "update"] as
          { key: string; value_json: string; value?: unknown }[] | undefined;
        for (const it of list ?? [])
          it.value = JSON.parse(
            it.value_json
              .replace(/(?<!")\b(NaN|-?Infinity)\b/g, '{"$nonFinite":"$1"}')
              .replace(/-\{"\$nonFinite":"Infinity"\}/g, '{"$nonFinite":"-Infinity"}'),
          );
      }
      return object;
    });
    checkRecords(records, attempts[attempt] as Row[], versions[attempt]);
  });
  assert.ok(spanned >= 1, "the wide record spans blocks");
});
