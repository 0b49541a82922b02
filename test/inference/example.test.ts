/**
 * examples/inference.ts, run as a user runs it (three model-server processes, two models): what
 * each of its reduced sinks holds — `metrics.jsonl` and the store (`metrics.db`, what the
 * dashboard and the team server read) — is checked against every request each replica measured
 * (the raw values its `per_rank_no_reduce` JSONL backend received): counts, totals and bucket
 * counts exact, p50/p90/p99 within the quantile sketch's 1% relative error, per model, operation
 * and flush; and each replica's own p50 and p99 TTFT, which its `per_rank_reduce` store writes
 * under the replica's rank for the Inference tab's slowest replicas, against that replica's raw
 * values. The example writes no other reduced sink (no TensorBoard, W&B, OTLP or Prometheus:
 * those have their own tests of the same keys, docs/inference.md).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runNode, tempDir } from "../helpers.js";
import { splitAttributedKey, withSuffix } from "../../src/core/attributes.js";
import { genAiInstrument } from "../../src/inference/conventions.js";
import { closeStores, histograms as storeHistograms, keys as storeKeys, series } from "../../src/store/reader.js";
import { GLOBAL_RANK } from "../../src/store/read-types.js";

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

/** Each replica's raw TTFT values, by rank, step and key (`${rank} ${step} ${key}`). */
function rawTtftByReplica(runDir: string): Map<string, number[]> {
  const values = new Map<string, number[]>();
  for (const { key, value, step, rank } of lines(runDir, /^metrics-ModelServer.*\.jsonl$/)) {
    if (typeof key !== "string" || typeof value !== "number" || typeof rank !== "number") continue;
    if (splitAttributedKey(key).name !== "gen_ai.server.time_to_first_token") continue;
    const id = `${rank} ${String(step)} ${key}`;
    values.set(id, [...(values.get(id) ?? []), value]);
  }
  return values;
}

/**
 * The lines the Inference tab ranks the slowest replicas by (docs/inference.md, "Slowest
 * replicas"): each replica's own p50 and p99 TTFT, written under its rank by the example's
 * `per_rank_reduce` store, against that replica's raw values. How many were checked.
 */
function checkReplicaLines(runDir: string, raw: Map<string, number[]>): number {
  let checked = 0;
  for (const [id, values] of raw) {
    const [rankText = "", stepText = "", key = ""] = id.split(" ");
    const [rank, step] = [Number(rankText), Number(stepText)];
    const sorted = [...values].sort((a, b) => a - b);
    for (const [suffix, q] of [
      ["p50", 0.5],
      ["p99", 0.99],
    ] as const) {
      const exact = exactQuantile(sorted, q);
      const stored = series(runDir, withSuffix(key, suffix), { rank }).points.find((p) => p.step === step)?.value;
      assert.ok(
        stored !== undefined && Math.abs(stored - exact) <= 0.01 * exact,
        `replica ${rank}'s ${suffix} of ${key} at step ${step}: ${stored} vs ${exact}`,
      );
    }
    checked++;
  }
  return checked;
}

/** A reduced sink: values by step and key, histograms by step and key (`${step} ${key}`). */
interface Sink {
  readonly values: Map<string, number>;
  readonly histograms: Map<string, unknown>;
}

/** The JSONL sink (`metrics.jsonl`). */
function reduced(runDir: string): Sink {
  const values = new Map<string, number>();
  const histograms = new Map<string, unknown>();
  for (const { key, value, step, histogram } of lines(runDir, /^metrics\.jsonl$/)) {
    if (typeof value === "number") values.set(`${String(step)} ${String(key)}`, value);
    if (histogram !== undefined) histograms.set(`${String(step)} ${String(key)}`, histogram);
  }
  return { values, histograms };
}

/** The store's global lines and histograms, read back with its read API. */
function stored(runDir: string): Sink {
  const values = new Map<string, number>();
  const histograms = new Map<string, unknown>();
  for (const { key, ranks } of storeKeys(runDir, "scalar")) {
    if (!ranks.includes(GLOBAL_RANK)) continue;
    for (const p of series(runDir, key).points) values.set(`${p.step} ${key}`, p.value);
  }
  for (const h of storeHistograms(runDir))
    if (h.rank === GLOBAL_RANK) histograms.set(`${h.step} ${h.key}`, { ...h.histogram });
  return { values, histograms };
}

const field = (h: unknown, name: string): unknown =>
  typeof h === "object" && h !== null ? Reflect.get(h, name) : undefined;
const histogramSum = (h: unknown): unknown => field(h, "sum");
const histogramSumSquares = (h: unknown): unknown => field(h, "sumSquares");

/** Check one sink against the raw values: how many instrument and count keys it was checked on. */
function checkSink(sinkName: string, sink: Sink, raw: Map<string, number[]>): { instruments: number; counts: number } {
  const storedAt = (key: string, step: number): number | undefined => sink.values.get(`${step} ${key}`);
  let instruments = 0;
  let counts = 0;
  for (const [id, values] of raw) {
    const [stepText = "", key = ""] = id.split(" ");
    const step = Number(stepText);
    const at = `${sinkName}: ${key} at step ${step}`;
    const { name, attributes } = splitAttributedKey(key);
    assert.ok(attributes["gen_ai.request.model"]?.startsWith("llama-3.1-"), key);
    const instrument = genAiInstrument(name);
    if (instrument === undefined) {
      // rankscope's counts: the total is exact.
      assert.equal(
        storedAt(withSuffix(key, "total"), step),
        values.reduce((a, b) => a + b, 0),
        `${at} total`,
      );
      counts++;
      continue;
    }
    instruments++;
    assert.equal(storedAt(withSuffix(key, "count"), step), values.length, `${at} count`);
    const sorted = [...values].sort((a, b) => a - b);
    for (const [suffix, q] of [
      ["p50", 0.5],
      ["p90", 0.9],
      ["p99", 0.99],
    ] as const) {
      const exact = exactQuantile(sorted, q);
      const value = storedAt(withSuffix(key, suffix), step) ?? NaN;
      assert.ok(Math.abs(value - exact) <= 0.01 * exact, `${at} ${suffix}: ${value} vs ${exact}`);
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
      `${at} buckets`,
    );
  }
  return { instruments, counts };
}

test("the inference example's reduced sinks (JSONL and the store) hold exactly what its replicas measured, per model and flush, and the store each replica's own TTFT", async () => {
  const runDir = tempDir("rankscope-inference-");
  const run = await runNode(["examples/inference.ts"], { RANKSCOPE_RUN_DIR: runDir });
  assert.equal(run.code, 0, run.stderr);
  assert.match(
    run.stdout,
    /step 1 llama-3\.1-70b: 3 errors \(timeout\), 2730 input_tokens, 252 output_tokens, 24 requests/,
  );

  const raw = rawValues(runDir);
  const sinks: Array<[string, Sink]> = [
    ["metrics.jsonl", reduced(runDir)],
    ["the store", stored(runDir)],
  ];
  // 3 replicas × 2 models × 2 flushes: each replica's own TTFT, what the slowest replicas rank.
  assert.equal(checkReplicaLines(runDir, rawTtftByReplica(runDir)), 3 * 2 * 2);
  closeStores();
  for (const [name, sink] of sinks) {
    const { instruments, counts } = checkSink(name, sink, raw);
    // 2 flushes × (8b: duration, TTFT, TPOT; 70b: the same and its failed durations).
    assert.equal(instruments, 2 * 7, name);
    // 2 flushes × (requests, input and output tokens of each model, and the 70b's timeouts).
    assert.equal(counts, 2 * 7, name);
  }
});
