/**
 * Run directories for the dashboard's tests and benchmark, written by the real store writer.
 */
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GLOBAL_RANK } from "../../src/store/schema.js";
import { StoreWriter, type ScalarPoint } from "../../src/store/writer.js";
import type { AlertEvent } from "../../src/core/alert.js";
import { sqliteDriver } from "../../src/store/sqlite.js";
import { STORE_FILE } from "../../src/store/store-file.js";
import { RUN_META_FILE } from "../../src/run/run-files.js";

/** better-sqlite3's `Database` class, of the build this Node.js runs. */
const Database = sqliteDriver();

/** A metric key that is also an HTML injection attempt. */
export const XSS_KEY = "<img src=x onerror=alert(1)>";

/** A smooth-ish decreasing curve with noise, deterministic. */
export function lossAt(step: number, offset = 0): number {
  return 2 * Math.exp(-step / 60) + 0.15 * Math.sin(step * 1.7 + offset) + 0.3;
}

/** Open the controller's writer of a new run. */
export function openRun(root: string, experiment: string, trial: string): StoreWriter {
  return StoreWriter.open({
    runDir: join(root, experiment, trial),
    role: "controller",
    rank: GLOBAL_RANK,
    rankName: "controller",
    experiment,
    trial,
  });
}

/** Scalars of steps [from, to): `loss` global and per rank 0 and 1, `lr` global, the XSS key. */
export function trainingPoints(from: number, to: number, t0: number): ScalarPoint[] {
  const points: ScalarPoint[] = [];
  for (let step = from; step < to; step++) {
    const wall = t0 + step * 1000;
    points.push({ key: "loss", step, wall, value: lossAt(step), reduce: "mean" });
    points.push({ key: "loss", step, wall, value: lossAt(step, 1) + 0.1, reduce: "mean", rank: 0 });
    points.push({ key: "loss", step, wall, value: lossAt(step, 2) - 0.1, reduce: "mean", rank: 1 });
    points.push({ key: "lr", step, wall, value: 1e-3 * Math.min(1, (step + 1) / 20), reduce: "mean" });
    points.push({ key: XSS_KEY, step, wall, value: step % 7, reduce: "mean" });
  }
  return points;
}

/**
 * Alert events as the controller records them (docs/alerts.md): a `nonfinite` episode that fired
 * with NaN and resolved, a rank lost for good, and a user's `alert()` whose text looks like HTML.
 */
export function seedAlerts(run: string, t0: number): AlertEvent[] {
  const base = { run, level: "error" as const };
  return [
    {
      ...base,
      id: "nonfinite:loss#1",
      rule: "nonfinite",
      step: 40,
      key: "loss",
      value: NaN,
      message: "loss became NaN at step 40 (it was finite before)",
      state: "firing",
      at: t0 + 40_000,
    },
    {
      ...base,
      id: "rank_lost:Trainer_0_r1#2",
      rule: "rank_lost",
      step: 55,
      rank: 1,
      rankName: "Trainer_0_r1",
      host: "node-ä",
      message: "rank 1 (Trainer_0_r1) on node-ä was lost at step 55",
      state: "firing",
      at: t0 + 55_000,
    },
    {
      ...base,
      id: "nonfinite:loss#1",
      rule: "nonfinite",
      step: 41,
      key: "loss",
      value: 0.5,
      message: "loss is finite again at step 41 (0.5)",
      state: "resolved",
      at: t0 + 41_000,
    },
    {
      ...base,
      id: "user#3",
      rule: "user",
      level: "info",
      step: 60,
      rankName: "Trainer_0_r0",
      message: "<b>eval</b>: accuracy 0.93 ✓",
      title: "<b>eval</b>",
      state: "firing",
      at: t0 + 60_000,
    },
  ];
}

/**
 * A finished run with everything the dashboard shows: scalars (global and per rank), a stream of
 * two ranks, a system metric, samples whose text looks like HTML, hyperparameters, config.yaml,
 * version.json and a trace file, and with `withAlerts` alert events (`seedAlerts`). Returns the run directory.
 */
export function seedFinishedRun(
  root: string,
  experiment = "exp",
  trial = "base",
  steps = 120,
  withAlerts = false,
): string {
  const t0 = Date.now() - 3_600_000;
  const writer = openRun(root, experiment, trial);
  const points = trainingPoints(0, steps, t0);
  writer.write({
    scalars: points.filter((p) => p.rank !== 1),
    hyperparams: { lr: 0.001, model: { layers: 4, name: "<b>tiny</b>" } },
  });
  // Rank 1's own series come from its own process, which registers its name.
  const rank1 = StoreWriter.open({
    runDir: join(root, experiment, trial),
    role: "rank",
    rank: 1,
    rankName: "Trainer_0_r1",
    experiment,
    trial,
  });
  rank1.write({ scalars: points.filter((p) => p.rank === 1) });
  rank1.finish("finished");
  writer.write({
    streams: Array.from({ length: 40 }, (_, i) => ({
      key: "probe/grad_norm",
      step: i >> 1,
      wall: t0 + i * 250,
      value: 1 + (i % 2) + Math.sin(i) * 0.2,
      rank: i % 2,
    })),
    system: Array.from({ length: 30 }, (_, i) => ({
      key: "gpu/0/util",
      step: i,
      wall: t0 + i * 2000,
      value: 50 + 30 * Math.sin(i / 4),
    })),
    histograms: [3, 10].map((step) => ({
      key: "grad/hist",
      step,
      wall: t0 + step * 1000,
      histogram: {
        count: 10 + step,
        min: -2,
        max: 3.5,
        sum: 1,
        sumSquares: 20,
        bucketLimits: [-1, 0, 1, 2, Infinity],
        bucketCounts: [1, 3 + step, 4, 1, 1],
      },
    })),
    samples: [
      {
        key: "generations",
        step: 10,
        wall: t0 + 10_000,
        records: [
          { prompt: "<script>alert(2)</script>", reward: 0.5 },
          { prompt: "plain", reward: 1 },
        ],
      },
    ],
    ...(withAlerts ? { alerts: seedAlerts(`${experiment}/${trial}`, t0) } : {}),
  });
  writer.finish("finished");
  const runDir = join(root, experiment, trial);
  writeFileSync(join(runDir, "config.yaml"), "lr: 0.001\nmodel:\n  layers: 4\n");
  writeFileSync(
    join(runDir, "version.json"),
    JSON.stringify({ rankscope: "0.1.0", git: { commit: "abc123", dirty: false } }),
  );
  mkdirSync(join(runDir, "traces"), { recursive: true });
  writeFileSync(join(runDir, "traces", "rank-0.jsonl"), '{"name":"step","ph":"X","ts":0,"dur":10,"pid":0,"tid":0}\n');
  return runDir;
}

/** What run `i` of `seedManyRuns` holds: its name, labels, hyperparameters and last `loss`. */
export interface ManyRunSpec {
  readonly experiment: string;
  readonly trial: string;
  readonly tags: string[];
  readonly group: string;
  readonly params: { lr: number; opt: string };
  readonly loss: number;
}

/** Run `i` of `seedManyRuns`: 8 kinds of run (lr × optimizer), tag `rare` on every 10th, group `g{i % 5}`. */
export function manyRunSpec(i: number): ManyRunSpec {
  const kind = i % 8;
  return {
    experiment: "sweep",
    trial: `r${String(i).padStart(5, "0")}`,
    tags: i % 10 === 0 ? ["common", "rare"] : ["common"],
    group: `g${i % 5}`,
    params: { lr: [0.1, 0.01, 0.001, 0.0001][kind % 4] ?? 0, opt: kind < 4 ? "adam" : "sgd" },
    loss: kind,
  };
}

/**
 * `n` runs under `root/sweep/` for the scale tests and the runs benchmark: each of the 8 kinds of
 * `manyRunSpec` written once by the real store writer, then its store copied for every run of
 * that kind (writing 10,000 stores one by one takes minutes) with the copy's name and start time
 * set in its `run` row, and each run's own `run.json` (tags and group) written beside it.
 */
export function seedManyRuns(root: string, n: number): void {
  const templates = tempTemplates(root);
  for (let i = 0; i < n; i++) {
    const spec = manyRunSpec(i);
    const dir = join(root, spec.experiment, spec.trial);
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(templates, String(i % 8), "t", STORE_FILE), join(dir, STORE_FILE));
    // The copy's own name and start (a second apart, newest last), as its writer would have set them.
    const db = new Database(join(dir, STORE_FILE));
    // A fixture: no fsync per copy (2,000 of them took 40 s on a busy disk).
    db.pragma("synchronous = OFF");
    db.prepare("UPDATE run SET experiment = ?, trial = ?, started_at = started_at - ?").run(
      spec.experiment,
      spec.trial,
      (n - i) * 1000,
    );
    db.close();
    writeFileSync(join(dir, RUN_META_FILE), JSON.stringify({ tags: spec.tags, group: spec.group }));
  }
  rmSync(templates, { recursive: true, force: true });
}

function tempTemplates(root: string): string {
  const templates = `${root}.templates`;
  for (let kind = 0; kind < 8; kind++) {
    const spec = manyRunSpec(kind);
    const writer = openRun(templates, String(kind), "t");
    writer.write({
      hyperparams: spec.params,
      scalars: [0, 1, 2].map((step) => ({
        key: "loss",
        step,
        wall: Date.now() - 60_000 + step,
        value: spec.loss + 2 - step,
        reduce: "mean" as const,
      })),
    });
    writer.finish();
  }
  return templates;
}
