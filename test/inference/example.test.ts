/**
 * examples/inference.ts, run as a user runs it (three model-server processes, two models): what
 * its reduced sink holds (`metrics.jsonl`) is checked against every request each replica measured (the raw values its
 * `per_rank_no_reduce` JSONL backend received): counts and bucket counts exact, p50/p90/p99 within
 * the quantile sketch's 1% relative error, per model, operation and flush.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runNode, tempDir } from "../helpers.js";
import { splitAttributedKey, withSuffix } from "../../src/core/attributes.js";
import { genAiInstrument } from "../../src/inference/conventions.js";

/** numpy's default quantile ("linear") of sorted values. */
function exactQuantile(sorted: readonly number[], q: number): number {
  const h = (sorted.length - 1) * q;
  const lo = Math.floor(h);
  const a = sorted[lo] ?? NaN;
  const b = sorted[Math.min(lo + 1, sorted.length - 1)] ?? NaN;
  return a + (b - a) * (h - lo);
}

/** The lines of JSONL files, parsed. */
function lines(runDir: string, files: RegExp): Array<Record<string, unknown>> {
  return readdirSync(runDir)
    .filter((f) => files.test(f))
    .flatMap((f) => readFileSync(join(runDir, f), "utf8").split("\n"))
    .filter((line) => line !== "")
    .map((line): Record<string, unknown> => JSON.parse(line));
}

/** Every raw value the replicas recorded, by step and key. */
function rawValues(runDir: string): Map<string, number[]> {
  const values = new Map<string, number[]>();
  for (const { key, value, step } of lines(runDir, /^metrics-ModelServer.*\.jsonl$/)) {
    if (typeof key !== "string" || typeof value !== "number") continue;
    const id = `${String(step)} ${key}`;
    values.set(id, [...(values.get(id) ?? []), value]);
  }
  return values;
}

/** The reduced sink: values by step and key, histograms by step and key. */
function reduced(runDir: string): { values: Map<string, number>; histograms: Map<string, unknown> } {
  const values = new Map<string, number>();
  const histograms = new Map<string, unknown>();
  for (const { key, value, step, histogram } of lines(runDir, /^metrics\.jsonl$/)) {
    if (typeof value === "number") values.set(`${String(step)} ${String(key)}`, value);
    if (histogram !== undefined) histograms.set(`${String(step)} ${String(key)}`, histogram);
  }
  return { values, histograms };
}

const field = (h: unknown, name: string): unknown =>
  typeof h === "object" && h !== null ? Reflect.get(h, name) : undefined;
const histogramSum = (h: unknown): unknown => field(h, "sum");
const histogramSumSquares = (h: unknown): unknown => field(h, "sumSquares");

test("the inference example's reduced sink holds exactly what its replicas measured, per model and flush", async () => {
  const runDir = tempDir("rankscope-inference-");
  const run = await runNode(["examples/inference.ts"], { RANKSCOPE_RUN_DIR: runDir });
  assert.equal(run.code, 0, run.stderr);
  assert.match(
    run.stdout,
    /step 1 llama-3\.1-70b: 3 errors \(timeout\), 2730 input_tokens, 252 output_tokens, 24 requests/,
  );

  const raw = rawValues(runDir);
  const sink = reduced(runDir);
  const storedAt = (_: string, key: string, step: number): number | undefined => sink.values.get(`${step} ${key}`);
  let instruments = 0;
  let counts = 0;
  for (const [id, values] of raw) {
    const [stepText = "", key = ""] = id.split(" ");
    const step = Number(stepText);
    const { name, attributes } = splitAttributedKey(key);
    assert.ok(attributes["gen_ai.request.model"]?.startsWith("llama-3.1-"), key);
    const instrument = genAiInstrument(name);
    if (instrument === undefined) {
      // rankscope's counts: the total is exact.
      assert.equal(
        storedAt(runDir, withSuffix(key, "total"), step),
        values.reduce((a, b) => a + b, 0),
        key,
      );
      counts++;
      continue;
    }
    instruments++;
    assert.equal(storedAt(runDir, withSuffix(key, "count"), step), values.length, `${key} count`);
    const sorted = [...values].sort((a, b) => a - b);
    for (const [suffix, q] of [
      ["p50", 0.5],
      ["p90", 0.9],
      ["p99", 0.99],
    ] as const) {
      const exact = exactQuantile(sorted, q);
      const stored = storedAt(runDir, withSuffix(key, suffix), step) ?? NaN;
      assert.ok(Math.abs(stored - exact) <= 0.01 * exact, `${key} ${suffix} at step ${step}: ${stored} vs ${exact}`);
    }
    const histogram = sink.histograms.get(`${step} ${key}`);
    const bounds = instrument.boundaries;
    const expected = new Array<number>(bounds.length + 1).fill(0);
    for (const v of values) {
      const i = bounds.findIndex((b) => v <= b);
      expected[i < 0 ? bounds.length : i] = (expected[i < 0 ? bounds.length : i] ?? 0) + 1;
    }
    assert.deepEqual(
      histogram,
      {
        count: values.length,
        min: sorted[0],
        max: sorted.at(-1),
        sum: histogramSum(histogram),
        sumSquares: histogramSumSquares(histogram),
        bucketLimits: [...bounds, Number.MAX_VALUE],
        bucketCounts: expected,
      },
      `${key} buckets at step ${step}`,
    );
  }
  // 2 flushes × (8b: duration, TTFT, TPOT; 70b: the same and its failed durations).
  assert.equal(instruments, 2 * 7);
  // 2 flushes × (requests, input and output tokens of each model, and the 70b's timeouts).
  assert.equal(counts, 2 * 7);
});
