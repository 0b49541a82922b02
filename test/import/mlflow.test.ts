/**
 * `rankscope import mlflow PATH` against a file store laid out as MLflow's documentation and its
 * `FileStore` describe it (MLflow's Python package is not available on this machine kind, so the
 * store is written here to that layout): experiments' and runs' `meta.yaml`, metric files of
 * "timestamp value [step]" lines as Python writes floats (`nan`, `inf`, `1e-05`, the shortest
 * repr), metric names with `/` as folders, params and tags. Every value, step and timestamp
 * arrives; importing twice changes nothing; a malformed line is an error naming the file and line.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { closeStores, config, runInfo, series } from "../../src/store/reader.js";
import { builtCli, tempDir } from "../helpers.js";

const CLI = builtCli();

function cli(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function put(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

const RUN_ID = "1c6b2d5b909041df93e6e00b960de019";
/** Values as Python's `str(float)` writes them, and what they are. */
const VALUES: [string, number][] = [
  ["2.31", 2.31],
  ["nan", NaN],
  ["inf", Infinity],
  ["-inf", -Infinity],
  ["1e-05", 1e-5],
  ["0.30000000000000004", 0.1 + 0.2],
  ["-1.7976931348623157e+308", -Number.MAX_VALUE],
  ["5e-324", 5e-324],
];

/** A file store: experiment 0 ("Default") and 606783375233873416 ("ppo"), one run each, plus .trash and models/. */
function fileStore(root: string): void {
  put(
    join(root, "0", "meta.yaml"),
    "artifact_location: file:///home/someone/mlruns/0\nexperiment_id: '0'\nlifecycle_stage: active\nname: Default\n",
  );
  const exp = join(root, "606783375233873416");
  put(
    join(exp, "meta.yaml"),
    "artifact_location: file:///home/someone/mlruns/606783375233873416\ncreation_time: 1721450900000\nexperiment_id: '606783375233873416'\nlast_update_time: 1721450900000\nlifecycle_stage: active\nname: ppo\n",
  );
  const run = join(exp, RUN_ID);
  put(
    join(run, "meta.yaml"),
    `artifact_uri: file:///home/someone/mlruns/606783375233873416/${RUN_ID}/artifacts\nend_time: 1721450907230\nentry_point_name: ''\nexperiment_id: '606783375233873416'\nlifecycle_stage: active\nrun_id: ${RUN_ID}\nrun_name: wistful-ant-659\nrun_uuid: ${RUN_ID}\nsource_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: 1721450907221\nstatus: 3\ntags: []\nuser_id: someone\n`,
  );
  put(
    join(run, "metrics", "train", "loss"),
    VALUES.map(([text], i) => `${1721450907221 + i * 10} ${text} ${i * 2}\n`).join(""),
  );
  put(join(run, "metrics", "old_style"), "1721450907300 0.5\n1721450907400 0.25\n"); // two fields: step 0, the later wins
  put(join(run, "params", "lr"), "0.0003");
  put(join(run, "params", "optimizer"), "adam");
  put(join(run, "tags", "mlflow.runName"), "wistful-ant-659");
  put(join(run, "tags", "team"), "rl");
  mkdirSync(join(run, "artifacts"), { recursive: true });
  const other = join(root, "0", "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5");
  put(
    join(other, "meta.yaml"),
    `experiment_id: '0'\nrun_id: a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5\nrun_name: ''\nstart_time: 1700000000000\nstatus: 3\n`,
  );
  put(join(other, "metrics", "acc"), "1700000000000 0.9 7\n");
  mkdirSync(join(root, ".trash"), { recursive: true });
  mkdirSync(join(root, "models"), { recursive: true });
}

describe("rankscope import mlflow (file store)", () => {
  test("every metric value with its step and timestamp, params and tags arrive; importing twice changes nothing", () => {
    const store = join(tempDir(), "mlruns");
    fileStore(store);
    const root = tempDir();
    const r = cli(["import", "mlflow", store, "--root", root]);
    assert.equal(r.code, 0, r.stderr);
    const run = join(root, "ppo", "wistful-ant-659-1c6b2d5b");
    assert.deepEqual(
      series(run, "train/loss", { maxPoints: Infinity }).points.map((p) => [p.step, p.wall, String(p.value)]),
      VALUES.map(([, v], i) => [i * 2, 1721450907221 + i * 10, String(v)]),
    );
    assert.deepEqual(
      series(run, "old_style", { maxPoints: Infinity }).points.map((p) => [p.step, p.wall, p.value]),
      [[0, 1721450907400, 0.25]],
    );
    assert.deepEqual(config(run), {
      lr: "0.0003",
      optimizer: "adam",
      tags: { "mlflow.runName": "wistful-ant-659", team: "rl" },
    });
    assert.equal(runInfo(run).startedAt, 1721450907221);
    assert.deepEqual(
      series(join(root, "Default", "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"), "acc").points.map((p) => [p.step, p.value]),
      [[7, 0.9]],
    );
    closeStores();
    const again = cli(["import", "mlflow", store, "--root", root]);
    assert.equal(again.stdout.match(/already imported/g)?.length, 2, again.stdout);
  });

  test("a malformed metric line is an error naming the file and the line; the lines before it are kept", () => {
    const store = join(tempDir(), "mlruns");
    fileStore(store);
    appendFileSync(join(store, "606783375233873416", RUN_ID, "metrics", "train", "loss"), "17214509");
    const root = tempDir();
    const r = cli(["import", "mlflow", join(store, "606783375233873416"), "--root", root]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /metrics\/train\/loss: line 9: has 1 fields, where MLflow writes 2 or 3 .*truncated/);
    assert.equal(
      series(join(root, "ppo", "wistful-ant-659-1c6b2d5b"), "train/loss", { maxPoints: Infinity }).points.length,
      VALUES.length,
    );
    closeStores();
  });
});
