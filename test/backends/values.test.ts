/**
 * What every sink holds for −0, NaN, ±Infinity and integers beyond 2^53, and W&B's histograms,
 * read with each format's own reader (docs/DESIGN.md, "Values in every sink"): Python's `json`
 * for the JSONL and stream files, Python's `sqlite3` for the store, TensorBoard 2.21's
 * EventAccumulator and `data_compat` (what its histograms plugin shows), the W&B SDK's protobufs
 * for the offline run and the official `wandb sync` into the strict local server (the W&B cloud
 * cannot run here), and the console as printed. Prometheus and OTLP are checked against a real
 * Prometheus and the OTLP protos in their own tests.
 */
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { recordMetric } from "../../src/core/collector.js";
import { Reduce } from "../../src/core/registry.js";
import { HISTOGRAM_EDGES } from "../../src/core/accumulators/histogram.js";
import { nextUp } from "../../src/core/doubles.js";
import { series } from "../../src/store/reader.js";
import { captureStdout, collectDiagnostics, tempDir } from "../helpers.js";
import { pythonKit } from "../helpers/python.js";
import { resetProcess, wandbSdkEnv } from "./wandb/wandb-helpers.js";
import { StrictWandbServer } from "./wandb/wandb-server.js";

const here = dirname(fileURLToPath(import.meta.url));
const kit = pythonKit("wandb");
const tensorboard = pythonKit("tensorboard");
const skip = kit.skip !== false ? kit.skip : tensorboard.skip;

const BIG63 = 2n ** 63n - 1n;
const HUGE = 2n ** 70n;
/** The values of the first histogram (the issue's), and of the second (a 0 alone in its bucket, then a gap). */
const H1 = [1, 2, 2, 3, 3, 3, 10, -5, 0];
const H2 = [0, 5];
/** Bucket limits as recorded values: the first default edge above 1, and above 100. */
const E1 = HISTOGRAM_EDGES.find((e) => e > 1) as number;
const E100 = HISTOGRAM_EDGES.find((e) => e > 100) as number;
/**
 * More histograms of the first flush, for W&B's bins against numpy's reading of them: zeros and
 * negatives, values exactly on bucket limits (0, ±1e-12, E1, −E1, E100), all equal, all zero.
 */
const MORE_HISTOGRAMS: Record<string, number[]> = {
  h_zero_neg: [-3, -2, -2, 0, 0, -1e-13, -0, 0.5],
  h_edges: [0, 0, -1e-12, 1e-12, 1e-12, E1, E1, -E1, E100, 7],
  h_equal: [3, 3, 3, 3],
  h_zeros: [0, 0, 0],
  h_edge_equal: [E1, E1],
};

/** Python's view of a number: [type, repr]. */
type Typed = [string, string];
// JSON as the Python readers print it (shapes checked by the assertions).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

function python(reader: string, path: string): Json {
  const run = spawnSync(kit.python ?? "python3", [join(here, "python", "values_readers.py"), reader, path], {
    encoding: "utf8",
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout);
}

/**
 * numpy.histogram of each recorded value list with W&B's bin edges: what a W&B user (and
 * `wandb.Histogram`) reads from those bins. Each must equal the counts W&B was sent.
 */
function rebinWithNumpy(histograms: readonly { values: readonly number[]; bins: readonly number[] }[]): number[][] {
  const dir = tempDir("rankscope-rebin-");
  try {
    const file = join(dir, "histograms.json");
    writeFileSync(file, JSON.stringify(histograms));
    return python("rebin", file) as number[][];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every histogram of the two flushes W&B got (`key@step`), with the values recorded for it. */
function recordedHistograms(): { name: string; key: string; step: number; values: number[] }[] {
  return [
    { name: "h@1", key: "h", step: 0, values: H1 },
    { name: "h@2", key: "h", step: 1, values: H2 },
    ...Object.entries(MORE_HISTOGRAMS).map(([key, values]) => ({ name: `${key}@1`, key, step: 0, values })),
  ];
}

/** W&B's bins against numpy's re-binning of the recorded values: the same counts, every bin with a width. */
function assertNumpyReadsTheCounts(bin: (key: string, step: number) => { values: number[]; bins: number[] }): void {
  const all = recordedHistograms();
  const sent = all.map((h) => bin(h.key, h.step));
  const numpy = rebinWithNumpy(all.map((h, i) => ({ values: h.values, bins: (sent[i] as { bins: number[] }).bins })));
  all.forEach((h, i) => {
    const { values, bins } = sent[i] as { values: number[]; bins: number[] };
    assert.equal(bins.length, values.length + 1, `${h.name}: n + 1 edges`);
    for (let j = 0; j < values.length; j++)
      assert.ok(
        (bins[j] as number) < (bins[j + 1] as number),
        `${h.name}: bin ${j} [${bins[j]}, ${bins[j + 1]}] has a width`,
      );
    assert.deepEqual(
      numpy[i],
      values,
      `${h.name}: numpy.histogram(${JSON.stringify(h.values)}, ${JSON.stringify(bins)})`,
    );
  });
}

/** What a sink must give for each scalar key, as Python sees it. */
const EXPECTED: Record<string, Typed> = {
  negz: ["int", "0"],
  negz_mean: ["int", "0"],
  small: ["float", "0.1"],
  big53: ["float", "9007199254740992.0"],
  big63: ["float", "9.223372036854776e+18"],
  f60: ["float", "1.152921504606847e+18"],
};

interface Job {
  readonly runDir: string;
  readonly stdout: string;
  readonly warnings: string[];
}

/** The job: every sink but Prometheus/OTLP, two flushes, W&B offline (for the SDK and `wandb sync`). */
async function job(): Promise<Job> {
  resetProcess();
  const runDir = tempDir("rankscope-values-");
  const logger = new MetricLogger({ runDir, experiment: "values", trial: "t1", quiet: true });
  await logger.initBackends(
    {
      console: { loggingMode: "global_reduce" },
      jsonl: { loggingMode: "global_reduce" },
      store: { loggingMode: "global_reduce", waitForWrites: true },
      tensorboard: { loggingMode: "global_reduce" },
      wandb: { loggingMode: "global_reduce", mode: "offline", project: "proj", entity: "team" },
      raw: { type: "jsonl", loggingMode: "per_rank_no_reduce", file: "raw.jsonl" },
    },
    { runConfig: { lr: 0.1, big: BIG63, huge: HUGE } },
  );
  let warnings: string[] = [];
  const stdout = await captureStdout(async () => {
    const seen = await collectDiagnostics(async () => {
      recordMetric("negz", -0, Reduce.MAX);
      recordMetric("negz_mean", -0, Reduce.MEAN);
      recordMetric("small", 0.1, Reduce.MEAN);
      recordMetric("big53", 2n ** 53n + 1n, Reduce.MAX);
      recordMetric("big63", BIG63, Reduce.MAX);
      recordMetric("f60", 2 ** 60, Reduce.MAX);
      recordMetric("nan", NaN, Reduce.MEAN);
      recordMetric("pinf", Infinity, Reduce.MAX);
      recordMetric("ninf", -Infinity, Reduce.MIN);
      recordMetric("episode", { reward: 1, tokens: BIG63, huge: HUGE, negz: -0 }, Reduce.SAMPLE);
      for (const v of H1) recordMetric("h", v, Reduce.HISTOGRAM);
      for (const [key, values] of Object.entries(MORE_HISTOGRAMS))
        for (const v of values) recordMetric(key, v, Reduce.HISTOGRAM);
      await logger.flush(1);
      for (const v of H2) recordMetric("h", v, Reduce.HISTOGRAM);
      recordMetric("w__count", 4, Reduce.SUM);
      await logger.flush(2);
      await logger.shutdown();
    });
    warnings = seen.map((d) => `${d.code}: ${d.message}`);
  });
  return { runDir, stdout, warnings };
}

describe("values in every sink, read with each format's own reader", { skip }, () => {
  let run: Job;
  const scratch: string[] = [];
  before(async () => {
    run = await job();
    scratch.push(run.runDir);
  });
  after(() => {
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  });

  it("a bigint metric is recorded as the nearest double, with a warning naming the key and what it became", () => {
    assert.ok(
      run.warnings.some(
        (w) =>
          w.startsWith("recordMetric.bigintRounded:big63: ") &&
          w.includes("9223372036854775807n") &&
          w.includes("9.223372036854776e+18 (off by 1)"),
      ),
      run.warnings.join("\n"),
    );
    assert.ok(
      run.warnings.some((w) => w.startsWith("recordMetric.bigintRounded:big53: ")),
      "2^53 + 1 has no double either",
    );
    assert.ok(
      !run.warnings.some((w) => /backend .* failed|Do not know how to serialize a BigInt/.test(w)),
      `no sink fails on a bigint: ${run.warnings.join("\n")}`,
    );
  });

  it("jsonl and the stream file: Python's json reads floats from 2^53 up (never an integer literal), NaN/±Infinity as strings, −0 as 0, a sample's bigints exactly", () => {
    const lines = python("jsonl", join(run.runDir, "metrics.jsonl")) as Json[];
    const value = (key: string): unknown => lines.find((l) => l.key === key)?.value;
    for (const [key, typed] of Object.entries(EXPECTED)) assert.deepEqual(value(key), typed, `metrics.jsonl ${key}`);
    assert.equal(value("nan"), "NaN");
    assert.equal(value("pinf"), "Infinity");
    assert.equal(value("ninf"), "-Infinity");
    const sample = lines.find((l) => l.key === "episode")?.samples?.[0];
    assert.deepEqual(
      sample,
      {
        reward: ["int", "1"],
        tokens: ["int", "9223372036854775807"],
        huge: "1180591620717411303424",
        negz: ["int", "0"],
      },
      "bigints exact: an integer within int64, digits in a string beyond",
    );
    const raw = python("jsonl", join(run.runDir, "raw.jsonl")) as Json[];
    const rawValue = (key: string): unknown => raw.find((l) => l.key === key)?.value;
    for (const key of ["negz", "negz_mean", "small", "big53", "big63", "f60"])
      assert.deepEqual(rawValue(key), EXPECTED[key], `raw.jsonl ${key}`);
    assert.equal(rawValue("nan"), "NaN");
  });

  it("the store: SQLite REALs as the doubles (NaN stored as NULL), −0 as 0, samples' and config's bigints exact in their JSON", () => {
    const store = python("store", join(run.runDir, "metrics.db"));
    const point = (key: string): unknown => store.points.find((p: Json) => p[0] === key)?.[2];
    for (const key of ["negz", "negz_mean", "big63", "f60"])
      assert.deepEqual(point(key), key.startsWith("negz") ? ["float", "0.0"] : EXPECTED[key], `store ${key}`);
    assert.equal(point("nan"), null);
    assert.deepEqual(point("pinf"), ["float", "inf"]);
    assert.deepEqual(store.samples[0][2][0].tokens, ["int", "9223372036854775807"]);
    assert.equal(store.samples[0][2][0].huge, "1180591620717411303424");
    const config = JSON.stringify(store.config);
    assert.match(config, /"big":\["int","9223372036854775807"\]/);
    assert.match(config, /"huge":"1180591620717411303424"/);
    // And through rankscope's own reader.
    assert.ok(Object.is(series(run.runDir, "negz", { rank: -1 }).points[0]?.value, 0));
    assert.equal(series(run.runDir, "big63", { rank: -1 }).points[0]?.value, 2 ** 63);
  });

  it("the console: exponent form from 2^53 up, −0 as 0.0, a sample's bigints as their digits", () => {
    assert.match(run.stdout, /^big63: +9\.22337e\+18$/m);
    assert.match(run.stdout, /^big53: +9\.0072e\+15$/m);
    assert.match(run.stdout, /^negz: +0\.0$/m);
    assert.match(run.stdout, /"tokens": 9223372036854775807,\n +"huge": "1180591620717411303424"/);
  });

  it("TensorBoard 2.21 reads the scalars as float32 (−0 as 0.0) and the histograms as rankscope's buckets", () => {
    const tb = python("tensorboard", join(run.runDir, "tensorboard"));
    const scalar = (tag: string): Typed => tb.scalars[tag]?.[0]?.[1];
    assert.deepEqual(scalar("negz"), ["float", "0.0"]);
    assert.deepEqual(scalar("big63"), ["float", "9.223372036854776e+18"], "2^63 is a float32 too");
    assert.deepEqual(scalar("nan"), ["float", "nan"]);
    assert.equal(tb.scalars["w__count"], undefined, "internal keys stay out");
    assert.equal(tb.histograms["h"]?.length, 2);
  });

  it(`W&B: the SDK (${kit.version ?? "not installed"}) reads the offline run — floats from 2^53 up, the config's bigints exact, histograms with TensorBoard's bins, and the last one in the summary`, () => {
    const dirs = readdirSync(join(run.runDir, "wandb")).filter((d) => d.startsWith("offline-run-"));
    assert.equal(dirs.length, 1);
    const offline = join(run.runDir, "wandb", dirs[0] as string);
    const file = readdirSync(offline).find((f) => f.endsWith(".wandb"));
    const read = python("wandb", join(offline, file as string));
    const history = read.history as Record<string, [string, Json]>[];
    assert.equal(history.length, 2);
    const first = history[0] as Record<string, [string, Json]>;
    for (const [key, typed] of Object.entries(EXPECTED))
      assert.deepEqual(first[key]?.[1], typed, `history ${key}: ${first[key]?.[0]}`);
    assert.equal(
      first["big63"]?.[0],
      "9.223372036854776e+18",
      "value_json: exponent form, no integer literal beyond int64",
    );
    assert.deepEqual(first["nan"]?.[1], ["float", "nan"]);
    assert.equal(first["w__count"], undefined, "internal keys are not charted");
    assert.equal(history[1]?.["w__count"], undefined, "internal keys are not charted");
    assert.deepEqual(read.config["big"]?.[1], ["int", "9223372036854775807"], `config big: ${read.config["big"]?.[0]}`);
    assert.equal(read.config["huge"]?.[1], "1180591620717411303424");
    // The histograms, against TensorBoard's reading of the same buckets.
    const tb = python("tensorboard", join(run.runDir, "tensorboard"));
    for (const [i, row] of history.entries()) {
      const h = row["h"]?.[1];
      assert.equal(h?._type, "histogram");
      const values = (h.values as Typed[]).map((v) => Number(v[1]));
      const bins = (h.bins as Typed[]).map((v) => Number(v[1]));
      const buckets = (tb.histograms["h"][i][1] as Typed[][]).map((b) => b.map((x) => Number(x[1])));
      assert.equal(
        values.reduce((a, b) => a + b, 0),
        (i === 0 ? H1 : H2).length,
        "every value in a bin",
      );
      assert.deepEqual(
        values,
        buckets.map((b) => b[2]),
        `step ${i + 1}: W&B's counts are TensorBoard's, empty bins included`,
      );
      assert.equal(bins.length, values.length + 1);
      for (let j = 0; j < values.length; j++) {
        assert.ok(
          (bins[j] as number) < (bins[j + 1] as number),
          `step ${i + 1}: bin ${j} [${bins[j]}, ${bins[j + 1]}] has a width`,
        );
        // W&B's edges between bins are TensorBoard's limits one double up ([left, right) for (left, right]): the same float32.
        assert.equal(
          Math.fround(bins[j + 1] as number),
          buckets[j]?.[1],
          `step ${i + 1}: bin ${j}'s right edge is TensorBoard's (float32)`,
        );
      }
      assert.equal(Math.fround(bins[0] as number), buckets[0]?.[0], `step ${i + 1}: both start at the min`);
    }
    const first0 = (history[0]?.["h"]?.[1].bins as Typed[]).map((v) => Number(v[1]));
    assert.deepEqual(
      first0.slice(0, 4),
      [-5, first0[1], nextUp(-1e-12), nextUp(0)],
      "the 0 in [−1e-12, 5e-324), a bin that holds 0 as W&B and numpy read it; not drawn across [−4.6, 0]",
    );
    assertNumpyReadsTheCounts((key, step) => {
      const h = history[step]?.[key]?.[1];
      assert.equal(h?._type, "histogram", `${key}@${step + 1} in the SDK's reading`);
      return {
        values: (h.values as Typed[]).map((v) => Number(v[1])),
        bins: (h.bins as Typed[]).map((v) => Number(v[1])),
      };
    });
    const zeros = history[0]?.["h_zeros"]?.[1];
    assert.deepEqual(
      (zeros.bins as Typed[]).map((v) => Number(v[1])),
      [0, 1e-12],
      "all zeros: one bin from 0, not one that ends at 0",
    );
    const summary = read.summary["h"]?.[1];
    assert.equal(summary?._type, "histogram", "the summary holds the latest histogram, as the SDK's does");
    assert.deepEqual(summary.values, history[1]?.["h"]?.[1].values);
  });

  it(
    `W&B: the official \`wandb sync\` (${kit.version ?? "not installed"}) delivers the same values to the strict local server`,
    { timeout: 180_000 },
    async () => {
      const key = "0123456789abcdef0123456789abcdef01234567";
      const server = new StrictWandbServer(key, "team");
      await server.start();
      const home = tempDir("rankscope-wandb-home-");
      scratch.push(home);
      try {
        const env = wandbSdkEnv(home, server.baseUrl, key);
        const dirs = readdirSync(join(run.runDir, "wandb"))
          .filter((d) => d.startsWith("offline-run-"))
          .map((d) => join(run.runDir, "wandb", d));
        await promisify(execFile)(join(dirname(kit.python as string), "wandb"), ["sync", ...dirs], {
          env,
          timeout: 120_000,
        });
        assert.deepEqual(server.violations, []);
        const rows = server.history("values_t1");
        assert.equal(rows.length, 2);
        const first = rows[0] as Record<string, unknown>;
        assert.ok(Object.is(first["negz"], 0) && Object.is(first["negz_mean"], 0), "−0 arrives as 0");
        assert.equal(first["big63"], 2 ** 63);
        assert.equal(first["f60"], 2 ** 60);
        assert.ok(Number.isNaN(first["nan"]));
        assert.equal(first["pinf"], Infinity);
        const lines = [...(server.run("values_t1")?.history.values() ?? [])].flat();
        assert.ok(
          lines.length === 2 && !lines.some((l) => /[:,[]-?\d{20,}[,}\]]/.test(l)),
          `no integer literal beyond int64 in what wandb-core sent: ${lines.join("\n")}`,
        );
        const summary = server.run("values_t1")?.summary["h"] as
          { _type: string; values: number[]; bins: number[] } | undefined;
        assert.equal(summary?._type, "histogram");
        assert.deepEqual(summary?.values, (rows[1]?.["h"] as { values: number[] }).values);
        assert.equal(summary?.bins.length, (summary?.values.length ?? 0) + 1);
        // What wandb-core sent is what the user gets: numpy reads the recorded values into its bins with its counts.
        assertNumpyReadsTheCounts((key, step) => {
          const h = rows[step]?.[key] as { _type: string; values: number[]; bins: number[] } | undefined;
          assert.equal(h?._type, "histogram", `${key}@${step + 1} on the server`);
          return { values: h.values, bins: h.bins };
        });
      } finally {
        await server.stop();
      }
    },
  );

  it(
    "a bigint in a rank's sample record crosses the transport exactly (child processes, JSON messages)",
    { timeout: 120_000 },
    async () => {
      resetProcess();
      const runDir = tempDir("rankscope-values-ranks-");
      scratch.push(runDir);
      const logger = new MetricLogger({ runDir, experiment: "values", trial: "ranks", quiet: true });
      const ranks = await spawnRanks({
        module: new URL("../fixtures/sum-rank.ts", import.meta.url),
        ranksPerReplica: 2,
        kind: "process",
        processName: "Big",
        logger,
      });
      try {
        await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
        await ranks.fanout("record", "episode", { reward: 1, tokens: BIG63, huge: HUGE }, "sample");
        await ranks.fanout("record", "tokens_total", BIG63, "max");
        const flushed = await logger.flush(1);
        assert.equal(flushed.ranksReporting, 2, "both ranks answered");
      } finally {
        await logger.shutdown();
      }
      const lines = python("jsonl", join(runDir, "metrics.jsonl")) as Json[];
      const samples = lines.find((l) => l.key === "episode")?.samples as Json[];
      assert.equal(samples.length, 2);
      for (const sample of samples)
        assert.deepEqual(
          { tokens: sample.tokens, huge: sample.huge },
          { tokens: ["int", "9223372036854775807"], huge: "1180591620717411303424" },
        );
      assert.deepEqual(lines.find((l) => l.key === "tokens_total")?.value, ["float", "9.223372036854776e+18"]);
    },
  );
});
