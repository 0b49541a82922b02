/**
 * The tensorboard backend through a real MetricLogger: the files are read back with an independent
 * decoder (its own CRC-32C and .proto text) and every value, step and wall time is compared with
 * what was recorded.
 */
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { basename, join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { registerBackend, type Backend } from "../../../src/backends/backend.js";
import { HISTOGRAM_EDGES } from "../../../src/core/accumulators/histogram.js";
import { getCollector, recordMetric } from "../../../src/core/collector.js";
import {
  diagnosticCounts,
  resetDiagnostics,
  setDiagnosticHandler,
  type Diagnostic,
} from "../../../src/core/diagnostics.js";
import type { Metric, StreamRecord } from "../../../src/core/metric.js";
import { Reduce } from "../../../src/core/registry.js";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { tempDir } from "../../helpers.js";
import {
  decodeHParams,
  decodeTextPluginData,
  eventFiles,
  readEvents,
  scalarPoints,
  type DecodedEvent,
} from "./tfevents-reader.js";

afterEach(() => {
  getCollector().clear();
});

const FILE_NAME = new RegExp(
  `^events\\.out\\.tfevents\\.\\d{10}\\.${hostname().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\.${process.pid}\\.\\d+$`,
);

/** The single event file of a directory, checked to be named as TensorBoard's writers name them. */
function onlyEventFile(dir: string): string {
  const files = eventFiles(dir);
  assert.equal(files.length, 1, `one event file in ${dir}, found ${readdirSync(dir).join(", ")}`);
  const file = files[0] as string;
  assert.match(basename(file), FILE_NAME);
  return file;
}

/** The float32 TensorBoard stores for a value (NaN and ±Infinity included). */
function f32(value: number): number {
  return Math.fround(value);
}

/** Scalar points the file must hold for these metrics, tags mapped by `tagOf`. */
function expectedPoints(metrics: readonly Metric[], tagOf: (key: string) => string = (k) => k) {
  return metrics.map((m) => ({ tag: tagOf(m.key), value: f32(m.value), step: m.step, wallTime: m.timestamp / 1000 }));
}

function assertPointsEqual(actual: ReturnType<typeof scalarPoints>, expected: ReturnType<typeof scalarPoints>): void {
  assert.equal(actual.length, expected.length, "number of scalar points");
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i] as (typeof actual)[number];
    const e = expected[i] as (typeof expected)[number];
    assert.equal(a.tag, e.tag, `tag of point ${i}`);
    assert.ok(Object.is(a.value, e.value), `value of ${e.tag} at step ${e.step}: got ${a.value}, expected ${e.value}`);
    assert.equal(a.step, e.step, `step of ${e.tag}`);
    assert.equal(a.wallTime, e.wallTime, `wall time of ${e.tag} at step ${e.step}`);
  }
}

describe("tensorboard backend (global_reduce)", () => {
  it("writes every reduced scalar, histogram, sample table and hyperparameter that TensorBoard reads", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir });
    await logger.initBackends({ tensorboard: { loggingMode: "global_reduce" } });
    await logger.logHyperparams({
      lr: 3e-4,
      model: { name: "tiny", layers: 4 },
      amp: true,
      betas: [0.9, 0.95],
      note: null,
    });

    const flushed: Metric[] = [];
    const histogramValues: number[][] = [];
    const samples: { prompt: string; reward: number; extra?: unknown }[][] = [];
    const specials = [NaN, Infinity, -Infinity, 1e-40, 3.4e38 * 10];
    for (let step = 0; step < 6; step++) {
      recordMetric("loss", 1 / (step + 1), Reduce.MEAN);
      recordMetric("loss", 2 / (step + 1), Reduce.MEAN);
      recordMetric("tokens", 1000 + step, Reduce.SUM);
      recordMetric("grad_norm", 0.1 * step, Reduce.STD);
      recordMetric("grad_norm", 0.3 * step, Reduce.STD);
      recordMetric("special", specials[step % specials.length] as number, Reduce.MAX);
      recordMetric("latency_ms", 10 + step, Reduce.QUANTILES);
      const hv = [0.5, 0.5, 3, 100 + step, -2, 0];
      histogramValues.push(hv);
      for (const v of hv) recordMetric("weights", v, Reduce.HISTOGRAM);
      const recs = [
        { prompt: `p${step}a`, reward: step, extra: { ok: true } },
        { prompt: `p${step}b`, reward: -step - 1 },
      ];
      samples.push(recs);
      for (const r of recs) recordMetric("rollout", r, Reduce.SAMPLE);
      const result = await logger.flush(step);
      flushed.push(...result.metrics);
    }
    await logger.shutdown();

    const file = onlyEventFile(join(runDir, "tensorboard"));
    const events = readEvents(file);
    const first = events[0] as DecodedEvent;
    assert.equal(first.file_version, "brain.Event:2");
    assert.equal(typeof first.wall_time, "number");
    // SessionLog START at the first step, before the first data (the hparams event may come first).
    const startAt = events.findIndex((e) => e.session_log !== undefined);
    assert.equal(events[startAt]?.session_log?.status, 1, "SessionLog.START");
    assert.equal(events[startAt]?.step ?? 0, 0);
    assert.ok(startAt < events.findIndex((e) => e.summary?.value.some((v) => v.simple_value !== undefined)));
    assert.equal(events.filter((e) => e.session_log !== undefined).length, 1);

    // Scalars: every output of every reduction, in order, with the flush's step and time.
    assertPointsEqual(scalarPoints(events), expectedPoints(flushed));
    assert.ok(
      flushed.some((m) => Number.isNaN(m.value)) && flushed.some((m) => m.value === Infinity),
      "the run recorded NaN and Infinity",
    );
    const keys = new Set(flushed.map((m) => m.key));
    for (const k of [
      "loss",
      "tokens",
      "grad_norm",
      "special",
      "latency_ms/p50",
      "latency_ms/p99",
      "weights/count",
      "weights/mean",
    ])
      assert.ok(keys.has(k), `has ${k}`);

    // Histograms: one per flush, its buckets holding exactly the recorded values.
    const histos = events.flatMap((e) =>
      (e.summary?.value ?? []).filter((v) => v.histo !== undefined).map((v) => ({ e, v })),
    );
    assert.equal(histos.length, 6);
    histos.forEach(({ e, v }, step) => {
      assert.equal(v.tag, "weights");
      assert.equal(e.step ?? 0, step);
      const wallTime = flushed.find((m) => m.step === step)?.timestamp;
      assert.equal(e.wall_time, (wallTime as number) / 1000);
      const values = histogramValues[step] as number[];
      const h = v.histo as Required<NonNullable<typeof v.histo>>;
      assert.equal(h.num, values.length);
      assert.equal(h.min, Math.min(...values));
      assert.equal(h.max, Math.max(...values));
      assert.equal(
        h.sum,
        values.reduce((a, b) => a + b, 0),
      );
      assert.equal(
        h.sum_squares,
        values.reduce((a, b) => a + b * b, 0),
      );
      assert.equal(h.bucket_limit.length, h.bucket.length);
      // TensorBoard reads bucket i as (limit[i-1], limit[i]]: each must hold exactly the values in it.
      for (let i = 0; i < h.bucket.length; i++) {
        const low = i === 0 ? -Infinity : (h.bucket_limit[i - 1] as number);
        const high = h.bucket_limit[i] as number;
        const inside = values.filter((x) => x > low && x <= high).length;
        assert.equal(h.bucket[i], inside, `bucket (${low}, ${high}] at step ${step}`);
      }
      for (const limit of h.bucket_limit) assert.ok(HISTOGRAM_EDGES.includes(limit), `limit ${limit} is a bucket edge`);
    });

    // Text: the samples of each flush as a table (header row, then best and worst record).
    const texts = events.flatMap((e) =>
      (e.summary?.value ?? []).filter((v) => v.tensor?.dtype === 7).map((v) => ({ e, v })),
    );
    assert.equal(texts.length, 6);
    texts.forEach(({ e, v }, step) => {
      assert.equal(v.tag, "rollout");
      assert.equal(e.step ?? 0, step);
      assert.equal(
        e.wall_time,
        (flushed.find((m) => m.step === step)?.timestamp as number) / 1000,
        "samples share the flush's wall time",
      );
      assert.equal(v.metadata?.plugin_data?.plugin_name, "text");
      assert.equal(decodeTextPluginData(v.metadata?.plugin_data?.content ?? new Uint8Array()).version, 0);
      const dims = (v.tensor?.tensor_shape?.dim ?? []).map((d) => d.size);
      assert.deepEqual(dims, [3, 3]);
      const cells = (v.tensor?.string_val ?? []).map((b) => Buffer.from(b).toString("utf8"));
      const [best, worst] = samples[step] as [{ prompt: string; reward: number }, { prompt: string; reward: number }];
      assert.deepEqual(cells, [
        "prompt",
        "reward",
        "extra",
        best.prompt,
        String(best.reward),
        '{"ok":true}',
        worst.prompt,
        String(worst.reward),
        "",
      ]);
    });

    // Hyperparameters: the hparams plugin's session start info, config flattened.
    const hp = events.flatMap((e) => (e.summary?.value ?? []).filter((v) => v.tag === "_hparams_/session_start_info"));
    assert.equal(hp.length, 1);
    const value = hp[0] as NonNullable<(typeof hp)[number]>;
    assert.equal(value.metadata?.plugin_data?.plugin_name, "hparams");
    assert.deepEqual(
      value.tensor?.tensor_shape?.dim?.map((d) => d.size ?? 0),
      [0],
      "the plugin's null tensor",
    );
    const info = decodeHParams(value.metadata?.plugin_data?.content ?? new Uint8Array());
    assert.equal(info.version ?? 0, 0);
    assert.deepEqual(info.session_start_info?.hparams, {
      lr: { number_value: 3e-4 },
      "model.name": { string_value: "tiny" },
      "model.layers": { number_value: 4 },
      amp: { bool_value: true },
      betas: { string_value: "[0.9,0.95]" },
      note: { string_value: "null" },
    });
    assert.equal(typeof info.session_start_info?.start_time_secs, "number");
  });

  it("a resumed run writes SessionLog START at the resumed step before the new points", async () => {
    const runDir = tempDir();
    const first = new MetricLogger({ runDir });
    await first.initBackends({ tensorboard: { loggingMode: "global_reduce" } });
    for (let step = 0; step < 8; step++) {
      recordMetric("loss", step, Reduce.MEAN);
      await first.flush(step);
    }
    await first.shutdown();

    const second = new MetricLogger({ runDir });
    await second.initBackends({ tensorboard: { loggingMode: "global_reduce" } }, { resumeStep: 5 });
    const resumed: Metric[] = [];
    for (let step = 5; step < 7; step++) {
      recordMetric("loss", 100 + step, Reduce.MEAN);
      resumed.push(...(await second.flush(step)).metrics);
    }
    await second.shutdown();

    const files = eventFiles(join(runDir, "tensorboard"));
    assert.equal(files.length, 2, "one event file per attempt");
    // Each attempt: file_version, SessionLog START at its first step, then its points.
    const attempts = files.map(readEvents).sort((a, b) => (a[1]?.step ?? 0) - (b[1]?.step ?? 0));
    const [firstEvents, events] = attempts as [DecodedEvent[], DecodedEvent[]];
    for (const [attempt, startStep] of [
      [firstEvents, 0],
      [events, 5],
    ] as const) {
      assert.equal(attempt[0]?.file_version, "brain.Event:2");
      assert.equal(attempt[1]?.session_log?.status, 1, "SessionLog.START");
      assert.equal(attempt[1]?.step ?? 0, startStep);
    }
    assert.equal(scalarPoints(firstEvents).length, 8);
    assertPointsEqual(scalarPoints(events.slice(2)), expectedPoints(resumed));
  });

  it("an attempt that is not a resume starts its session at its first logged step, so it drops nothing before it", async () => {
    const runDir = tempDir();
    for (const steps of [
      [0, 1, 2],
      [7, 8],
    ]) {
      const logger = new MetricLogger({ runDir });
      await logger.initBackends({ tensorboard: { loggingMode: "global_reduce" } });
      for (const step of steps) {
        recordMetric("loss", step, Reduce.MEAN);
        await logger.flush(step);
      }
      await logger.shutdown();
    }
    const attempts = eventFiles(join(runDir, "tensorboard")).map(readEvents);
    const starts = attempts.map((events) => events.filter((e) => e.session_log !== undefined).map((e) => e.step ?? 0));
    assert.deepEqual(starts.sort(), [[0], [7]]);
  });

  it("a run directory that cannot be created is reported once and counted; the loop and other backends go on", async () => {
    const base = tempDir();
    const blocker = join(base, "not-a-directory");
    writeFileSync(blocker, "a file where the run directory should be");
    const runDir = join(blocker, "run");
    const jsonlFile = join(base, "metrics.jsonl");
    resetDiagnostics();
    const seen: Diagnostic[] = [];
    const restore = setDiagnosticHandler((d) => seen.push(d));
    try {
      const logger = new MetricLogger({ runDir });
      await logger.initBackends({
        tensorboard: { loggingMode: "global_reduce" },
        jsonl: { loggingMode: "global_reduce", file: jsonlFile },
      });
      for (let step = 0; step < 3; step++) {
        recordMetric("loss", step, Reduce.MEAN);
        const result = await logger.flush(step);
        assert.equal(result.metrics.length, 1);
      }
      // The disk is fixed: the file then starts with its header, and later points are there.
      rmSync(blocker);
      recordMetric("loss", 3, Reduce.MEAN);
      await logger.flush(3);
      await logger.shutdown();
    } finally {
      restore();
    }
    const recovered = readEvents(onlyEventFile(join(runDir, "tensorboard")));
    assert.equal(recovered[0]?.file_version, "brain.Event:2");
    assert.equal(recovered[1]?.session_log?.status, 1);
    assert.deepEqual(
      scalarPoints(recovered).map((p) => [p.step, p.value]),
      [[3, 3]],
    );
    const writeErrors = seen.filter((d) => d.code.startsWith("file.write:") && d.code.includes("tensorboard"));
    assert.equal(writeErrors.length, 1, `reported once: ${JSON.stringify(seen)}`);
    assert.equal(writeErrors[0]?.level, "error");
    assert.match(writeErrors[0]?.message ?? "", /could not write .*events\.out\.tfevents\./);
    const code = writeErrors[0]?.code;
    assert.ok((diagnosticCounts()[code] ?? 0) >= 3, `counted every failed write: ${diagnosticCounts()[code]}`);
    const lines = readFileSync(jsonlFile, "utf8").trim().split("\n");
    assert.equal(lines.length, 4, "the jsonl backend still got every flush");
  });

  it("after a failed write to an existing file, writing goes on in a new file that TensorBoard reads whole", async () => {
    const runDir = tempDir();
    const tbDir = join(runDir, "tensorboard");
    resetDiagnostics();
    const seen: Diagnostic[] = [];
    const restore = setDiagnosticHandler((d) => seen.push(d));
    let kept: string;
    let original: string;
    try {
      const logger = new MetricLogger({ runDir });
      await logger.initBackends({ tensorboard: { loggingMode: "global_reduce" } });
      recordMetric("loss", 0.5, Reduce.MEAN);
      await logger.flush(0);
      // The file becomes unwritable (here: a directory takes its place) for one flush.
      original = onlyEventFile(tbDir);
      kept = join(runDir, "kept-first-file");
      renameSync(original, kept);
      mkdirSync(original);
      recordMetric("loss", 1.5, Reduce.MEAN);
      await logger.flush(1);
      recordMetric("loss", 2.5, Reduce.MEAN);
      await logger.flush(2);
      recordMetric("loss", 3.5, Reduce.MEAN);
      await logger.flush(3);
      await logger.shutdown();
    } finally {
      restore();
    }
    assert.equal(seen.filter((d) => d.code.startsWith("file.write:")).length, 1, "reported once");
    const first = readEvents(kept);
    assert.deepEqual(
      first.slice(0, 2).map((e) => [e.file_version, e.session_log?.status]),
      [
        ["brain.Event:2", undefined],
        [undefined, 1],
      ],
    );
    assert.deepEqual(
      scalarPoints(first).map((p) => [p.step, p.value]),
      [[0, 0.5]],
    );
    const next = eventFiles(tbDir).filter((f) => f !== original);
    assert.equal(next.length, 1, "one new file beside the unwritable path");
    const events = readEvents(next[0] as string);
    assert.equal(events[0]?.file_version, "brain.Event:2");
    assert.equal(
      events.filter((e) => e.session_log !== undefined).length,
      0,
      "no second START: it would read as a restart",
    );
    assert.deepEqual(
      scalarPoints(events).map((p) => [p.step, p.value]),
      [
        [2, 2.5],
        [3, 3.5],
      ],
      "the failed flush's points are lost (and counted), later ones kept",
    );
  });

  it("rejects a dir option that is not a path, saying what is valid", async () => {
    const logger = new MetricLogger({ runDir: tempDir() });
    // @ts-expect-error -- a wrong option type is a compile error too; this checks the runtime error
    const badDir = logger.initBackends({ tensorboard: { loggingMode: "global_reduce", dir: 42 } });
    await assert.rejects(badDir, /dir must be a non-empty path/);
    await logger.shutdown();
  });
});

describe("tensorboard backend (internal keys)", () => {
  async function tagsWritten(options: Record<string, unknown>): Promise<string[]> {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir });
    await logger.initBackends({ tensorboard: { loggingMode: "global_reduce", ...options } });
    recordMetric("loss", 0.5, Reduce.MEAN);
    recordMetric("acc__count", 3, Reduce.SUM);
    recordMetric("rankscope/stream_dropped", 0, Reduce.SUM);
    await logger.flush(0);
    await logger.shutdown();
    const tags = [
      ...new Set(scalarPoints(readEvents(onlyEventFile(join(runDir, "tensorboard")))).map((p) => p.tag)),
    ].sort();
    rmSync(runDir, { recursive: true, force: true });
    return tags;
  }

  it("leaves rankscope's own keys out unless internal: true", async () => {
    assert.deepEqual(await tagsWritten({}), ["loss"]);
    assert.deepEqual(await tagsWritten({ internal: true }), ["acc__count", "loss", "rankscope/stream_dropped"]);
    const logger = new MetricLogger({ runDir: tempDir() });
    // @ts-expect-error -- a wrong option type is a compile error too; this checks the runtime error
    const badInternal = logger.initBackends({ tensorboard: { loggingMode: "global_reduce", internal: "yes" } });
    await assert.rejects(badInternal, /internal must be true or false/);
    await logger.shutdown();
  });
});

describe("tensorboard backend (per-rank modes)", () => {
  it("per_rank_reduce writes tensorboard/{rankName}/, so TensorBoard shows one run per rank", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, processName: "Trainer" });
    await logger.initBackends({ tensorboard: { loggingMode: "per_rank_reduce" } });
    const before = Date.now();
    for (let step = 0; step < 3; step++) {
      recordMetric("loss", step * 0.25, Reduce.MEAN);
      await logger.flush(step);
    }
    const after = Date.now();
    await logger.shutdown();
    const events = readEvents(onlyEventFile(join(runDir, "tensorboard", "Trainer")));
    const points = scalarPoints(events);
    assert.deepEqual(
      points.map((p) => [p.tag, p.value, p.step]),
      [
        ["loss", 0, 0],
        ["loss", 0.25, 1],
        ["loss", 0.5, 2],
      ],
    );
    for (const p of points)
      assert.ok(p.wallTime * 1000 >= before && p.wallTime * 1000 <= after, "wall time is the flush's time");
  });

  it("perRankShareRun writes into tensorboard/ with tags prefixed by the rank name", async () => {
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, processName: "Trainer" });
    await logger.initBackends({ tensorboard: { loggingMode: "per_rank_reduce", perRankShareRun: true } });
    recordMetric("loss", 1.5, Reduce.MEAN);
    await logger.flush(0);
    await logger.shutdown();
    const points = scalarPoints(readEvents(onlyEventFile(join(runDir, "tensorboard"))));
    assert.deepEqual(
      points.map((p) => [p.tag, p.value, p.step]),
      [["Trainer/loss", 1.5, 0]],
    );
  });

  it("per_rank_no_reduce writes every streamed value at its own timestamp", async () => {
    const captured: StreamRecord[] = [];
    registerBackend("test-stream-capture", (): Backend => ({
      logBatch() {},
      logStream: (batch) => void captured.push(...batch),
    }));
    const runDir = tempDir();
    const logger = new MetricLogger({ runDir, processName: "Worker" });
    await logger.initBackends({
      tensorboard: { loggingMode: "per_rank_no_reduce" },
      capture: { loggingMode: "per_rank_no_reduce", type: "test-stream-capture" },
    });
    const recorded = [0.5, NaN, -Infinity, 7, 1e10];
    for (const [i, v] of recorded.entries()) {
      recordMetric(i % 2 === 0 ? "probe/a" : "probe/b", v, Reduce.MEAN);
      if (i === 2) await logger.flush(0);
    }
    await logger.shutdown();
    assert.equal(captured.length, recorded.length);
    const points = scalarPoints(readEvents(onlyEventFile(join(runDir, "tensorboard", "Worker"))));
    assertPointsEqual(
      points,
      captured.map((r) => ({ tag: r.key, value: f32(r.value), step: r.step, wallTime: r.timestamp / 1000 })),
    );
    assert.deepEqual(
      points.map((p) => p.step),
      [0, 0, 0, 1, 1],
      "values recorded after flush(0) belong to step 1",
    );
  });
});
