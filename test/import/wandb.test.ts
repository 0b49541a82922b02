/**
 * `rankscope import wandb PATH` against an offline run written by the official W&B SDK (wandb 0.30,
 * `mode="offline"`) with known values: every history value at its step — or, for keys declared
 * with `define_metric(…, step_metric="epoch")`, at the row's epoch — with the row's `_timestamp`
 * (read back with the SDK's own protobufs), the config, a table and a summary-only number.
 * Importing twice changes nothing; a truncated `.wandb` file is an error naming the file and the
 * record, with the records before it kept.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, statSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseNumber } from "../../src/core/json.js";
import { closeStores, config, runInfo, samples, series } from "../../src/store/reader.js";
import { builtCli, tempDir } from "../helpers.js";
import { pythonKit } from "../helpers/python.js";

const CLI = builtCli();
const kit = pythonKit("wandb");
const WRITER = fileURLToPath(new URL("fixtures/write-wandb.py", import.meta.url));
const SDK_READER = fileURLToPath(new URL("../backends/wandb/python/read_wandb_log.py", import.meta.url));
const STEPS = 40;

interface Expected {
  id: string;
  scalars: Record<string, [x: number, value: number | string, rowStep: number][]>;
  config: Record<string, unknown>;
  tables: [key: string, step: number, records: Record<string, unknown>[]][];
}

function cli(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 180_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function python(args: readonly string[]): string {
  const r = spawnSync(kit.python ?? "python3", args, { encoding: "utf8", timeout: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

/** Each history row's `_timestamp` by its `_step`, as the SDK's own protobufs read the log. */
function timestamps(file: string): Map<number, number> {
  const records = JSON.parse(python([SDK_READER, file])) as {
    history?: { item: { key?: string; nested_key?: string[]; value: unknown }[] };
  }[];
  const out = new Map<number, number>();
  for (const r of records) {
    if (r.history === undefined) continue;
    const field = (name: string): unknown =>
      r.history?.item.find((i) => i.key === name || i.nested_key?.[0] === name)?.value;
    out.set(Number(field("_step")), Number(field("_timestamp")));
  }
  return out;
}

const same = (v: number): string => (Object.is(v, -0) ? "-0" : String(v));

describe("rankscope import wandb", { skip: kit.skip }, () => {
  const dir = tempDir();
  const expected = kit.skip === false ? (JSON.parse(python([WRITER, dir, String(STEPS)])) as Expected) : null;
  const runDir = (): string => readdirSync(join(dir, "wandb")).find((n) => n.startsWith("offline-run-")) ?? "";

  test("history (custom x-axes too), config, a table and the summary arrive as the SDK wrote them", () => {
    assert.ok(expected !== null);
    const source = join(dir, "wandb", runDir());
    const walls = timestamps(join(source, `run-${expected.id}.wandb`));
    const root = tempDir();
    const r = cli(["import", "wandb", join(dir, "wandb"), "--root", root]);
    assert.equal(r.code, 0, r.stderr);
    const imported = join(root, "wandb", expected.id);
    for (const [key, points] of Object.entries(expected.scalars)) {
      const stored = series(imported, key, { maxPoints: Infinity }).points.map(
        (p) => `${p.step}@${p.wall}=${same(p.value)}`,
      );
      const want = points.map(([x, v, row]) => `${x}@${(walls.get(row) ?? NaN) * 1000}=${same(parseNumber(v))}`);
      assert.deepEqual(stored, want, key);
    }
    assert.deepEqual(config(imported), expected.config);
    for (const [key, step, records] of expected.tables) {
      const stored = samples(imported, key);
      assert.equal(stored.length, 1);
      assert.equal(stored[0]?.step, step);
      assert.deepEqual(stored[0]?.records, records);
    }
    assert.equal(runInfo(imported).startedAt, (walls.get(0) ?? NaN) * 1000);
    closeStores();
    const again = cli(["import", "wandb", join(dir, "wandb"), "--root", root]);
    assert.match(again.stdout, /already imported .* nothing changed/);
  });

  test("a truncated .wandb file is an error naming the file and the record; the records before it are kept", () => {
    assert.ok(expected !== null);
    const cut = join(tempDir(), runDir());
    mkdirSync(cut, { recursive: true });
    const file = join(cut, `run-${expected.id}.wandb`);
    copyFileSync(join(dir, "wandb", runDir(), `run-${expected.id}.wandb`), file);
    truncateSync(file, Math.floor(statSync(file).size * 0.6));
    const root = tempDir();
    const r = cli(["import", "wandb", cut, "--root", root]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /run-\w+\.wandb: record \d+ \(byte \d+\): the file ends inside a (record|chunk's header) \(truncated\)/,
    );
    const kept = series(join(root, "wandb", expected.id), "train/loss", { maxPoints: Infinity }).points.length;
    assert.ok(kept > 5 && kept < STEPS, `kept ${kept}`);
    closeStores();
  });
});
