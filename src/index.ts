/**
 * rankscope: record anywhere, reduce across ranks, see it everywhere.
 *
 * The pipeline, stage by stage:
 *   recordMetric / metric   → core/collector      (per process, synchronous, no I/O)
 *   Reduce / registerReduce → core/registry       (accumulators with mergeable states)
 *   getOrCreateMetricLogger → controller/         (flush(step): gather states, merge, log)
 *   registerBackend         → backends/           (console, jsonl, and your own)
 *
 * Faces of the same pipeline:
 *   stats                   → stats/              (AReaL: scopes, masked stats, scalars with __count, timings)
 *   getLogger               → textlog/            (coloured text logs, logs/main.log, logs/merged.log)
 *   Logger                  → facade/             (NeMo-RL: logMetrics, logHyperparams, logHistogram, samples)
 *   SystemMonitor           → system/             (CPU, memory, GPUs via nvidia-smi, on its own x-axis)
 *   writeRunFiles           → run/                (config.yaml with secrets redacted, version.json)
 *   spawnRanks / joinRun    → transport/          (ranks as threads, processes, or over NATS: "rankscope/nats")
 *   alert / alerts option   → alerts/             (rules on the reduced values, a watchdog, a webhook)
 *   startRequest            → inference/          (TTFT, TPOT, tokens per request, under OpenTelemetry's GenAI names)
 */
export { recordMetric, metric, type MetricHandle } from "./core/collector.js";
export { Reduce, registerReduce } from "./core/registry.js";
export {
  attributedKey,
  splitAttributedKey,
  type AttributeValue,
  type KeyParts,
  type MetricAttributes,
} from "./core/attributes.js";
export {
  startRequest,
  inferenceModel,
  InferenceModel,
  InferenceRequest,
  type InferenceModelOptions,
  type InferenceSide,
  type InferenceUsage,
} from "./inference/requests.js";
export {
  GENAI_ATTRIBUTES,
  GENAI_CONVENTIONS,
  GENAI_INSTRUMENTS,
  INFERENCE_COUNTS,
  type GenAiInstrument,
} from "./inference/conventions.js";
export type {
  Accumulator,
  AccumulatorState,
  BuiltinReduce,
  HistogramData,
  NumericReduceDefinition,
  NumericReduceName,
  RecordReduceDefinition,
  RecordReduceName,
  ReduceDefinition,
  ReduceDefinitionBase,
  ReduceDefinitionInput,
  ReduceName,
  ReducedScalars,
  RegisteredReduces,
  SampleRecord,
} from "./core/reduce.js";
export type { SampleOptions } from "./core/accumulators/sample.js";
export {
  LOGGING_MODES,
  type LoggingMode,
  type Metric,
  type HistogramMetric,
  type SampleBatch,
  type StreamRecord,
} from "./core/metric.js";
export { setDiagnosticHandler, diagnosticCounts, type Diagnostic, type DiagnosticHandler } from "./core/diagnostics.js";
export { jsonNumber, parseNumber } from "./core/json.js";
export { isInternalKey } from "./core/internal-keys.js";
export {
  registerBackend,
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
  type FlushOptions,
  type FlushResult,
  type InitBackendsOptions,
  type LogDirectOptions,
  type MetricLoggerOptions,
} from "./controller/metric-logger.js";
export type { StragglerOptions } from "./controller/straggler-options.js";
export type {
  ChronicRank,
  RankRef,
  RankTimingRecord,
  SlowRank,
  StragglerMeasure,
  StragglerReport,
} from "./core/straggler-report.js";
export type {
  BackendsConfig,
  BackendOptionsMap,
  BackendName,
  BackendConfigBase,
  BackendConfigOf,
  BackendConfigFor,
  AliasedBackendConfig,
  AnyBackendConfig,
  UncheckedBackendsConfig,
  BackendSwitchOf,
  ConsoleBackendOptions,
  JsonlBackendOptions,
  StoreBackendOptions,
  TensorboardBackendOptions,
  WandbBackendOptions,
  PrometheusBackendOptions,
  PrometheusRemoteWriteBackendOptions,
  OtlpBackendOptions,
} from "./backends/options.js";
export { alert } from "./alerts/user-alert.js";
export type { AlertEvent, AlertLevel, AlertState } from "./core/alert.js";
export type { AlertOptions } from "./alerts/options.js";
export type {
  AlertRuleConfig,
  AlertRuleBase,
  BuiltinRuleName,
  NonfiniteRule,
  RankLostRule,
  StalledRule,
  StragglerRule,
  ThresholdRule,
  SpikeRule,
  RateDropRule,
  RatioRule,
} from "./alerts/rule-config.js";
export type { AlertStats } from "./alerts/controller-alerts.js";
export type { WebhookStats } from "./alerts/webhook.js";
export type { RankHandle, RunInfo } from "./pipeline/runtime.js";
export { resolveRunLocation, type RunDirOptions, type RunLocation } from "./run/run-dir.js";
export { monotonicCommitStep, MonotonicStep } from "./core/step.js";
export {
  stats,
  StatsTracker,
  StatReduce,
  AVG_MIN_MAX,
  type StatReduceName,
  type Mask,
  type StatValues,
  type StatOptions,
  type ScopeHandle,
} from "./stats/index.js";
export { writeRunFiles, redactSecrets, REDACTED, type RunFilesOptions, type RunFiles } from "./run/run-files.js";
export {
  getLogger,
  configureTextLogs,
  setupFileLogging,
  type TextLogger,
  type TextLogOptions,
  type LineSink,
  type ColorName,
  type ComponentColor,
} from "./textlog/index.js";
export {
  Logger,
  printValidationSamples,
  type LoggerOptions,
  type LogMetricsOptions,
  type BackendSwitch,
  type ValidationSample,
  type ValidationSampleOptions,
} from "./facade/index.js";
export { SystemMonitor, startSystemMonitor, type SystemMonitorOptions, type GpuSample } from "./system/index.js";
export { Tracer, trace, traced, type TimerKind, type TracerOptions } from "./trace/tracer.js";
export {
  traceScope,
  traceInstant,
  traceCounter,
  configurePerfTracer,
  savePerfTracer,
  getPerfTracer,
  PerfTracer,
  type PerfTracerOptions,
  type PerfTracerStats,
  type TraceScopeOptions,
} from "./trace/perf-tracer.js";
export type { TraceCategory, TraceEvent } from "./trace/trace-events.js";
export {
  SessionTracer,
  type SessionStatus,
  type SessionTracerOptions,
  type SessionRecord,
  type SessionSpan,
} from "./trace/session-tracer.js";
export { parseTraceText, readTraceFile, type ParsedTrace } from "./trace/trace-file.js";
export { mergeTraces, type MergeTracesOptions, type MergeTracesResult } from "./trace/merge.js";
export {
  spawnRanks,
  RankGroup,
  type RankCallResult,
  type SpawnRanksOptions,
  type RankServer,
} from "./transport/controller/launcher.js";
export { RankClosedError } from "./transport/controller/rank-carrier.js";
export { joinRun, type JoinRunOptions, type RankConnection } from "./transport/rank/join.js";
export { currentRank } from "./pipeline/current-rank.js";
export {
  ignoredMessageCounts,
  transportStats,
  type IgnoredMessageCounts,
  type TransportStats,
} from "./transport/protocol/messages.js";
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
