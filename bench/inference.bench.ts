/**
 * The inference request API (issue 40): ns and bytes per token mark and per request, against
 * OpenTelemetry's own histogram recording of the same instruments with the same attributes, in
 * one process; and the overhead of measuring a stream of one token every 20 ms. Also attributes
 * on `recordMetric` and bound handles, beside `recordMetric` without attributes.
 */
import { performance } from "node:perf_hooks";
import { metrics as otelApi } from "@opentelemetry/api";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { inferenceModel, metric, recordMetric, Reduce, startRequest } from "../src/index.js";
import { GENAI_INSTRUMENTS as I } from "../src/inference/conventions.js";
import { bytesPerCall, nsPerCall, printTable } from "./harness.js";
import { chunkMarkAtCall, chunkMarksWithAppend, requests } from "./inference-loops.js";

void otelApi;
const reader = new PeriodicExportingMetricReader({
  exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
  exportIntervalMillis: 3_600_000,
});
const meter = new MeterProvider({ readers: [reader] }).getMeter("bench");
const otel = (instrument: typeof I.serverRequestDuration) =>
  meter.createHistogram(instrument.name, {
    unit: instrument.unit,
    advice: { explicitBucketBoundaries: [...instrument.boundaries] },
  });
const otelDuration = otel(I.serverRequestDuration);
const otelTtft = otel(I.serverTimeToFirstToken);
const otelTpot = otel(I.serverTimePerOutputToken);
const otelRequests = meter.createCounter("inference.requests");
const otelTokens = meter.createCounter("inference.output_tokens");
const otelAttributes = {
  "gen_ai.operation.name": "chat",
  "gen_ai.provider.name": "bench",
  "gen_ai.request.model": "llama-3.1-8b",
};

const options = { model: "llama-3.1-8b", provider: "bench", operation: "chat" } as const;
const server = inferenceModel(options);
const client = inferenceModel({ ...options, side: "client" });
const TOKENS = 16;
const frozen = Object.freeze({ model: "a", operation: "chat" });
const handle = metric("bench/attributed_handle", Reduce.QUANTILES, { model: "a", operation: "chat" });

const perToken: Record<string, (n: number) => void> = {
  "performance.now() alone (perf_hooks', the clock a mark reads)": (n) => {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += performance.now();
    if (sum < 0) throw new Error("unreachable");
  },
  "server token() mark": (n) => {
    const request = server.start();
    request.firstToken();
    for (let i = 0; i < n; i++) request.token();
  },
  "client token() mark with its append (one request's chunks, appended 256 at a time)": chunkMarksWithAppend(client),
};
const perRequest: Record<string, (n: number) => void> = {
  [`server request, ${TOKENS} tokens (inferenceModel.start)`]: requests(server, TOKENS),
  [`server request, ${TOKENS} tokens (startRequest)`]: (n) => {
    for (let i = 0; i < n; i++) {
      const request = startRequest(options);
      request.firstToken();
      for (let t = 1; t < TOKENS; t++) request.token();
      request.end({ inputTokens: 100 });
    }
  },
  [`client request, ${TOKENS} chunks (inferenceModel.start)`]: requests(client, TOKENS),
  [`OpenTelemetry, same instruments and attributes, ${TOKENS} tokens`]: (n) => {
    for (let i = 0; i < n; i++) {
      const start = performance.now();
      const first = performance.now();
      let tokens = 1;
      for (let t = 1; t < TOKENS; t++) tokens++;
      const end = performance.now();
      otelDuration.record((end - start) / 1000, otelAttributes);
      otelTtft.record((first - start) / 1000, otelAttributes);
      otelTpot.record((end - first) / 1000 / (tokens - 1), otelAttributes);
      otelRequests.add(1, otelAttributes);
      otelTokens.add(tokens, otelAttributes);
    }
  },
};
const attributed: Record<string, (n: number) => void> = {
  "recordMetric, no attributes (QUANTILES)": (n) => {
    for (let i = 0; i < n; i++) recordMetric("bench/plain", (i & 1023) + 1, Reduce.QUANTILES);
  },
  "recordMetric, frozen attributes": (n) => {
    for (let i = 0; i < n; i++) recordMetric("bench/attributed", (i & 1023) + 1, Reduce.QUANTILES, frozen);
  },
  "recordMetric, attributes literal per call": (n) => {
    for (let i = 0; i < n; i++)
      recordMetric("bench/attributed", (i & 1023) + 1, Reduce.QUANTILES, { model: "a", operation: "chat" });
  },
  "metric() handle with attributes .record": (n) => {
    for (let i = 0; i < n; i++) handle.record((i & 1023) + 1);
  },
  "OpenTelemetry Histogram.record with attributes": (n) => {
    for (let i = 0; i < n; i++) otelTtft.record(((i & 1023) + 1) / 1000, otelAttributes);
  },
};

function measure(loops: Record<string, (n: number) => void>, n: number): Array<[string, number, number]> {
  const ns: Record<string, number> = {};
  for (let pass = 0; pass < 2; pass++)
    for (const [name, loop] of Object.entries(loops))
      ns[name] = Math.min(ns[name] ?? Infinity, nsPerCall(loop, { n, warmup: n / 4 }));
  return Object.entries(loops).map(([name, loop]) => [name, ns[name] ?? NaN, bytesPerCall(loop, n / 4)]);
}

const CHUNK_AT_CALL = "client token() mark at the call (clock + chunk time held)";
const tokenRows = measure(perToken, 2_000_000);
// Timed over its marks only, not its request's start and end (where its time is appended): no bytes figure.
tokenRows.push([CHUNK_AT_CALL, Math.min(chunkMarkAtCall(client, 1_000_000), chunkMarkAtCall(client, 1_000_000)), NaN]);
const requestRows = measure(perRequest, 200_000);
const attributeRows = measure(attributed, 1_000_000);
const rows = [...tokenRows, ...requestRows, ...attributeRows];
process.stdout.write(`Node ${process.version}\n\n`);
printTable(
  ["operation", "ns/call", "bytes/call"],
  rows.map(([name, ns, bytes]) => [name, ns, Number.isNaN(bytes) ? "—" : bytes.toFixed(1)]),
);

const ns = (name: string): number => rows.find(([n]) => n === name)?.[1] ?? NaN;
const tokenNs = ns("server token() mark");
const requestNs = ns(`server request, ${TOKENS} tokens (inferenceModel.start)`);
const otelNs = ns(`OpenTelemetry, same instruments and attributes, ${TOKENS} tokens`);
// A stream of one token every 20 ms, of TOKENS tokens per request: the API's time per token (its
// mark, and its share of the request's start and end) over the 20 ms.
const perTokenShare = (requestNs - (TOKENS - 1) * tokenNs) / TOKENS + tokenNs;
printTable(
  ["comparison", "figure", "target"],
  [
    ["server token mark", `${tokenNs.toFixed(1)} ns`, "≤ 50 ns"],
    ["client chunk mark at the call", `${ns(CHUNK_AT_CALL).toFixed(1)} ns`, "≤ 50 ns"],
    [
      "client chunk mark at the call − its clock read",
      `${(ns(CHUNK_AT_CALL) - ns("performance.now() alone (perf_hooks', the clock a mark reads)")).toFixed(1)} ns`,
      "≤ 50 ns",
    ],
    [`server request (inferenceModel.start, ${TOKENS} marks, end)`, `${(requestNs / 1000).toFixed(2)} µs`, "≤ 1 µs"],
    [
      `server request (startRequest, ${TOKENS} marks, end)`,
      `${(ns(`server request, ${TOKENS} tokens (startRequest)`) / 1000).toFixed(2)} µs`,
      "≤ 1 µs",
    ],
    [
      `client request (inferenceModel.start, ${TOKENS} chunks, end)`,
      `${(ns(`client request, ${TOKENS} chunks (inferenceModel.start)`) / 1000).toFixed(2)} µs`,
      "≤ 1 µs",
    ],
    ["OpenTelemetry request / ours", `${(otelNs / requestNs).toFixed(1)}×`, "—"],
    ["overhead on a 20 ms/token stream", `${((perTokenShare / 20e6) * 100).toExponential(1)} %`, "< 0.1 %"],
  ],
);
