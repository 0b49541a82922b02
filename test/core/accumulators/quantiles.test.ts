/**
 * `Reduce.QUANTILES` against numpy: the quantile is numpy's default (`np.quantile`, method
 * "linear"), within the stated accuracy — 1% of |x⌊h⌋|·(1 − t) + |x⌊h⌋₊₁|·t, h = q·(n − 1) — on
 * small samples, on large ones merged from several ranks' states, and read back from a real store.
 * numpy comes from the shared test venv (test/helpers/python.ts, TensorBoard's kit depends on it).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { getReduceDefinition } from "../../../src/core/registry.js";
import type { AccumulatorState } from "../../../src/core/reduce.js";
import { getOrCreateMetricLogger, recordMetric, Reduce } from "../../../src/index.js";
import { getCollector } from "../../../src/core/collector.js";
import { series } from "../../../src/store/reader.js";
import { tempDir } from "../../helpers.js";
import { pythonKit } from "../../helpers/python.js";

const kit = pythonKit("tensorboard");
const QS = [0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1];
const NAME = Reduce.quantiles(QS);

/** numpy's `np.quantile(sample, QS)` for each sample, in one Python run. */
function numpyQuantiles(samples: readonly (readonly number[])[]): number[][] {
  const file = join(tempDir("rankscope-quantiles-"), "samples.json");
  writeFileSync(file, JSON.stringify(samples));
  const script = `import json, sys, numpy as np\nprint(json.dumps([np.quantile(np.array(s, dtype=np.float64), ${JSON.stringify(QS)}).tolist() for s in json.load(open(sys.argv[1]))]))`;
  const run = spawnSync(kit.python ?? "python3", ["-c", script, file], {
    encoding: "utf8",
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as number[][];
}

/** The stated accuracy for quantile `q` of `sample`: 1% of the interpolation of the neighbours' magnitudes. */
function allowed(sorted: readonly number[], q: number): number {
  const h = (sorted.length - 1) * q;
  const below = Math.floor(h);
  const t = h - below;
  const a = Math.abs(sorted[below] ?? 0);
  const b = Math.abs(sorted[Math.min(below + 1, sorted.length - 1)] ?? 0);
  return 0.01 * (a * (1 - t) + b * t) * (1 + 1e-12) + 1e-12;
}

/** What `Reduce.quantiles(QS)` reports for states merged from `parts` (one accumulator per part, as ranks). */
function reported(parts: readonly (readonly number[])[]): Record<string, number> {
  const definition = getReduceDefinition(NAME);
  if (definition.input === "object") throw new Error("quantiles takes numbers");
  const states: AccumulatorState[] = parts.map((part) => {
    const accumulator = definition.create();
    for (const v of part) accumulator.append(v);
    return accumulator.state();
  });
  const value = definition.value(definition.merge(states));
  assert.ok(typeof value === "object");
  return { ...value };
}

function check(
  sample: readonly number[],
  got: Record<string, number>,
  expected: readonly number[],
  what: string,
): void {
  const sorted = [...sample].sort((a, b) => a - b);
  Object.values(got).forEach((value, i) => {
    const q = QS[i] ?? NaN;
    const want = expected[i] ?? NaN;
    assert.ok(
      Math.abs(value - want) <= allowed(sorted, q),
      `${what}, q = ${q}: rankscope ${value}, numpy ${want} (allowed ±${allowed(sorted, q)})`,
    );
  });
}

/** A seeded generator (mulberry32), so every run checks the same samples. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test(
  `numpy's default quantile within 1%: p90 and p99 of [1, 2, 3, 4, 100] and other small samples (numpy from ${kit.version === null ? "no venv" : `the venv`})`,
  { skip: kit.skip },
  () => {
    const samples = [
      [1, 2, 3, 4, 100],
      [7],
      [1, 2],
      [3, 1, 2],
      [-5, -1, 0, 2, 9],
      [0, 0, 0, 1],
      [-3, -2, -1],
      [2, 2, 2, 2, 3],
      [1e-9, 1, 1e9],
      [0.5, 0.25, 0.125, 100, 1000, 10],
    ];
    const expected = numpyQuantiles(samples);
    samples.forEach((sample, i) => check(sample, reported([sample]), expected[i] ?? [], JSON.stringify(sample)));
    // The issue's case, spelled out: numpy says 61.6 and 96.16 (the sketch's nearest-rank answer was ≈ 4.01).
    const q = reported([[1, 2, 3, 4, 100]]);
    const p90 = q["p90"] ?? NaN;
    const p99 = q["p99"] ?? NaN;
    assert.ok(Math.abs(p90 - 61.6) <= 0.01 * (4 * 0.4 + 100 * 0.6), `p90 ${p90}`);
    assert.ok(Math.abs(p99 - 96.16) <= 0.01 * (4 * 0.04 + 100 * 0.96), `p99 ${p99}`);
    assert.equal(q["p0"], 1, "the smallest value is exact");
    assert.equal(q["p100"], 100, "the largest value is exact");
  },
);

test("numpy's default quantile within 1% on large samples merged from four ranks' states", { skip: kit.skip }, () => {
  const next = random(20);
  const normal = (): number => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
  const draws: Record<string, () => number> = {
    lognormal: () => Math.exp(normal() * 2),
    "normal around 0 (mixed signs)": () => normal(),
    "normal around 1000": () => 1000 + normal(),
    "uniform integers": () => Math.floor(next() * 1000),
    pareto: () => 1 / Math.pow(1 - next(), 1 / 1.5),
    "latencies with a tail": () => (next() < 0.98 ? 20 + next() * 10 : 500 + next() * 5000),
  };
  const samples = Object.values(draws).map((draw) => Array.from({ length: 100_000 }, draw));
  const expected = numpyQuantiles(samples);
  Object.keys(draws).forEach((name, i) => {
    const sample = samples[i] ?? [];
    const quarter = sample.length / 4;
    const parts = [0, 1, 2, 3].map((r) => sample.slice(r * quarter, (r + 1) * quarter));
    check(sample, reported(parts), expected[i] ?? [], `${name} (100 000 values, 4 ranks)`);
  });
});

test(
  "the quantiles the store holds are numpy's within 1% (a real MetricLogger and SQLite store)",
  { skip: kit.skip },
  async () => {
    getCollector().clear();
    const runDir = tempDir("rankscope-quantiles-run-");
    const logger = await getOrCreateMetricLogger({ runDir, quiet: true });
    await logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } });
    const next = random(7);
    const samples = [[1, 2, 3, 4, 100], Array.from({ length: 5000 }, () => Math.exp(3 * next()))];
    for (const [step, sample] of samples.entries()) {
      for (const v of sample) recordMetric("latency", v, NAME);
      await logger.flush(step);
    }
    await logger.shutdown();
    const expected = numpyQuantiles(samples);
    samples.forEach((sample, step) => {
      const got: Record<string, number> = {};
      for (const q of QS) {
        const suffix = `p${Number((q * 100).toFixed(6))}`;
        const point = series(runDir, `latency/${suffix}`, { rank: -1 }).points.find((p) => p.step === step);
        assert.ok(point !== undefined, `latency/${suffix} at step ${step} is in the store`);
        got[suffix] = point.value;
      }
      check(sample, got, expected[step] ?? [], `stored step ${step}`);
    });
  },
);
