/**
 * Open-standard backends: the cost of a flush of 1,000 keys into the Prometheus backend's families
 * and a `/metrics` render of them, against prom-client used directly (1,000 `Gauge.set` and its
 * registry's render) in the same run; the remote-write encoding (protobuf + Snappy); and the OTLP
 * export encoding (rankscope's `ResourceMetrics` + the official protobuf serializer). CPU µs per
 * flush, medians of several runs. Prints a markdown table.
 */
import { ProtobufMetricsSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import client from "prom-client";
import { OtlpMetricBuilder } from "../src/backends/otlp/metrics.js";
import { Exposition } from "../src/backends/prometheus/exposition.js";
import { prometheusName } from "../src/backends/prometheus/names.js";
import { encodeWriteRequest, snappyCompress } from "../src/backends/prometheus/remote-write.js";
import { renderMetrics } from "../src/backends/prometheus/render.js";
import type { Metric } from "../src/core/metric.js";
import { median, printTable } from "./harness.js";

const KEYS = 1000;
const keys = Array.from({ length: KEYS }, (_, i) => `group${i % 20}/metric_${i}`);
const batch = (step: number): Metric[] =>
  keys.map((key, i) => ({
    key,
    value: step + i / 7,
    reduce: i % 10 === 0 ? "sum" : "mean",
    step,
    timestamp: Date.now(),
  }));

/** Median CPU µs per call of `fn` over `runs` runs of `n` calls (after a warm-up run). */
async function cpuMicros(fn: (i: number) => unknown, n: number, runs = 7): Promise<number> {
  for (let i = 0; i < n; i++) await fn(i);
  const samples: number[] = [];
  for (let r = 0; r < runs; r++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) await fn(i);
    const c = process.cpuUsage(c0);
    samples.push((c.user + c.system) / n);
  }
  return median(samples);
}

const rows: (string | number)[][] = [];

// Our path: families updated by logBatch, rendered by prom-client's Registry.
const exposition = new Exposition({ rank: "0", host: "h" });
const ours = await cpuMicros((i) => exposition.addMetrics(batch(i)), 200);

// prom-client directly: one labelled Gauge per key (sum keys as Counters), set per flush.
const registry = new client.Registry();
const direct = keys.map((key, i) =>
  i % 10 === 0
    ? {
        kind: "counter" as const,
        m: new client.Counter({
          name: prometheusName(key, "sum"),
          help: key,
          labelNames: ["rank", "host"],
          registers: [registry],
        }),
      }
    : {
        kind: "gauge" as const,
        m: new client.Gauge({
          name: prometheusName(key),
          help: key,
          labelNames: ["rank", "host"],
          registers: [registry],
        }),
      },
);
const labels = { rank: "0", host: "h" };
const promSet = await cpuMicros((step) => {
  const metrics = batch(step);
  for (let i = 0; i < KEYS; i++) {
    const d = direct[i]!;
    if (d.kind === "counter") d.m.inc(labels, Math.abs(metrics[i]!.value));
    else d.m.set(labels, metrics[i]!.value);
  }
}, 200);
// The two renders alternate, run by run: on this shared machine their order moved either by 2×.
const oursRenders: number[] = [];
const promRenders: number[] = [];
for (let r = 0; r < 7; r++) {
  oursRenders.push(await cpuMicros(() => renderMetrics([exposition]), 20, 1));
  promRenders.push(await cpuMicros(() => registry.metrics(), 20, 1));
}
const oursRender = median(oursRenders);
const promRender = median(promRenders);
rows.push(["logBatch of 1,000 keys → Prometheus families (rankscope)", ours, "—"]);
rows.push(["1,000 × Gauge.set / Counter.inc (prom-client directly)", promSet, `${(ours / promSet).toFixed(2)}×`]);
rows.push(["/metrics render, 1,000 series (rankscope, via prom-client's Registry)", oursRender, "—"]);
rows.push([
  "/metrics render, 1,000 series (prom-client registry directly)",
  promRender,
  `${(oursRender / promRender).toFixed(2)}×`,
]);

// Remote write: 1,000 changed series → WriteRequest → Snappy.
const rw = new Exposition({ rank: "0" });
const rwCost = await cpuMicros((i) => {
  rw.addMetrics(batch(i));
  return snappyCompress(encodeWriteRequest(rw.takeChanged(0)));
}, 100);
const body = encodeWriteRequest((rw.addMetrics(batch(1)), rw.takeChanged(0)));
rows.push([
  `remote write: 1,000 samples → protobuf (${body.length} B) + Snappy (${snappyCompress(body).length} B)`,
  rwCost,
  "—",
]);

// OTLP: 1,000 keys → ResourceMetrics → protobuf (the exporter's own serializer).
const builder = new OtlpMetricBuilder("cumulative", Date.now());
const resource = resourceFromAttributes({ "service.name": "bench" });
let otlpBytes = 0;
const otlpCost = await cpuMicros((i) => {
  builder.addMetrics(batch(i));
  const bytes = ProtobufMetricsSerializer.serializeRequest({
    resource,
    scopeMetrics: [{ scope: { name: "rankscope" }, metrics: builder.take(Date.now()) }],
  });
  otlpBytes = bytes?.length ?? 0;
}, 100);
rows.push([`OTLP export encode: 1,000 keys → ResourceMetrics → protobuf (${otlpBytes} B)`, otlpCost, "—"]);

printTable(["per flush", "CPU µs", "ratio"], rows);
