/**
 * rankscope: record anywhere, reduce across ranks, see it everywhere.
 *
 * The pipeline, stage by stage:
 *   recordMetric / metric   → core/collector      (per process, synchronous, no I/O)
 *   Reduce / registerReduce → core/registry       (accumulators with mergeable states)
 *   getOrCreateMetricLogger → controller/         (flush(step): gather states, merge, log)
 *   registerBackend         → backends/           (console, jsonl, and your own)
 */
export { recordMetric, metric, getCollector, type MetricHandle, type KeyState, type StreamProducer, type MetricEntry } from "./core/collector.js";
export { Reduce, registerReduce, getReduceDefinition } from "./core/registry.js";
export type {
  Accumulator,
  AccumulatorState,
  BuiltinReduce,
  HistogramData,
  ReduceDefinition,
  ReduceName,
  ReducedScalars,
  SampleRecord,
} from "./core/reduce.js";
export type { SampleOptions } from "./core/accumulators/sample.js";
export { LOGGING_MODES, type LoggingMode, type Metric, type HistogramMetric, type SampleBatch, type StreamRecord } from "./core/metric.js";
export { setDiagnosticHandler, diagnosticCounts, resetDiagnostics, type Diagnostic, type DiagnosticHandler } from "./core/diagnostics.js";
export { jsonNumber, parseNumber } from "./core/json.js";
export {
  registerBackend,
  registerLazyBackend,
  registeredBackends,
  type Backend,
  type BackendContext,
  type BackendFactory,
  type BackendOptions,
  type CommonBackendOptions,
  type RankIdentity,
} from "./backends/backend.js";
export {
  getOrCreateMetricLogger,
  MetricLogger,
  DEFAULT_BACKENDS,
  type FlushResult,
  type InitBackendsOptions,
  type MetricLoggerOptions,
} from "./controller/metric-logger.js";
export type { BackendsConfig } from "./controller/config.js";
export { RankRuntime, type RankHandle, type RankInit, type RankSnapshot, type RunInfo } from "./controller/rank.js";
export { resolveRunLocation, type RunDirOptions, type RunLocation } from "./run/run-dir.js";
export {
  streamValues,
  startStream,
  flushStream,
  stopStream,
  streamStats,
  streamLinkForWorker,
  attachStreamLink,
  STREAM_DROPPED_KEY,
  type StreamOptions,
  type StreamStats,
  type StreamCounts,
} from "./stream/stream.js";
