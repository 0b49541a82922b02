/**
 * `rankscope import tensorboard LOGDIR` against event files written by TensorBoard 2.21's own
 * writer (`tf.summary`'s forms: scalar tensors, k × 3 histogram tensors, text tensors, the hparams
 * plugin; `HistogramProto` and `simple_value`) and by tensorboardX, with known values: every
 * scalar, histogram, text and hyperparameter, with its step and wall time, arrives as written.
 * Importing twice changes nothing; a truncated or corrupt event file is an error naming the file
 * and the record, with the records before it kept.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, readdirSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseNumber } from "../../src/core/json.js";
import { closeStores, config, histograms, runInfo, samples, series } from "../../src/store/reader.js";
import { builtCli, tempDir } from "../helpers.js";
import { pythonKit } from "../helpers/python.js";

const CLI = builtCli();
const kit = pythonKit("tensorboardx");
const WRITER = fileURLToPath(new URL("fixtures/write-tensorboard.py", import.meta.url));
const STEPS = 120;

type Scalar = [tag: string, step: number, wallSeconds: number, value: number | string];
type Entry<T> = [tag: string, step: number, wallSeconds: number, value: T];
interface Expected {
  runs: Record<
    string,
    {
      scalars: Scalar[];
      histograms: Entry<Record<string, number | string | (number | string)[]>>[];
      text: Entry<Record<string, string>[]>[];
      hparams: Record<string, unknown>;
    }
  >;
}

function cli(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 180_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Python writes the log directory; its JSON says every value it wrote. */
function writeLogdir(logdir: string): Expected {
  const r = spawnSync(kit.python ?? "python3", [WRITER, logdir, String(STEPS)], { encoding: "utf8", timeout: 180_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as Expected;
}

/** A value as the test compares it: NaN, ±Infinity and every digit kept. */
function same(value: number): string {
  return Object.is(value, -0) ? "-0" : String(value);
}

/** Histogram fields as numbers (the JSON carries NaN and ±Infinity as strings). */
function numbers(h: Record<string, unknown>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h))
    out[k] = Array.isArray(v) ? v.map((x) => same(parseNumber(x))) : same(parseNumber(v));
  return out;
}

function sha(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

describe("rankscope import tensorboard", { skip: kit.skip }, () => {
  test("every scalar, histogram, text and hyperparameter of TensorBoard 2.21's and tensorboardX's files arrives with its step and wall time", () => {
    const logdir = join(tempDir(), "logs");
    const expected = writeLogdir(logdir);
    const root = tempDir();
    const r = cli(["import", "tensorboard", logdir, "--root", root]);
    assert.equal(r.code, 0, r.stderr);
    const runDirs: Record<string, string> = {
      tb2: join(root, "logs", "tb2"),
      "nested/tbx": join(root, "logs", "nested-tbx"),
      "nested/tbx/hp": join(root, "logs", "nested-tbx-hp"),
    };
    assert.deepEqual(readdirSync(join(root, "logs")).sort(), ["nested-tbx", "nested-tbx-hp", "tb2"]);
    for (const [name, run] of Object.entries(expected.runs)) {
      const runDir = runDirs[name] ?? "";
      const byTag = new Map<string, string[]>();
      for (const [tag, step, wall, value] of run.scalars)
        byTag.set(tag, [...(byTag.get(tag) ?? []), `${step}@${wall * 1000}=${same(parseNumber(value))}`]);
      for (const [tag, points] of byTag) {
        const stored = series(runDir, tag, { maxPoints: Infinity }).points.map(
          (p) => `${p.step}@${p.wall}=${same(p.value)}`,
        );
        assert.deepEqual(stored, points, `${name} ${tag}`);
      }
      for (const [tag, step, wall, histogram] of run.histograms) {
        const stored = histograms(runDir, tag).find((h) => h.step === step);
        assert.ok(stored !== undefined, `${name} ${tag} at ${step}`);
        assert.equal(stored.wall, wall * 1000);
        const got: Record<string, unknown> = { ...stored.histogram };
        for (const k of Object.keys(got)) if (!(k in histogram)) delete got[k];
        assert.deepEqual(numbers(got), numbers(histogram), `${name} ${tag} at ${step}`);
      }
      for (const [tag, step, wall, records] of run.text) {
        const stored = samples(runDir, tag).find((s) => s.step === step);
        assert.ok(stored !== undefined, `${name} ${tag} at ${step}`);
        assert.equal(stored.wall, wall * 1000);
        assert.deepEqual(stored.records, records);
      }
      assert.deepEqual(config(runDir), run.hparams);
      const walls = [...run.scalars, ...run.histograms, ...run.text].map((e) => e[2] * 1000);
      if (walls.length > 0) assert.equal(runInfo(runDir).startedAt, Math.min(...walls));
      assert.equal(runInfo(runDir).status, "finished");
    }
    // TF2 histograms carry no sum: NaN, said so in docs/import.md.
    assert.ok(Number.isNaN(histograms(runDirs["tb2"] ?? "", "weights")[0]?.histogram.sum));
    closeStores();

    const db = join(runDirs["tb2"] ?? "", "metrics.db");
    const before = sha(db);
    const again = cli(["import", "tensorboard", logdir, "--root", root]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout.match(/already imported/g)?.length, 3, again.stdout);
    assert.equal(sha(db), before);
  });

  test("a truncated or corrupt event file is an error naming the file and the record; the records before it are kept", () => {
    const logdir = join(tempDir(), "logs");
    writeLogdir(logdir);
    const source = join(logdir, "nested", "tbx");
    const file = readdirSync(source)[0] ?? "";
    const size = statSync(join(source, file)).size;

    const cut = join(tempDir(), "cut", "run");
    mkdirSync(cut, { recursive: true });
    copyFileSync(join(source, file), join(cut, file));
    truncateSync(join(cut, file), size - 10);
    const root = tempDir();
    const r = cli(["import", "tensorboard", cut, "--root", root]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      new RegExp(`${file}: record \\d+ \\(byte \\d+\\): is truncated: the file ends \\d+ bytes into it`),
    );
    const kept = series(join(root, "run", "run"), "tbx/value", { maxPoints: Infinity }).points.length;
    assert.ok(kept > STEPS - 5 && kept <= STEPS, `kept ${kept} points`);
    assert.equal(runInfo(join(root, "run", "run")).status, "failed");
    closeStores();

    const bad = join(tempDir(), "bad", "run");
    mkdirSync(bad, { recursive: true });
    const bytes = readFileSync(join(source, file));
    bytes[Math.floor(size / 2)] = (bytes[Math.floor(size / 2)] ?? 0) ^ 0xff;
    writeFileSync(join(bad, file), bytes);
    const corrupt = cli(["import", "tensorboard", bad, "--root", root, "--experiment", "bad"]);
    assert.equal(corrupt.code, 1);
    assert.match(
      corrupt.stderr,
      new RegExp(`${basename(file)}: record \\d+ \\(byte \\d+\\): its (data's|length's) CRC does not match`),
    );
    assert.ok(series(join(root, "bad", "run"), "tbx/value", { maxPoints: Infinity }).points.length > 10);
    closeStores();
  });
});
