/**
 * The `otlp` backend against a local OTLP/HTTP receiver (a node server on 127.0.0.1) that decodes
 * every request with the official OTLP protobuf definitions (test/fixtures/opentelemetry-proto,
 * loaded by protobufjs) and checks every value and attribute against what rankscope logged.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { after, before, describe, it } from "node:test";
import protobuf from "protobufjs";
import { registerBackend } from "../../../src/backends/backend.js";
import type { HistogramMetric, Metric } from "../../../src/core/metric.js";
import { GENAI_INSTRUMENTS, getOrCreateMetricLogger, recordMetric, Reduce, startRequest } from "../../../src/index.js";
import { collectDiagnostics, tempDir, waitFor } from "../../helpers.js";
import { freePort } from "../../transport/support.js";

const protoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "fixtures", "opentelemetry-proto");
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => join(protoRoot, target);
root.loadSync("opentelemetry/proto/collector/metrics/v1/metrics_service.proto", { keepCase: true });
const ExportRequest = root.lookupType("opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest");
const ExportResponse = root.lookupType("opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse");

/* Decoded OTLP, as protobufjs's toObject gives it (longs as strings, enums as names). */
type AnyValue = { string_value?: string; int_value?: string; double_value?: number; bool_value?: boolean };
type KeyValue = { key: string; value: AnyValue };
type NumberPoint = {
  attributes?: KeyValue[];
  start_time_unix_nano: string;
  time_unix_nano: string;
  as_double?: number;
};
type HistogramPoint = {
  attributes?: KeyValue[];
  start_time_unix_nano: string;
  time_unix_nano: string;
  count: string;
  sum?: number;
  bucket_counts: string[];
  explicit_bounds: number[];
  min?: number;
  max?: number;
};
type OtlpMetric = {
  name: string;
  description: string;
  unit?: string;
  gauge?: { data_points: NumberPoint[] };
  sum?: { data_points: NumberPoint[]; aggregation_temporality: string; is_monotonic?: boolean };
  histogram?: { data_points: HistogramPoint[]; aggregation_temporality: string };
};
type Request = {
  resource_metrics: {
    resource: { attributes: KeyValue[] };
    scope_metrics: { scope: { name: string; version: string }; metrics: OtlpMetric[] }[];
  }[];
};

class Receiver {
  readonly requests: Request[] = [];
  readonly contentTypes: string[] = [];
  status = 200;
  private server: Server | undefined;
  url = "";

  async start(): Promise<void> {
    const port = await freePort();
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        let body = Buffer.concat(chunks);
        if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        this.contentTypes.push(String(req.headers["content-type"]));
        if (req.url !== "/v1/metrics" || req.method !== "POST") {
          res.writeHead(404).end();
          return;
        }
        this.requests.push(
          ExportRequest.toObject(ExportRequest.decode(body), {
            longs: String,
            enums: String,
            defaults: true,
          }) as Request,
        );
        res.writeHead(this.status, { "content-type": "application/x-protobuf" });
        res.end(this.status === 200 ? ExportResponse.encode(ExportResponse.create({})).finish() : undefined);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${port}/v1/metrics`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

const logged: { metrics: Metric[]; histograms: HistogramMetric[] } = { metrics: [], histograms: [] };
registerBackend("openstd_otlp_capture", () => ({
  logBatch: (metrics) => void logged.metrics.push(...metrics),
  logHistograms: (histograms) => void logged.histograms.push(...histograms),
}));

function record(step: number): void {
  recordMetric("train/loss", 1.5 * step, Reduce.MEAN);
  recordMetric("weird.nan", NaN, Reduce.MEAN);
  recordMetric("grad/max", step === 1 ? Infinity : -Infinity, Reduce.MAX);
  recordMetric("tokens", 10 * step + 1, Reduce.SUM);
  for (const v of [0.001 * step, 0.25, 3, 1e6, NaN, -2]) recordMetric("latency", v, Reduce.HISTOGRAM);
  for (let i = 1; i <= 50; i++) recordMetric("ttft", i * step, Reduce.quantiles([0.5, 0.95]));
  // −0 (a MEAN of it) and an integer beyond 2^53: the value rules of every sink (docs/DESIGN.md).
  recordMetric("negz", -0, Reduce.MEAN);
  recordMetric("big", 2n ** 63n - 1n, Reduce.MAX);
}

const nanos = (ms: number): string => String(BigInt(Math.round(ms * 1000)) * 1000n);
const attrs = (list: KeyValue[]): Record<string, string | number> =>
  Object.fromEntries(
    list.map((kv) => [kv.key, kv.value.string_value ?? Number(kv.value.int_value ?? kv.value.double_value)]),
  );

describe("otlp backend against an OTLP/HTTP receiver", () => {
  const receiver = new Receiver();
  before(() => receiver.start());
  after(() => receiver.stop());

  for (const loggingMode of ["global_reduce", "per_rank_reduce"] as const) {
    it(
      `exports gauges, cumulative sums and histograms with resource attributes (${loggingMode})`,
      { timeout: 60_000 },
      async () => {
        receiver.requests.length = 0;
        logged.metrics.length = 0;
        logged.histograms.length = 0;
        const startMs = Date.now();
        const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
        // The capture backend in the same mode gets the same metrics (per rank: the rank's own times).
        await logger.initBackends({
          otlp: { loggingMode, url: receiver.url, serviceName: "rollout" },
          openstd_otlp_capture: { loggingMode },
        });
        for (const step of [1, 2]) {
          record(step);
          await logger.flush(step);
        }
        await logger.shutdown();
        await waitFor(() => receiver.requests.length >= 2, { timeoutMs: 10_000, what: "two OTLP exports" });
        assert.equal(receiver.requests.length, 2, "one export per flush");
        assert.ok(
          receiver.contentTypes.every((t) => t === "application/x-protobuf"),
          `content types ${receiver.contentTypes}`,
        );

        let total = 0;
        let buckets = new Map<number, number>();
        let count = 0;
        let sum = 0;
        receiver.requests.forEach((request, i) => {
          const step = i + 1;
          const [rm] = request.resource_metrics;
          const resource = attrs(rm!.resource.attributes);
          assert.equal(resource["service.name"], "rollout");
          assert.equal(resource["host.name"], hostname());
          assert.equal(resource["rankscope.run"], `${resource["rankscope.experiment"]}/${resource["rankscope.trial"]}`);
          if (loggingMode === "per_rank_reduce") {
            // The controller's own values: role controller, no rank number (never rank 0's).
            assert.equal(resource["rankscope.role"], "controller");
            assert.equal(resource["rankscope.rank"], undefined);
            assert.equal(resource["rankscope.rank_name"], "Controller");
          } else {
            assert.equal(resource["rankscope.rank"], undefined, "global_reduce: no rank attribute");
          }
          assert.equal(rm!.scope_metrics[0]!.scope.name, "rankscope");
          const metrics = new Map(rm!.scope_metrics[0]!.metrics.map((m) => [m.name, m]));
          const negz = metrics.get("negz")?.gauge?.data_points[0]?.as_double;
          assert.ok(Object.is(negz, 0), `the MEAN of −0 arrives as 0: ${negz}`);
          assert.equal(
            metrics.get("big")?.gauge?.data_points[0]?.as_double,
            2 ** 63,
            "2^63 − 1 recorded: the nearest double",
          );
          const all = logged.metrics.filter((m) => m.step === step);
          // A histogram's per-flush count and mean are in its own data point, not gauges of their own.
          const flushed = all.filter((m) => !(m.reduce === "histogram" && /\/(count|mean)$/.test(m.key)));
          assert.equal(all.length - flushed.length, 2);
          for (const m of all)
            if (!flushed.includes(m)) assert.equal(metrics.get(m.key), undefined, `${m.key} is not a gauge`);
          for (const m of flushed) {
            const got = metrics.get(m.key);
            assert.ok(got !== undefined, `${m.key} exported at step ${step}`);
            if (m.reduce === "sum") {
              total += m.value;
              assert.equal(got.sum!.aggregation_temporality, "AGGREGATION_TEMPORALITY_CUMULATIVE");
              assert.equal(got.sum!.is_monotonic, true);
              const [p] = got.sum!.data_points;
              assert.equal(p!.as_double, total, `${m.key}: running total of per-flush sums`);
              assert.equal(p!.time_unix_nano, nanos(m.timestamp));
              assert.ok(
                BigInt(p!.start_time_unix_nano) <= BigInt(nanos(logged.metrics[0]!.timestamp)) &&
                  BigInt(p!.start_time_unix_nano) >= BigInt(nanos(startMs)),
              );
            } else {
              const [p] = got.gauge!.data_points;
              assert.ok(
                Object.is(p!.as_double, m.value),
                `${m.key} at step ${step}: OTLP has ${p!.as_double}, rankscope logged ${m.value}`,
              );
              assert.equal(p!.time_unix_nano, nanos(m.timestamp));
              assert.equal(got.description, `rankscope key "${m.key}" (${m.reduce})`);
            }
          }
          const h = logged.histograms.find((x) => x.step === step)!;
          h.histogram.bucketLimits.forEach((edge, j) =>
            buckets.set(edge, (buckets.get(edge) ?? 0) + h.histogram.bucketCounts[j]!),
          );
          buckets = new Map([...buckets].sort((a, b) => a[0] - b[0]));
          count += h.histogram.count;
          sum += h.histogram.sum;
          const hp = metrics.get("latency")!.histogram!.data_points[0]!;
          assert.equal(
            metrics.get("latency")!.histogram!.aggregation_temporality,
            "AGGREGATION_TEMPORALITY_CUMULATIVE",
          );
          assert.deepEqual(hp.explicit_bounds, [...buckets.keys()]);
          const nanCount = count - [...buckets.values()].reduce((a, b) => a + b, 0);
          assert.deepEqual(
            hp.bucket_counts.map(Number),
            [...buckets.values(), nanCount],
            "bucket counts, NaN values in the overflow bucket",
          );
          assert.equal(Number(hp.count), count);
          assert.ok(Object.is(hp.sum, sum), `histogram sum ${hp.sum} vs ${sum}`);
          assert.equal(hp.min, -2);
          assert.equal(hp.max, 1e6);
          assert.equal(hp.time_unix_nano, nanos(h.timestamp));
          assert.equal(metrics.size, flushed.length + 1, "every logged key and the histogram, nothing else");
        });
      },
    );
  }

  it(
    "delta temporality: each flush's own sum and buckets, from the previous flush's time",
    { timeout: 60_000 },
    async () => {
      receiver.requests.length = 0;
      logged.metrics.length = 0;
      logged.histograms.length = 0;
      const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
      await logger.initBackends({
        otlp: { loggingMode: "global_reduce", url: receiver.url, temporality: "delta" },
        openstd_otlp_capture: { loggingMode: "global_reduce" },
      });
      for (const step of [1, 2]) {
        record(step);
        await logger.flush(step);
      }
      await logger.shutdown();
      await waitFor(() => receiver.requests.length >= 2, { timeoutMs: 10_000, what: "two OTLP exports" });
      const tokens = logged.metrics.filter((m) => m.key === "tokens");
      receiver.requests.forEach((request, i) => {
        const metrics = new Map(request.resource_metrics[0]!.scope_metrics[0]!.metrics.map((m) => [m.name, m]));
        const sumPoint = metrics.get("tokens")!.sum!;
        assert.equal(sumPoint.aggregation_temporality, "AGGREGATION_TEMPORALITY_DELTA");
        assert.equal(sumPoint.data_points[0]!.as_double, tokens[i]!.value, "the flush's own sum");
        if (i > 0)
          assert.equal(
            sumPoint.data_points[0]!.start_time_unix_nano,
            nanos(tokens[i - 1]!.timestamp),
            "starts at the previous flush",
          );
        const h = logged.histograms[i]!.histogram;
        const hp = metrics.get("latency")!.histogram!.data_points[0]!;
        assert.deepEqual(hp.explicit_bounds, [...h.bucketLimits]);
        assert.deepEqual(hp.bucket_counts.map(Number), [
          ...h.bucketCounts,
          h.count - h.bucketCounts.reduce((a, b) => a + b, 0),
        ]);
        assert.equal(Number(hp.count), h.count);
      });
    },
  );

  it(
    "a failed export is reported by name with its data point count, and never stalls the loop",
    { timeout: 30_000 },
    async () => {
      receiver.status = 400;
      try {
        const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
        const seen = await collectDiagnostics(async () => {
          await logger.initBackends({ otlp: { loggingMode: "global_reduce", url: receiver.url, timeoutMs: 2000 } });
          record(1);
          await logger.flush(1);
          await logger.shutdown();
        });
        const failure = seen.find((d) => d.code === "otlp.export");
        assert.ok(failure !== undefined, `reported: ${JSON.stringify(seen.map((d) => d.code))}`);
        assert.match(failure.message, /an export of \d+ data points failed/);
      } finally {
        receiver.status = 200;
      }
    },
  );

  it("a receiver that is not there: the export's deadline passes, reported", { timeout: 30_000 }, async () => {
    const dead = await freePort();
    const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
    const seen = await collectDiagnostics(async () => {
      await logger.initBackends({
        otlp: { loggingMode: "global_reduce", url: `http://127.0.0.1:${dead}/v1/metrics`, timeoutMs: 500 },
      });
      record(1);
      await logger.flush(1);
      await logger.shutdown();
    });
    assert.ok(
      seen.some((d) => d.code === "otlp.export"),
      `reported: ${JSON.stringify(seen.map((d) => d.code))}`,
    );
  });

  it(
    "instrument names follow OpenTelemetry's syntax (ASCII, a leading letter, [A-Za-z0-9_./-], ≤ 255), case-insensitive clashes are refused and counted, internal keys only with internal: true",
    { timeout: 60_000 },
    async () => {
      const long = `k/${"x".repeat(300)}`;
      const expected: Record<string, string> = {
        "train/loss": "train/loss",
        "1st/loss": "k_1st/loss",
        "eval/acc@1": "eval/acc_40_1",
        "ü/é": "k__fc_/_e9_",
        "rate 50%": "rate_20_50_25_",
        Loss: "Loss",
      };
      for (const internal of [false, true]) {
        receiver.requests.length = 0;
        const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
        await logger.initBackends({
          otlp: { loggingMode: "global_reduce", url: receiver.url, ...(internal ? { internal } : {}) },
        });
        const seen = await collectDiagnostics(async () => {
          for (const key of [...Object.keys(expected), long]) recordMetric(key, 1, Reduce.MEAN);
          recordMetric("loss", 2, Reduce.MEAN); // "Loss" has the instrument name already (names are case-insensitive)
          recordMetric("reward__count", 8, Reduce.SUM);
          recordMetric("rankscope/own_note", 3, Reduce.MAX);
          await logger.flush(1);
          await logger.shutdown();
        });
        await waitFor(() => receiver.requests.length >= 1, { timeoutMs: 10_000, what: "the OTLP export" });
        const metrics = receiver.requests[0]!.resource_metrics[0]!.scope_metrics[0]!.metrics;
        const byKey = new Map(metrics.map((m) => [/^rankscope key "(.*)" \(\w+\)$/s.exec(m.description)?.[1], m]));
        for (const m of metrics)
          assert.match(m.name, /^[A-Za-z][A-Za-z0-9_./-]{0,254}$/, `${m.description}: ${m.name}`);
        for (const [key, name] of Object.entries(expected)) assert.equal(byKey.get(key)?.name, name, key);
        const longName = byKey.get(long)?.name ?? "";
        assert.equal(longName.length, 255);
        assert.match(longName, /^k\/x{244}_[0-9a-f]{8}$/);
        assert.equal(byKey.get("loss"), undefined, "loss clashes with Loss and is not sent");
        assert.ok(
          seen.some(
            (d) =>
              d.code === "otlp.nameClash:loss" &&
              /key "loss" would be the instrument loss, which key "Loss" already is \(OpenTelemetry names are case-insensitive\)/.test(
                d.message,
              ),
          ),
          JSON.stringify(seen),
        );
        assert.equal(byKey.has("reward__count"), internal, `reward__count exported: ${internal}`);
        assert.equal(byKey.has("rankscope/own_note"), internal, `rankscope/own_note exported: ${internal}`);
      }
    },
  );
  it(
    "the GenAI conventions' instruments: their names, units and explicit buckets, attributes on each data point, one metric per name",
    { timeout: 60_000 },
    async () => {
      receiver.requests.length = 0;
      const logger = await getOrCreateMetricLogger({ runDir: tempDir() });
      await logger.initBackends({ otlp: { loggingMode: "global_reduce", url: receiver.url } });
      for (const [model, n] of [
        ["small", 3],
        ["large", 2],
      ] as const) {
        for (let i = 0; i < n; i++) {
          const request = startRequest({ model, provider: "sim", attributes: { "server.port": 8000 } });
          request.firstToken();
          request.token(4);
          request.end({ inputTokens: 10 });
        }
      }
      startRequest({ model: "large", provider: "sim", attributes: { "server.port": 8000 } }).fail("timeout");
      await logger.flush(1);
      await logger.shutdown();
      await waitFor(() => receiver.requests.length >= 1, { timeoutMs: 10_000, what: "the OTLP export" });
      const metrics = receiver.requests[0]!.resource_metrics[0]!.scope_metrics[0]!.metrics;
      const named = (name: string): OtlpMetric[] => metrics.filter((m) => m.name === name);
      const base = { "gen_ai.operation.name": "chat", "gen_ai.provider.name": "sim", "server.port": 8000 };
      const ttft = GENAI_INSTRUMENTS.serverTimeToFirstToken;
      assert.equal(named(ttft.name).length, 1, "one metric for both models");
      const [metric] = named(ttft.name);
      assert.equal(metric!.unit, "s");
      assert.equal(metric!.description, ttft.description);
      const points = metric!.histogram!.data_points;
      assert.deepEqual(
        points.map((p) => attrs(p.attributes ?? [])),
        [
          { ...base, "gen_ai.request.model": "large" },
          { ...base, "gen_ai.request.model": "small" },
        ],
      );
      assert.deepEqual(
        points.map((p) => Number(p.count)),
        [2, 3],
      );
      for (const p of points) {
        assert.deepEqual(p.explicit_bounds, ttft.boundaries, "the conventions' boundaries");
        assert.equal(p.bucket_counts.length, ttft.boundaries.length + 1);
        assert.equal(
          p.bucket_counts.reduce((a, c) => a + Number(c), 0),
          Number(p.count),
        );
      }
      const durations = named(GENAI_INSTRUMENTS.serverRequestDuration.name)[0]!.histogram!.data_points;
      assert.deepEqual(
        durations.map((p) => [attrs(p.attributes ?? [])["error.type"], Number(p.count)]),
        [
          ["timeout", 1],
          [undefined, 2],
          [undefined, 3],
        ],
      );
      const p99 = named(`${ttft.name}/p99`)[0]!;
      assert.equal(p99.unit, "s");
      assert.equal(p99.gauge!.data_points.length, 2);
      assert.equal(named(`${ttft.name}/count`).length, 0, "count and mean are in the histogram's point");
      const requests = named("inference/requests/total")[0]!;
      assert.deepEqual(
        requests.gauge!.data_points.map((p) => [attrs(p.attributes ?? [])["gen_ai.request.model"], p.as_double]),
        [
          ["large", 3],
          ["small", 3],
        ],
      );
    },
  );
});
