/**
 * The prometheus backends against a real Prometheus (Debian's binary): it scrapes our `/metrics`
 * and receives our remote writes; every value is read back through its HTTP API (PromQL) and
 * compared exactly with what rankscope logged — NaN and ±Infinity, counters, histogram buckets,
 * summary quantiles, rank labels.
 */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { after, before, describe, it } from "node:test";
import { registerBackend } from "../../../src/backends/backend.js";
import { metricsHandler, prometheusName } from "../../../src/backends/prometheus/index.js";
import { Exposition, type Sample } from "../../../src/backends/prometheus/exposition.js";
import { RemoteWriter } from "../../../src/backends/prometheus/remote-write.js";
import { renderMetrics } from "../../../src/backends/prometheus/render.js";
import { writeRequestType } from "../../../src/backends/prometheus/remote-write.js";
import { uncompress } from "snappyjs";
import {
  GENAI_INSTRUMENTS,
  getOrCreateMetricLogger,
  recordMetric,
  Reduce,
  spawnRanks,
  startRequest,
} from "../../../src/index.js";
import type { HistogramMetric, Metric } from "../../../src/core/metric.js";
import { diagnosticCounts } from "../../../src/core/diagnostics.js";
import { collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { freePort, freePortRun } from "../../transport/support.js";
import { PrometheusServer, prometheusMissing, promValue, type PromSeries } from "./prometheus-server.js";

/** What rankscope logged, to compare with what Prometheus has. */
const logged: { metrics: Metric[]; histograms: HistogramMetric[] } = { metrics: [], histograms: [] };
registerBackend("openstd_capture", () => ({
  logBatch: (metrics) => void logged.metrics.push(...metrics),
  logHistograms: (histograms) => void logged.histograms.push(...histograms),
}));

const missing = prometheusMissing();
if (missing !== undefined) process.stderr.write(`SKIP prometheus tests: ${missing}\n`);

function record(step: number): void {
  recordMetric("train/loss", 2 - step / 4, Reduce.MEAN);
  recordMetric("train/loss", 1 + step, Reduce.MEAN);
  recordMetric("eval/acc@1", 0.1 * step, Reduce.MAX);
  recordMetric("weird_key.nan", NaN, Reduce.MEAN);
  recordMetric("grad/norm_max", step === 1 ? Infinity : -Infinity, Reduce.MAX);
  recordMetric("tokens", 100 * step, Reduce.SUM);
  recordMetric("tokens", 7, Reduce.SUM);
  for (const v of [0.001 * step, 0.25, 3, 3.5, 1e6, NaN, -2]) recordMetric("latency", v, Reduce.HISTOGRAM);
  for (let i = 1; i <= 100; i++) recordMetric("ttft", i * step, Reduce.quantiles([0.5, 0.95]));
}

/**
 * The names a Prometheus user finds for the gauges `record` logs: OpenTelemetry's Prometheus
 * mapping (docs/prometheus.md), spelled out rather than computed by the code under test.
 */
const GAUGE_NAMES: Readonly<Record<string, string>> = {
  "train/loss": "train_loss",
  "eval/acc@1": "eval_acc_1",
  "weird_key.nan": "weird_key_nan",
  "grad/norm_max": "grad_norm_max",
  "latency/min": "latency_min",
  "latency/max": "latency_max",
};

/** A bucket's `le` label as a number (`+Inf` is Infinity). */
const leNumber = (le: string): number => (le === "+Inf" ? Infinity : Number(le));

function single(series: PromSeries[], what: string): number {
  assert.equal(series.length, 1, `${what}: one series, got ${JSON.stringify(series)}`);
  return promValue(series[0]!.value![1]);
}

function sameNumber(actual: number, expected: number, what: string): void {
  assert.ok(Object.is(actual, expected), `${what}: Prometheus has ${actual}, rankscope logged ${expected}`);
}

/** Every value of the last flush (and the running totals) as Prometheus has them for `selector`. */
async function checkAll(prom: PrometheusServer, selector: string, step: number, flushes: number): Promise<void> {
  const at = async (name: string, extra = ""): Promise<PromSeries[]> =>
    prom.query(`{__name__="${name}",${selector}${extra}}`);
  // `record`'s keys (not the GenAI instruments a test may record beside them: keys with attributes).
  const last = logged.metrics.filter((m) => m.step === step && !m.key.includes("{"));
  for (const m of last) {
    if (m.reduce === "sum" || m.reduce.startsWith("quantiles")) continue;
    // The histogram's own latency_count and latency_sum carry these (checked below); no latency_mean beside them.
    if (m.key === "latency/count") continue;
    if (m.key === "latency/mean") {
      assert.deepEqual(await at("latency_mean"), [], `${m.key} is not a gauge`);
      continue;
    }
    const name = GAUGE_NAMES[m.key];
    assert.ok(name !== undefined, `a gauge name for ${m.key}`);
    sameNumber(single(await at(name), m.key), m.value, `${m.key} (gauge ${name})`);
  }
  const tokens = logged.metrics.filter((m) => m.key === "tokens").reduce((a, m) => a + m.value, 0);
  assert.equal(logged.metrics.filter((m) => m.key === "tokens").length, flushes);
  sameNumber(
    single(await at("tokens_total"), "tokens_total"),
    tokens,
    "tokens_total (counter = running total of per-flush sums)",
  );
  for (const suffix of ["p50", "p95"]) {
    const q = suffix === "p50" ? "0.5" : "0.95";
    sameNumber(
      single(await at("ttft", `,quantile="${q}"`), `ttft ${q}`),
      last.find((m) => m.key === `ttft/${suffix}`)!.value,
      `ttft quantile ${q}`,
    );
  }
  // Histogram: cumulative buckets of every flush's buckets, +Inf = count (NaN included), _sum, _count.
  const perEdge = new Map<number, number>();
  let count = 0;
  let sum = 0;
  for (const h of logged.histograms.filter((x) => x.key === "latency")) {
    h.histogram.bucketLimits.forEach((edge, i) =>
      perEdge.set(edge, (perEdge.get(edge) ?? 0) + h.histogram.bucketCounts[i]!),
    );
    count += h.histogram.count;
    sum += h.histogram.sum;
  }
  const buckets = await at("latency_bucket");
  const got = new Map(buckets.map((s) => [s.metric["le"]!, promValue(s.value![1])]));
  let cumulative = 0;
  for (const edge of [...perEdge.keys()].sort((a, b) => a - b)) {
    cumulative += perEdge.get(edge)!;
    assert.equal(got.get(String(edge)), cumulative, `latency_bucket{le="${edge}"}`);
  }
  assert.equal(got.get("+Inf"), count);
  assert.equal(got.size, perEdge.size + 1, "one series per edge that held a value, and +Inf");
  sameNumber(single(await at("latency_count"), "latency_count"), count, "latency_count");
  sameNumber(single(await at("latency_sum"), "latency_sum"), sum, "latency_sum");
}

describe("prometheus names", () => {
  it("follow OpenTelemetry's Prometheus mapping: _ for separators, no colon, unit suffixes, _total on counters", () => {
    for (const [key, reduce, name] of [
      ["train/loss", "mean", "train_loss"],
      ["tokens", "mean", "tokens"],
      ["eval/acc@1", "max", "eval_acc_1"],
      ["weird_key.nan", "mean", "weird_key_nan"],
      ["a:b", "mean", "a_b"],
      ["1st/x", "mean", "_1st_x"],
      ["w__count", "sum", "w_count_total"],
      ["ü/é", "mean", "key_fc_2f_e9"],
      ["serve/tokens", "sum", "serve_tokens_total"],
      ["requests_total", "sum", "requests_total"],
      ["ttft", "quantiles(0.5,0.95)", "ttft"],
      ["latency", "histogram", "latency"],
      ["inference/requests", "rate", "inference_requests_total"],
      ["gen_ai.server.time_to_first_token", "histogram", "gen_ai_server_time_to_first_token_seconds"],
      [
        "gen_ai.client.operation.duration{gen_ai.request.model=a}",
        Reduce.buckets(GENAI_INSTRUMENTS.clientOperationDuration.boundaries),
        "gen_ai_client_operation_duration_seconds",
      ],
      ["gen_ai.server.request.duration/p99", "mean", "gen_ai_server_request_duration_p99_seconds"],
      ["gen_ai.client.token.usage", "histogram", "gen_ai_client_token_usage"],
    ] as const) {
      assert.equal(prometheusName(key, reduce), name, `${key} (${reduce})`);
      assert.match(name, /^[a-zA-Z_][a-zA-Z0-9_]*$/, "no colon: Prometheus keeps it for recording rules");
    }
  });
});

describe("prometheus text formats and options", () => {
  it("renders NaN/±Inf as NaN, +Inf, -Inf in both formats; OpenMetrics names counters without _total", async () => {
    const exposition = new Exposition({ rank: "1" });
    exposition.addMetrics([
      { key: "a/nan", value: NaN, reduce: "mean", step: 1, timestamp: 1 },
      { key: "a/pos", value: Infinity, reduce: "max", step: 1, timestamp: 1 },
      { key: "a/neg", value: -Infinity, reduce: "min", step: 1, timestamp: 1 },
      { key: "tokens", value: 3, reduce: "sum", step: 1, timestamp: 1 },
      { key: "gen_ai.server.request.duration/p99", value: 0.5, reduce: "buckets(1,2)", step: 1, timestamp: 1 },
    ]);
    const text = await renderMetrics([exposition]);
    assert.match(text, /^a_nan\{rank="1"\} NaN$/m);
    assert.match(text, /^a_pos\{rank="1"\} \+Inf$/m);
    assert.match(text, /^a_neg\{rank="1"\} -Inf$/m);
    assert.match(text, /^# TYPE tokens_total counter$/m);
    assert.match(text, /^tokens_total\{rank="1"\} 3$/m);
    assert.match(text, /^# HELP a_nan rankscope key "a\/nan" \(mean\)$/m);
    assert.match(text, /^gen_ai_server_request_duration_p99_seconds\{rank="1"\} 0\.5$/m);
    assert.doesNotMatch(text, /^# UNIT/m, "the 0.0.4 text format has no unit line");
    const open = await renderMetrics([exposition], true);
    assert.match(open, /^# TYPE tokens counter$/m);
    assert.match(open, /^tokens_total\{rank="1"\} 3$/m);
    assert.match(open, /^a_nan\{rank="1"\} NaN$/m);
    assert.match(
      open,
      /^# TYPE gen_ai_server_request_duration_p99_seconds gauge\n# UNIT gen_ai_server_request_duration_p99_seconds seconds$/m,
      "OpenMetrics' UNIT, a suffix of the family's name",
    );
    assert.ok(open.endsWith("# EOF\n"));
  });

  it("serve: false leaves /metrics to a handler the user mounts", async () => {
    const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
    await logger.initBackends({
      prometheus: { loggingMode: "global_reduce", serve: false, labels: { job_kind: "rollout" } },
    });
    const server = createServer(metricsHandler());
    try {
      recordMetric("served/value", 42, Reduce.MEAN);
      await logger.flush(1);
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const { port } = server.address() as AddressInfo;
      const response = await fetch(`http://127.0.0.1:${port}/anything`);
      assert.equal(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
      assert.match(await response.text(), /^served_value\{job_kind="rollout"\} 42$/m);
    } finally {
      server.close();
      await logger.shutdown();
    }
  });

  it("counts a name clash at each flush that leaves a key out, scalar and histogram alike", async () => {
    const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
    await logger.initBackends({ prometheus: { loggingMode: "global_reduce", serve: false } });
    const flushes = 3;
    const before = diagnosticCounts();
    try {
      for (let step = 1; step <= flushes; step++) {
        recordMetric("tokens", 5, Reduce.SUM); // writes tokens_total first
        recordMetric("tokens_total", 1, Reduce.MEAN); // a gauge tokens_total: a clash
        recordMetric("lat_count", 2, Reduce.MEAN); // a gauge lat_count first (scalars come first)
        recordMetric("lat", 0.5, Reduce.HISTOGRAM); // the histogram lat would write lat_count: a clash
        recordMetric("train/loss", 1, Reduce.MEAN); // train_loss first (keys in a flush come in key order)
        recordMetric("train_loss", 2, Reduce.MEAN); // also train_loss under the mapping: a clash
        await logger.flush(step);
      }
    } finally {
      await logger.shutdown();
    }
    const after = diagnosticCounts();
    const increase = (code: string): number => (after[code] ?? 0) - (before[code] ?? 0);
    assert.equal(increase("prometheus.nameClash:tokens_total"), flushes, "the scalar key, once per flush");
    assert.equal(increase("prometheus.nameClash:lat_count"), flushes, "the histogram key, once per flush");
    assert.equal(increase("prometheus.nameClash:train_loss"), flushes, "two keys the mapping names alike");
  });

  it("rejects bad options with what is valid", async () => {
    const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
    await assert.rejects(
      logger.initBackends({ prometheus: { loggingMode: "global_reduce", port: 70000 } }),
      /port must be 0-65535/,
    );
    await assert.rejects(
      logger.initBackends({ prometheus: { loggingMode: "global_reduce", labels: { rank: "x" } } }),
      /label "rank" is set by rankscope/,
    );
    await assert.rejects(
      logger.initBackends({ prometheus_remote_write: { loggingMode: "global_reduce" } as never }),
      /url must be the receiver's http\(s\) URL/,
    );
    await assert.rejects(
      logger.initBackends({ prometheus: { loggingMode: "per_rank_no_reduce" } }),
      /exports reduced values: use loggingMode "global_reduce" or "per_rank_reduce"/,
    );
    await assert.rejects(
      logger.initBackends({ otlp: { loggingMode: "per_rank_no_reduce" } }),
      /backend "otlp" exports reduced values/,
    );
    await assert.rejects(
      logger.initBackends({ otlp: { loggingMode: "global_reduce", temporality: "sometimes" as never } }),
      /temporality must be "cumulative" or "delta"/,
    );
    await logger.shutdown();
  });
});

describe("remote write sender", () => {
  it(
    "sends snappy-compressed WriteRequests with the protocol headers, retries a 503, counts",
    { timeout: 30_000 },
    async () => {
      const seen: { headers: Record<string, string | string[] | undefined>; body: Buffer }[] = [];
      const server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          seen.push({ headers: req.headers, body: Buffer.concat(chunks) });
          res.writeHead(seen.length === 1 ? 503 : 204).end();
        });
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      try {
        const { port } = server.address() as AddressInfo;
        const writer = new RemoteWriter({
          url: `http://127.0.0.1:${port}/write`,
          headers: {},
          timeoutMs: 2000,
          retryBudgetMs: 5000,
          maxQueuedSamples: 10,
          maxSamplesPerSend: 10,
          name: "rw_test",
        });
        const samples: Sample[] = [
          { labels: { __name__: "b", rank: "1" }, value: NaN, timestamp: 1_700_000_000_001 },
          { labels: { rank: "1", __name__: "b" }, value: -Infinity, timestamp: 1_700_000_000_000 },
          { labels: { __name__: "a" }, value: 2.5, timestamp: 1_700_000_000_000 },
        ];
        writer.push(samples);
        await writer.drain(10_000);
        assert.deepEqual(writer.stats, {
          sentSamples: 3,
          requests: 1,
          failedRequests: 0,
          retries: 1,
          droppedSamples: 0,
          lostSamples: 0,
        });
        assert.equal(seen.length, 2, "the 503 was retried");
        const last = seen[1]!;
        assert.equal(last.headers["content-encoding"], "snappy");
        assert.equal(last.headers["content-type"], "application/x-protobuf");
        assert.equal(last.headers["x-prometheus-remote-write-version"], "0.1.0");
        const decoded = writeRequestType().toObject(writeRequestType().decode(uncompress(new Uint8Array(last.body))), {
          longs: Number,
        }) as {
          timeseries: { labels: { name: string; value: string }[]; samples: { value: number; timestamp: number }[] }[];
        };
        assert.deepEqual(
          decoded.timeseries.map((t) => t.labels),
          [
            [
              { name: "__name__", value: "b" },
              { name: "rank", value: "1" },
            ],
            [{ name: "__name__", value: "a" }],
          ],
          "one series per label set, labels sorted by name",
        );
        assert.deepEqual(
          decoded.timeseries[0]!.samples.map((x) => x.timestamp),
          [1_700_000_000_000, 1_700_000_000_001],
          "samples by time",
        );
        assert.ok(
          Object.is(decoded.timeseries[0]!.samples[0]!.value, -Infinity) &&
            Number.isNaN(decoded.timeseries[0]!.samples[1]!.value),
        );
        // A full queue drops the oldest samples, counted.
        const seenDrops = await collectDiagnostics(() =>
          writer.push(
            Array.from({ length: 15 }, (_, i) => ({
              labels: { __name__: "c" },
              value: i,
              timestamp: 1_700_000_000_100 + i,
            })),
          ),
        );
        await writer.drain(10_000);
        assert.equal(writer.stats.droppedSamples, 5);
        assert.ok(seenDrops.some((d) => d.code === "rw_test.queueFull"));
      } finally {
        server.close();
      }
    },
  );
});

describe("prometheus backend against a real Prometheus", { skip: missing }, () => {
  let prom: PrometheusServer;
  let globalPort: number;
  let rankPort: number;
  before(async () => {
    globalPort = await freePort();
    rankPort = await freePort();
    prom = await PrometheusServer.start({ global: `127.0.0.1:${globalPort}`, ranks: `127.0.0.1:${rankPort}` });
  });
  after(async () => {
    await prom?.stop();
  });

  it(
    "scrapes /metrics: gauges, NaN/±Inf, counters, histograms, summaries, rank labels, under OpenTelemetry's Prometheus names",
    { timeout: 120_000 },
    async () => {
      logged.metrics.length = 0;
      logged.histograms.length = 0;
      const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
      await logger.initBackends({
        prometheus: { loggingMode: "global_reduce", port: globalPort },
        ranks: { type: "prometheus", loggingMode: "per_rank_reduce", port: rankPort },
        openstd_capture: { loggingMode: "global_reduce" },
      });
      try {
        for (const step of [1, 2]) {
          record(step);
          for (const model of ["small", "large"]) {
            const request = startRequest({ model, provider: "sim" });
            request.firstToken();
            request.token(3);
            request.end({ inputTokens: 10 });
          }
          await logger.flush(step);
          const total = logged.metrics.filter((m) => m.key === "tokens").reduce((a, m) => a + m.value, 0);
          await waitFor(async () => (await prom.query(`tokens_total{job="global"} == ${total}`)).length === 1, {
            timeoutMs: 30_000,
            what: `Prometheus to scrape step ${step}`,
          }).catch(async (error: unknown) => {
            throw new Error(
              `${String(error)}; targets: ${await prom.targets()}; tokens: ${JSON.stringify(await prom.query("tokens_total"))}; names: ${JSON.stringify(await prom.query(`count by (__name__)({job=~".+"})`))}`,
            );
          });
          await waitFor(async () => (await prom.query(`tokens_total{job="ranks"} == ${total}`)).length === 1, {
            timeoutMs: 30_000,
            what: `Prometheus to scrape the rank's step ${step}`,
          });
          await checkAll(prom, `job="global"`, step, step);
          // The controller's own per-rank values: rank="controller", never rank="0".
          await checkAll(prom, `job="ranks",rank="controller",host="${hostname()}"`, step, step);
        }
        const global = await prom.query(`{__name__="train_loss",job="global"}`);
        assert.deepEqual(
          Object.keys(global[0]!.metric).sort(),
          ["__name__", "instance", "job"],
          "global_reduce: no rank labels",
        );
        const rank = await prom.query(`{__name__="train_loss",job="ranks"}`);
        assert.equal(rank[0]!.metric["rank_name"], "Controller");
        const metadata = (await (await fetch(`${prom.url}/api/v1/metadata?metric=ttft`)).json()) as {
          data: Record<string, { type: string; help: string }[]>;
        };
        assert.deepEqual(metadata.data["ttft"]?.[0], {
          type: "summary",
          help: 'rankscope key "ttft" (quantiles(0.5,0.95))',
          unit: "",
        });
        // Every name Prometheus holds from us follows the mapping: no `:` (recording rules' own).
        const names = (await prom.query(`count by (__name__) ({job="global"})`)).map((s) => s.metric["__name__"]!);
        assert.deepEqual(
          names.filter((name) => !/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name)),
          [],
          `names: ${names.join(" ")}`,
        );
        for (const name of ["train_loss", "tokens_total", "latency_bucket", "inference_requests_total"])
          assert.ok(names.includes(name), `${name} in ${names.join(" ")}`);
        // The GenAI instruments: their unit as a suffix and as OpenMetrics UNIT metadata, a
        // counter's _total, the key in HELP, per model.
        const ttftName = "gen_ai_server_time_to_first_token_seconds";
        const counts = await prom.query(`${ttftName}_count{job="global"}`);
        assert.deepEqual(counts.map((c) => [c.metric["gen_ai_request_model"], promValue(c.value![1])]).sort(), [
          ["large", 2],
          ["small", 2],
        ]);
        const requests = await prom.query(`inference_requests_total{job="global"}`);
        assert.deepEqual(requests.map((r) => [r.metric["gen_ai_request_model"], promValue(r.value![1])]).sort(), [
          ["large", 2],
          ["small", 2],
        ]);
        const all = (await (await fetch(`${prom.url}/api/v1/metadata`)).json()) as {
          data: Record<string, { type: string; help: string; unit: string }[]>;
        };
        assert.deepEqual(all.data[ttftName]?.[0], {
          type: "histogram",
          help: 'rankscope key "gen_ai.server.time_to_first_token" (histogram): Time to generate first token for successful responses.',
          unit: "seconds",
        });
        assert.equal(all.data["gen_ai_server_time_to_first_token_p99_seconds"]?.[0]?.unit, "seconds");
        assert.equal(
          all.data["inference_requests"]?.[0]?.type,
          "counter",
          "OpenMetrics' counter family, without _total",
        );
      } finally {
        await logger.shutdown();
      }
    },
  );

  it(
    "per-rank child processes each serve /metrics on port + 1 + rank, labelled with their rank",
    { timeout: 120_000 },
    async () => {
      const base = await freePortRun(3);
      const rankProm = await PrometheusServer.start({ r0: `127.0.0.1:${base + 1}`, r1: `127.0.0.1:${base + 2}` });
      const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
      try {
        await logger.initBackends({ prometheus: { loggingMode: "per_rank_reduce", port: base } });
        const ranks = await spawnRanks({
          module: new URL("../../fixtures/sum-rank.ts", import.meta.url),
          ranksPerReplica: 2,
          kind: "process",
          processName: "Server",
          logger,
        });
        await ranks.fanout("record", "served/requests", 5, "sum");
        await ranks.fanout("myFn");
        await logger.flush(1);
        await waitFor(async () => (await rankProm.query("served_requests_total")).length === 2, {
          timeoutMs: 30_000,
          what: "both ranks scraped",
        }).catch(async (error: unknown) => {
          throw new Error(`${String(error)}; targets: ${await rankProm.targets()}`);
        });
        const series = await rankProm.query("my_sum_rank_metric_total");
        const byRank = new Map(series.map((s) => [s.metric["rank"], s]));
        for (const rank of ["0", "1"]) {
          const s = byRank.get(rank)!;
          assert.equal(s.metric["job"], `r${rank}`, `rank ${rank} listens on port ${base} + 1 + ${rank}`);
          assert.equal(s.metric["host"], hostname());
          assert.equal(s.metric["rank_name"], ranks.rankNames[Number(rank)]);
          assert.equal(promValue(s.value![1]), Number(rank), "each rank's own SUM of its local rank");
        }
      } finally {
        await logger.shutdown();
        await rankProm.stop();
      }
    },
  );

  it(
    "remote write: every flush's samples at the flush's time, read back with PromQL",
    { timeout: 60_000 },
    async () => {
      logged.metrics.length = 0;
      logged.histograms.length = 0;
      const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
      await logger.initBackends({
        prometheus_remote_write: {
          loggingMode: "global_reduce",
          url: `${prom.url}/api/v1/write`,
          labels: { run: "rw" },
        },
        openstd_capture: { loggingMode: "global_reduce" },
      });
      for (const step of [1, 2, 3]) {
        record(step);
        await logger.flush(step);
      }
      await logger.shutdown();
      // Times: each flush's, lifted by 1 ms where two flushes shared a millisecond.
      const times: number[] = [];
      for (const step of [1, 2, 3]) {
        const t = logged.metrics.find((m) => m.step === step)!.timestamp;
        times.push(Math.max(t, (times.at(-1) ?? 0) + 1));
      }
      const evalTime = times.at(-1)! / 1000 + 1;
      const range = async (name: string): Promise<[number, number][]> => {
        const result = await prom.query(`{__name__="${name}",run="rw"}[10m]`, evalTime);
        assert.equal(result.length, 1, `${name}: one series`);
        return result[0]!.values!.map(([t, v]) => [Math.round(t * 1000), promValue(v)]);
      };
      for (const key of ["train/loss", "eval/acc@1", "weird_key.nan", "grad/norm_max", "latency/min"]) {
        const expected = logged.metrics.filter((m) => m.key === key).map((m, i) => [times[i]!, m.value]);
        const got = await range(GAUGE_NAMES[key]!);
        assert.equal(got.length, 3, key);
        got.forEach(([t, v], i) => {
          assert.equal(t, expected[i]![0], `${key} time of flush ${i + 1}`);
          sameNumber(v, expected[i]![1] as number, `${key} at flush ${i + 1}`);
        });
      }
      let total = 0;
      const tokens = await range("tokens_total");
      logged.metrics
        .filter((m) => m.key === "tokens")
        .forEach((m, i) => {
          total += m.value;
          sameNumber(tokens[i]![1], total, `tokens_total after flush ${i + 1}`);
        });
      // query_range evaluated at each flush's time: the counter as it stood then.
      total = 0;
      for (const [i, m] of logged.metrics.filter((x) => x.key === "tokens").entries()) {
        total += m.value;
        const [series] = await prom.queryRange(`tokens_total{run="rw"}`, times[i]! / 1000, times[i]! / 1000, 1);
        sameNumber(promValue(series!.values![0]![1]), total, `query_range tokens_total at flush ${i + 1}`);
      }
      // The last flush's values through instant queries (now is within the 5-minute lookback).
      await checkAll(prom, `run="rw"`, 3, 3);
    },
  );

  it(
    "attributes become labels: the GenAI instruments' histograms per model, at the conventions' buckets, read back with PromQL",
    { timeout: 60_000 },
    async () => {
      logged.metrics.length = 0;
      const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
      await logger.initBackends({
        prometheus_remote_write: {
          loggingMode: "global_reduce",
          url: `${prom.url}/api/v1/write`,
          labels: { run: "genai" },
        },
        openstd_capture: { loggingMode: "global_reduce" },
      });
      for (const [model, n] of [
        ["small", 3],
        ["large", 2],
      ] as const) {
        for (let i = 0; i < n; i++) {
          const request = startRequest({ model, provider: "sim" });
          request.firstToken();
          request.token(4);
          request.end({ inputTokens: 10 });
        }
      }
      await logger.flush(1);
      await logger.shutdown();
      const evalTime = logged.metrics[0]!.timestamp / 1000 + 1;
      const ttft = GENAI_INSTRUMENTS.serverTimeToFirstToken;
      const name = "gen_ai_server_time_to_first_token_seconds";
      const counts = await prom.query(`{__name__="${name}_count",run="genai"}`, evalTime);
      assert.deepEqual(
        counts
          .map((c) => [
            c.metric["gen_ai_request_model"],
            c.metric["gen_ai_operation_name"],
            c.metric["gen_ai_provider_name"],
            promValue(c.value![1]),
          ])
          .sort(),
        [
          ["large", "chat", "sim", 2],
          ["small", "chat", "sim", 3],
        ],
      );
      const buckets = await prom.query(
        `{__name__="${name}_bucket",run="genai",gen_ai_request_model="small"}`,
        evalTime,
      );
      assert.deepEqual(
        buckets.map((b) => b.metric["le"] ?? "").sort((a, b) => leNumber(a) - leNumber(b)),
        [...ttft.boundaries.map((b) => String(Number(b))), "+Inf"],
        "the conventions' boundaries, and +Inf",
      );
      const requests = await prom.query(`{__name__="inference_requests_total",run="genai"}`, evalTime);
      assert.deepEqual(requests.map((r) => [r.metric["gen_ai_request_model"], promValue(r.value![1])]).sort(), [
        ["large", 2],
        ["small", 3],
      ]);
    },
  );

  it(
    "remote write failures are reported by name and counted, and never stall the loop",
    { timeout: 30_000 },
    async () => {
      const deadPort = await freePort();
      const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
      const before = diagnosticCounts()["prometheus_remote_write.send"] ?? 0;
      const seen = await collectDiagnostics(async () => {
        await logger.initBackends({
          prometheus_remote_write: {
            loggingMode: "global_reduce",
            url: `http://127.0.0.1:${deadPort}/api/v1/write`,
            timeoutMs: 200,
            retryBudgetMs: 300,
            finishDeadlineMs: 5000,
          },
        });
        record(1);
        await logger.flush(1);
        await logger.shutdown();
      });
      const sendFailure = seen.find((d) => d.code === "prometheus_remote_write.send");
      assert.ok(sendFailure !== undefined, `a send failure was reported: ${JSON.stringify(seen)}`);
      assert.match(sendFailure.message, /samples were not written: POST http:\/\/127\.0\.0\.1:\d+\/api\/v1\/write/);
      assert.equal((diagnosticCounts()["prometheus_remote_write.send"] ?? 0) - before, 1);
    },
  );

  it(
    "one naming rule for the scrape and remote write: a gauge lat_count beside a histogram lat is refused and counted, rankscope's own keys stay out unless internal: true, big integers in exponent form, −0 as 0",
    { timeout: 120_000 },
    async () => {
      const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
      await logger.initBackends({
        prometheus: { loggingMode: "global_reduce", port: globalPort },
        with_internal: { type: "prometheus", loggingMode: "global_reduce", port: rankPort, internal: true },
        prometheus_remote_write: {
          loggingMode: "global_reduce",
          url: `${prom.url}/api/v1/write`,
          labels: { run: "names" },
        },
      });
      let text = "";
      let internalSeries = -1;
      const seen = await collectDiagnostics(async () => {
        try {
          // Step 1: the gauge lat_count and the histogram lat are new together: the flush's scalars come first, so the gauge keeps the name.
          recordMetric("lat_count", 42, Reduce.MEAN);
          for (const v of [1, 2, 3]) recordMetric("lat", v, Reduce.HISTOGRAM);
          // The histogram size is first; a gauge size_sum arrives a flush later and is refused.
          recordMetric("size", 5, Reduce.HISTOGRAM);
          recordMetric("w__count", 3, Reduce.SUM);
          recordMetric("rankscope/own_note", 1, Reduce.MAX);
          recordMetric("big", 2n ** 63n - 1n, Reduce.MAX);
          recordMetric("negz", -0, Reduce.MAX);
          recordMetric("negz_mean", -0, Reduce.MEAN);
          await logger.flush(1);
          recordMetric("size_sum", 7, Reduce.MEAN);
          recordMetric("lat_count", 42, Reduce.MEAN);
          recordMetric("size", 5, Reduce.HISTOGRAM);
          // Again at step 2: the scrape the test waits for may be the first after step 2 (a gauge shows its latest flush's value).
          recordMetric("w__count", 3, Reduce.SUM);
          recordMetric("rankscope/own_note", 1, Reduce.MAX);
          await logger.flush(2);
          text = await (await fetch(`http://127.0.0.1:${globalPort}/metrics`)).text();
          await waitFor(
            async () =>
              (await prom.query(`size_count{job=~"global|ranks"} == 2`)).length === 2 &&
              (await prom.query(`size_count{run="names"} == 2`)).length === 1,
            {
              timeoutMs: 30_000,
              what: "Prometheus to scrape step 2 from both backends and receive its remote write",
            },
          );
          // Read while the backends still serve: once they stop, Prometheus's next scrape of them
          // fails and marks their series stale (within a second; a loaded machine's later reads missed them).
          internalSeries = (await prom.query(`{__name__=~"rankscope_own_note|w_count_total",job="ranks"}`)).length;
        } finally {
          await logger.shutdown();
        }
      });
      for (const selector of [`job="global"`, `run="names"`]) {
        sameNumber(
          single(await prom.query(`lat_count{${selector}}`), `lat_count ${selector}`),
          42,
          `lat_count (${selector}) is the gauge's`,
        );
        assert.deepEqual(
          await prom.query(`{__name__=~"lat_bucket|lat_sum",${selector}}`),
          [],
          `the histogram lat is not exported (${selector})`,
        );
        assert.deepEqual(
          await prom.query(`{__name__=~"lat_mean|size_mean",${selector}}`),
          [],
          `a histogram's count and mean are not gauges (${selector})`,
        );
        sameNumber(single(await prom.query(`lat_max{${selector}}`), "lat_max"), 3, "a histogram's max is a gauge");
        sameNumber(
          single(await prom.query(`size_sum{${selector}}`), `size_sum ${selector}`),
          10,
          `size_sum is the histogram's running sum, not the gauge's 7 (${selector})`,
        );
        assert.deepEqual(
          await prom.query(`{__name__=~"rankscope_.*|w_count_total",${selector}}`),
          [],
          `no internal key (${selector})`,
        );
        sameNumber(
          single(await prom.query(`big{${selector}}`), "big"),
          2 ** 63,
          "2^63 − 1 recorded: the nearest double",
        );
        const negz = single(await prom.query(`negz{${selector}}`), "negz");
        assert.ok(Object.is(negz, 0), `−0 arrives as 0 (${selector}): ${negz}`);
        const negzMean = single(await prom.query(`negz_mean{${selector}}`), "negz_mean");
        assert.ok(Object.is(negzMean, 0), `the MEAN of −0 arrives as 0 (${selector}): ${negzMean}`);
      }
      assert.equal(internalSeries, 2, "internal: true exports them");
      assert.match(text, /^big 9\.223372036854776e\+18$/m, "exponent form, not an integer literal beyond int64");
      assert.match(text, /^negz 0$/m);
      const clashes = seen.filter((d) => d.code.startsWith("prometheus.nameClash:"));
      assert.ok(
        clashes.some(
          (d) =>
            d.code === "prometheus.nameClash:lat_count" &&
            /key "lat" \(histogram\) would write the metric name lat_count as a histogram, already written by key "lat_count" \(a gauge lat_count\)/.test(
              d.message,
            ),
        ),
        JSON.stringify(clashes),
      );
      assert.ok(
        clashes.some(
          (d) =>
            d.code === "prometheus.nameClash:size_sum" &&
            /key "size_sum" \(mean\) would write the metric name size_sum as a gauge, already written by key "size" \(a histogram size\)/.test(
              d.message,
            ),
        ),
        JSON.stringify(clashes),
      );
      assert.ok(clashes.length >= 4, "reported by both backends");
    },
  );
});
