/**
 * `rankscope import csv|jsonl` is the exact inverse of `rankscope export`: a real job's run,
 * exported, imported into a new root and compared point by point (every key, kind, line, step, wall
 * time and value), and exported again byte for byte. Importing twice changes nothing; a truncated
 * file is an error naming the file and the record, with the rows before it kept.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, statSync, truncateSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { closeStores, keys, listRuns, runInfo, series, type SeriesKind } from "../../src/store/reader.js";
import { GLOBAL_RANK } from "../../src/store/schema.js";
import { StoreWriter } from "../../src/store/writer.js";
import { builtCli, tempDir } from "../helpers.js";

const CLI = builtCli();

function cli(
  args: readonly string[],
  env: Record<string, string> = {},
): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    timeout: 180_000,
    env: { ...process.env, ...env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Every point of every scalar, stream and system line of a run, as text that keeps NaN, ±Infinity and every digit. */
function everyPoint(runDir: string): Map<string, string> {
  const all = new Map<string, string>();
  for (const k of keys(runDir)) {
    if (k.kind === "sample" || k.kind === "histogram") continue;
    const kind: SeriesKind = k.kind;
    for (const rank of k.ranks) {
      const { points } = series(runDir, k.key, {
        kind,
        rank,
        maxPoints: Infinity,
        x: kind === "scalar" ? "step" : "wall",
      });
      all.set(
        `${kind} ${JSON.stringify(k.key)} line ${rank}`,
        points.map((p) => `${p.step}@${p.wall}=${Object.is(p.value, -0) ? "-0" : String(p.value)}`).join(" "),
      );
    }
  }
  return all;
}

function sha(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

describe("a real job's run, exported and imported back", () => {
  const root = tempDir("rankscope-import-");
  const demo = cli(["demo", "--steps", "3"], { RANKSCOPE_ROOT: root, RANKSCOPE_FLUSH_DEADLINE_MS: "30000" });
  const runs = listRuns(root);

  for (const format of ["csv", "jsonl"] as const) {
    test(`${format}: every point comes back exactly, and exporting the import gives the same file`, () => {
      assert.equal(demo.code, 0, demo.stderr);
      const original = runs[0]?.runDir ?? "";
      const exported = join(root, `exported.${format}`);
      const out = cli(["export", original, "--format", format, "--internal", "--out", exported]);
      assert.equal(out.code, 0, out.stderr);

      const into = tempDir("rankscope-import-into-");
      const imported = cli(["import", format, exported, "--root", into, "--experiment", "demo", "--trial", "again"]);
      assert.equal(imported.code, 0, imported.stderr);
      const runDir = join(into, "demo", "again");
      assert.match(imported.stdout, /imported [\d,]+ points into .*demo\/again/);

      const before = everyPoint(original);
      const after = everyPoint(runDir);
      assert.ok(before.size > 10, `the demo run has its lines: ${[...before.keys()].join(", ")}`);
      for (const kind of ["scalar", "stream", "system"])
        assert.ok(
          [...before.keys()].some((k) => k.startsWith(kind)),
          `the demo run has ${kind} lines`,
        );
      assert.deepEqual([...after.keys()].sort(), [...before.keys()].sort());
      for (const [line, points] of before) assert.equal(after.get(line), points, line);

      const again = join(root, `again.${format}`);
      assert.equal(cli(["export", runDir, "--format", format, "--internal", "--out", again]).code, 0);
      assert.equal(readFileSync(again, "utf8"), readFileSync(exported, "utf8"));
      const info = runInfo(runDir);
      assert.equal(info.status, "finished");
      closeStores();
    });
  }
});

describe("rankscope import csv", () => {
  test("keys with commas, quotes and line breaks, NaN, ±Infinity, 2^53 and beyond, negative lines round-trip exactly", () => {
    const root = tempDir();
    const runDir = join(root, "e", "t");
    const w = StoreWriter.open({
      runDir,
      role: "controller",
      rank: GLOBAL_RANK,
      rankName: "c",
      experiment: "e",
      trial: "t",
    });
    const values = [0.1 + 0.2, NaN, Infinity, -Infinity, 2 ** 53 + 2, 1e300, 5e-324, -1.5e-7, 123456789.12345679];
    w.write({
      scalars: values.flatMap((value, step) => [
        { key: 'odd, "key"\nwith a break', step, wall: 1_700_000_000_123 + step, value },
        { key: "per/rank", step, wall: 1_700_000_000_000.5 + step, value: -value, rank: 3 },
      ]),
      streams: values.map((value, step) => ({ key: "s", step, wall: 1_700_000_001_000 + step, value, rank: 0 })),
      system: [{ key: "gpu/util", step: 0, wall: 1_700_000_002_000, value: 97, rank: -2 }],
    });
    w.finish();
    for (const format of ["csv", "jsonl"]) {
      const file = join(root, `out.${format}`);
      assert.equal(cli(["export", runDir, "--format", format, "--out", file]).code, 0);
      const r = cli(["import", format, file, "--root", root, "--experiment", "back", "--trial", format]);
      assert.equal(r.code, 0, r.stderr);
      const back = join(root, "back", format);
      assert.deepEqual(everyPoint(back), everyPoint(runDir));
      closeStores();
    }
  });

  test("step,key,value rows with a wall_time column in seconds, and without one the file's time", () => {
    const root = tempDir();
    const withTime = join(root, "with-time.csv");
    writeFileSync(
      withTime,
      "step,key,value,wall_time\n0,loss,1.5,1700000000.25\n1,loss,nan,1700000001\n1,acc,-inf,1700000001\n",
    );
    assert.equal(cli(["import", "csv", withTime, "--root", root]).code, 0);
    const dir = join(root, "import", "with-time");
    assert.deepEqual(
      series(dir, "loss", { maxPoints: Infinity }).points.map((p) => [p.step, p.wall, p.value]),
      [
        [0, 1_700_000_000_250, 1.5],
        [1, 1_700_000_001_000, NaN],
      ],
    );
    assert.equal(series(dir, "acc").points[0]?.value, -Infinity);
    assert.equal(runInfo(dir).startedAt, 1_700_000_000_250);

    const bare = join(root, "bare.csv");
    writeFileSync(bare, "key,step,value\r\nloss,5,0.5\r\n");
    utimesSync(bare, 1_650_000_000, 1_650_000_000);
    assert.equal(cli(["import", "csv", bare, "--root", root]).code, 0);
    assert.deepEqual(
      series(join(root, "import", "bare"), "loss").points.map((p) => [p.step, p.wall, p.value]),
      [[5, 1_650_000_000_000, 0.5]],
    );
    closeStores();
  });

  test("importing twice changes nothing", () => {
    const root = tempDir();
    const file = join(root, "m.csv");
    writeFileSync(
      file,
      "step,key,value,wall\n" + Array.from({ length: 1000 }, (_, i) => `${i},loss,${1 / (i + 1)},${i}`).join("\n"),
    );
    assert.equal(cli(["import", "csv", file, "--root", root]).code, 0);
    const db = join(root, "import", "m", "metrics.db");
    const marker = join(root, "import", "m", "import.json");
    const [dbHash, markerHash, dbTime] = [sha(db), sha(marker), statSync(db).mtimeMs];
    const second = cli(["import", "csv", file, "--root", root]);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /already imported into .* nothing changed/);
    assert.equal(sha(db), dbHash);
    assert.equal(sha(marker), markerHash);
    assert.equal(statSync(db).mtimeMs, dbTime);
    assert.equal(series(join(root, "import", "m"), "loss", { maxPoints: Infinity }).points.length, 1000);
    closeStores();

    // Another file under the same name never replaces it.
    const other = join(root, "elsewhere");
    mkdirSync(other);
    writeFileSync(join(other, "m.csv"), "step,key,value\n0,x,1\n");
    const clash = cli(["import", "csv", join(other, "m.csv"), "--root", root]);
    assert.equal(clash.code, 1);
    assert.match(
      clash.stderr,
      /holds an import of .*m\.csv, not of .*elsewhere.*m\.csv; give another --experiment or --trial/,
    );
    assert.equal(sha(db), dbHash);
  });

  test("a truncated file is an error naming the file and the record; the rows before it are kept, and a fixed file imports whole", () => {
    const root = tempDir();
    const file = join(root, "cut.csv");
    const text =
      "key,step,wall,value\n" + Array.from({ length: 100 }, (_, i) => `loss,${i},${1000 + i},${i * 0.5}\n`).join("");
    writeFileSync(file, text);
    truncateSync(file, text.indexOf("loss,60,") + "loss,60,1060".length);
    const r = cli(["import", "csv", file, "--root", root]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /cut\.csv: record 62 \(line 62\): has 3 fields where the header has 4 .*truncated/);
    assert.match(r.stderr, /kept what came before it/);
    const dir = join(root, "import", "cut");
    assert.equal(series(dir, "loss", { maxPoints: Infinity }).points.length, 60);
    assert.equal(runInfo(dir).status, "failed");
    assert.equal(JSON.parse(readFileSync(join(dir, "import.json"), "utf8")).status, "partial");
    closeStores();

    writeFileSync(file, text);
    const fixed = cli(["import", "csv", file, "--root", root]);
    assert.equal(fixed.code, 0, fixed.stderr);
    assert.equal(series(dir, "loss", { maxPoints: Infinity }).points.length, 100);
    assert.equal(runInfo(dir).status, "finished");
    closeStores();
  });

  test("bad input says what was wrong and what is valid", () => {
    const root = tempDir();
    const cases: [string, string, RegExp][] = [
      [
        "cols.csv",
        "step,name,value\n0,a,1\n",
        /cols\.csv: record 1 \(the header\): column 2 "name" is not one of key, step, value/,
      ],
      ["value.csv", "step,key,value\n0,a,1\n1,a,abc\n", /value\.csv: record 3 \(line 3\): value "abc" is not a number/],
      ["kind.csv", "step,key,value,kind\n0,a,1,gauge\n", /kind "gauge" is not one of scalar, stream, system/],
      ["quote.csv", 'step,key,value\n0,"a,1\n', /quote\.csv: record 2 \(line 2\): a quoted field is never closed/],
      [
        "lines.jsonl",
        '{"key":"a","step":0,"value":1}\n{"key":"a","step":1,"val',
        /lines\.jsonl: line 2: is not JSON \(the file may be truncated\)/,
      ],
      [
        "field.jsonl",
        '{"key":"a","step":0,"value":1,"reduce":"mean"}\n',
        /field\.jsonl: line 1: field "reduce" is not one of/,
      ],
    ];
    for (const [name, text, error] of cases) {
      writeFileSync(join(root, name), text);
      const r = cli(["import", name.endsWith(".csv") ? "csv" : "jsonl", join(root, name), "--root", root]);
      assert.equal(r.code, 1, name);
      assert.match(r.stderr, error, name);
    }
    assert.match(
      cli(["import", "xml", join(root, "x"), "--root", root]).stderr,
      /format "xml" is not supported; valid: csv, jsonl/,
    );
  });
});
