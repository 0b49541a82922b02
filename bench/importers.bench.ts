/**
 * Issue 39: `rankscope import` throughput (target ≥ 1 M points/s from tfevents).
 *
 * An event file of 2 M scalars is written with the `tensorboard` backend's own encoder
 * (`scalarEvents` + `frameRecords`, as TensorBoard and tensorboardX lay scalars out: one
 * `simple_value` per tag per event, here 10 tags per step, and a second file with one tag per
 * event, the worst case: one record per point), then imported into a fresh run directory as
 * `rankscope import tensorboard` does (`ImportRun` + `importTensorBoardRun`: framing and both
 * CRCs checked, protobufjs decode, the store's packed chunks). The same points as CSV through
 * `import csv` are measured beside it. Points per second of wall time and of this process's CPU
 * (the store is written on the same thread), best of 3 rounds, each into a new directory.
 * Run: `npm run bench -- importers`.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scalarEvents, type ScalarPoint } from "../src/backends/tensorboard/events.js";
import { frameRecords } from "../src/backends/tensorboard/record.js";
import { fingerprintFiles, ImportRun } from "../src/import/import-run.js";
import { importCsv } from "../src/import/table.js";
import { findTensorBoardRuns, importTensorBoardRun } from "../src/import/tensorboard.js";
import { printTable } from "./harness.js";

const POINTS = 2_000_000;
const ROUNDS = 3;
const dir = mkdtempSync(join(tmpdir(), "rankscope-bench-importers-"));

/** An event file of POINTS scalars, `tags` per step; returns its run directory. */
function writeEvents(name: string, tags: number): string {
  const runDir = join(dir, "logs", name);
  mkdirSync(runDir, { recursive: true });
  const parts: Buffer[] = [];
  const steps = POINTS / tags;
  for (let from = 0; from < steps; from += 10_000) {
    const points: ScalarPoint[] = [];
    for (let step = from; step < Math.min(steps, from + 10_000); step++)
      for (let t = 0; t < tags; t++)
        points.push({
          key: `train/metric_${t}`,
          value: Math.sin(step * 0.01 + t),
          step,
          timestamp: 1.7e12 + step * 37,
        });
    parts.push(frameRecords(scalarEvents(points)));
  }
  writeFileSync(join(runDir, "events.out.tfevents.1700000000.bench"), Buffer.concat(parts));
  return runDir;
}

function writeCsv(): string {
  const file = join(dir, "points.csv");
  const lines = ["key,step,wall,value"];
  for (let step = 0; step < POINTS / 10; step++)
    for (let t = 0; t < 10; t++)
      lines.push(`train/metric_${t},${step},${1.7e12 + step * 37},${Math.sin(step * 0.01 + t)}`);
  writeFileSync(file, lines.join("\n") + "\n");
  return file;
}

/** Import with `read` into a new run directory; points per second of wall and CPU time, best round. */
function measure(label: string, bytes: number, read: (run: ImportRun) => void, files: string[]): (string | number)[] {
  let best = { wall: Infinity, cpu: Infinity, points: 0 };
  for (let round = 0; round < ROUNDS; round++) {
    const root = join(dir, `root-${label.replace(/\W+/g, "-")}-${round}`);
    const cpuStart = process.cpuUsage();
    const start = performance.now();
    const begun = ImportRun.begin({
      root,
      experiment: "bench",
      trial: "run",
      format: label,
      source: files[0] ?? "",
      fingerprint: fingerprintFiles(files),
    });
    if (begun.kind !== "write") throw new Error("a fresh root already held the run");
    read(begun.run);
    const record = begun.run.end();
    const wall = (performance.now() - start) / 1000;
    const cpuUsed = process.cpuUsage(cpuStart);
    const cpu = (cpuUsed.user + cpuUsed.system) / 1e6;
    if (wall < best.wall) best = { wall, cpu, points: record.points };
    rmSync(root, { recursive: true, force: true });
  }
  return [
    label,
    (bytes / 2 ** 20).toFixed(1),
    best.points.toLocaleString("en-US"),
    (best.wall * 1000).toFixed(0),
    (best.points / best.wall / 1e6).toFixed(2),
    (best.points / best.cpu / 1e6).toFixed(2),
  ];
}

try {
  const rows: (string | number)[][] = [];
  for (const [name, tags] of [
    ["10 tags per event", 10],
    ["1 tag per event", 1],
  ] as const) {
    const [tb] = findTensorBoardRuns(writeEvents(name.replace(/ /g, "-"), tags));
    if (tb === undefined) throw new Error("no event file written");
    const bytes = tb.files.reduce((n, f) => n + statSync(f).size, 0);
    rows.push(measure(`tfevents, ${name}`, bytes, (run) => importTensorBoardRun(tb, run), [...tb.files]));
  }
  const csv = writeCsv();
  rows.push(measure("CSV key,step,wall,value", statSync(csv).size, (run) => importCsv(csv, run), [csv]));
  console.log(`\nimport: ${POINTS.toLocaleString("en-US")} scalar points into a new run directory (best of ${ROUNDS})`);
  printTable(["source", "MiB", "points", "ms", "M points/s", "M points/CPU-s"], rows);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
