/**
 * NeMo-RL's `Logger` as a thin facade over the pipeline: the same backends, the same store.
 *
 * `logMetrics(metrics, step)` records each number into the collector and flushes at `step`, so the
 * values go through the same merge and the same backends as `recordMetric` (and whatever the ranks
 * recorded is flushed with them). `logHistogram` and the GPU monitor log outside the flush cycle
 * (`MetricLogger.logDirect`), so they never move the training step.
 */
import { resolve } from "node:path";
import { recordMetric } from "../core/collector.js";
import { warn } from "../core/diagnostics.js";
import { histogramReduce } from "../core/accumulators/histogram.js";
import { isRecord } from "../core/json.js";
import type { Metric } from "../core/metric.js";
import type { BackendsConfig, UncheckedBackendsConfig } from "../pipeline/config.js";
import type { BackendSwitchOf } from "../backends/options.js";
import {
  currentMetricLogger,
  getOrCreateMetricLogger,
  type FlushResult,
  type MetricLogger,
} from "../controller/metric-logger.js";
import { SystemMonitor } from "../system/monitor.js";
import { printValidationSamples, type ValidationSample, type ValidationSampleOptions } from "./validation-samples.js";

/** A backend switch: `true` for its defaults, an object for its options (`loggingMode` defaults to `global_reduce`). */
export type BackendSwitch =
  | BackendSwitchOf<"console">
  | BackendSwitchOf<"jsonl">
  | BackendSwitchOf<"store">
  | BackendSwitchOf<"tensorboard">
  | BackendSwitchOf<"wandb">;

/** Options of `Logger` (NeMo-RL's logger config, camelCased). */
export interface LoggerOptions {
  /** The run directory (NeMo's `log_dir`); default: rankscope's `{root}/{experiment}/{trial}`. */
  logDir?: string;
  /** Console tables (default true). */
  console?: BackendSwitchOf<"console">;
  /** JSON lines in the run directory (default false). */
  jsonl?: BackendSwitchOf<"jsonl">;
  /** The embedded store (default false). */
  store?: BackendSwitchOf<"store">;
  /** TensorBoard event files (default false). */
  tensorboard?: BackendSwitchOf<"tensorboard">;
  /** Weights & Biases (default false). */
  wandb?: BackendSwitchOf<"wandb">;
  /** Any other registered backends, by name, with their full config. */
  backends?: BackendsConfig;
  /** Run the system/GPU monitor (default false). */
  monitorGpus?: boolean;
  /** Seconds between GPU samples and between their logs (default 10 and 10). */
  gpuMonitoring?: { collectionInterval?: number; flushInterval?: number };
  /** How many validation samples `printValidationSamples` prints by default (default 0: none). */
  numValSamplesToPrint?: number;
  /** The run config written to `config.yaml` (secrets redacted); default: these options. */
  runConfig?: unknown;
  /** Labels of the run, kept in `run.json` (the dashboard shows and filters runs by them). */
  tags?: string[];
  /** The run's group, kept in `run.json`. */
  group?: string;
}

/** Options of `logMetrics`. */
export interface LogMetricsOptions {
  /** Prefix for every key: `{ loss }` with prefix `train` → `train/loss`. */
  prefix?: string;
  /** A key of `metrics` whose value is the x-axis for this call (e.g. `total_step`), instead of `step`. */
  stepMetric?: string;
}

const SWITCHES = ["console", "jsonl", "store", "tensorboard", "wandb"] as const;

/** The options a facade created after `initBackends` cannot apply: the backends and the run files are already there. */
const ADOPTION_IGNORES = [...SWITCHES, "backends", "runConfig", "tags", "group"] as const;

/** Flatten nested objects with `/`: `{ a: { b: 1 } }` → `{ "a/b": 1 }`. Arrays and other values are leaves. */
export function flattenWithSlash(value: Readonly<Record<string, unknown>>, prefix = ""): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    const full = prefix === "" ? key : `${prefix}/${key}`;
    if (isRecord(inner) && !ArrayBuffer.isView(inner) && Object.getPrototypeOf(inner) === Object.prototype) {
      Object.assign(out, flattenWithSlash(inner, full));
    } else out[full] = inner;
  }
  return out;
}

/** The backends config a facade's options stand for. */
export function backendsFromOptions(options: LoggerOptions): UncheckedBackendsConfig {
  const config: Record<string, Readonly<Record<string, unknown>>> = {};
  for (const name of SWITCHES) {
    const value = options[name] ?? (name === "console" ? true : false);
    if (value === false) continue;
    if (value !== true && (value === null || typeof value !== "object" || Array.isArray(value))) {
      throw new TypeError(
        `Logger option "${name}" must be true, false or an object of ${name} options, got ${JSON.stringify(value)}`,
      );
    }
    config[name] = { loggingMode: "global_reduce", ...(value === true ? {} : value) };
  }
  for (const [name, value] of Object.entries(options.backends ?? {})) {
    if (name in config)
      throw new TypeError(`backend "${name}" is configured twice: by the "${name}" option and in "backends"; keep one`);
    config[name] = value;
  }
  return config;
}

/** NeMo-RL's logger: `logMetrics`, `logHyperparams`, `logHistogram`, `printValidationSamples`, `finish`. */
export class Logger {
  /** Values `logMetrics` skipped because they were not numbers (NeMo's scalar coercion). */
  skippedValues = 0;
  /** Resolves when the backends (and the monitor) are running; rejects with a config error. */
  readonly ready: Promise<void>;
  private metricLogger: MetricLogger | null = null;
  /** True when the metric logger's backends were started before this facade (`adopt`). */
  private adopted = false;
  private monitor: SystemMonitor | null = null;
  private readonly numValSamplesToPrint: number;

  /** Starts the backends in the background; methods wait for them. Use `Logger.create` to see config errors at once. */
  constructor(readonly options: LoggerOptions = {}) {
    const n = options.numValSamplesToPrint ?? 0;
    if (!Number.isInteger(n) || n < 0)
      throw new TypeError(
        `numValSamplesToPrint must be a non-negative integer, got ${String(options.numValSamplesToPrint)}`,
      );
    this.numValSamplesToPrint = n;
    const backends = backendsFromOptions(options);
    this.ready = this.start(backends);
    // The error is rethrown by the first method that awaits `ready`; do not also crash the process.
    this.ready.catch(() => undefined);
  }

  /** Create a logger and wait for its backends; throws a TypeError for an invalid config. */
  static async create(options: LoggerOptions = {}): Promise<Logger> {
    const logger = new Logger(options);
    await logger.ready;
    return logger;
  }

  private async start(backends: UncheckedBackendsConfig): Promise<void> {
    const existed = currentMetricLogger() !== undefined;
    // An existing logger is taken as it is (a differing logDir is warned about below, not an error).
    const logger = await getOrCreateMetricLogger(
      existed || this.options.logDir === undefined ? {} : { runDir: this.options.logDir },
    );
    if (this.options.logDir !== undefined && logger.run.runDir !== resolve(this.options.logDir)) {
      warn(
        "facade.logDir",
        `Logger({ logDir: ${JSON.stringify(this.options.logDir)} }): this process's metric logger already writes to ${logger.run.runDir}; logDir is ignored`,
      );
    }
    this.metricLogger = logger;
    if (logger.backendsStarted) {
      this.adopt();
      return;
    }
    try {
      const { tags, group } = this.options;
      await logger.initBackends(backends as BackendsConfig, {
        runConfig: this.options.runConfig ?? this.options,
        ...(tags !== undefined ? { tags } : {}),
        ...(group !== undefined ? { group } : {}),
      });
    } catch (error) {
      // A logger this facade created for a config that turned out invalid must not linger as the process's logger.
      if (!existed) await logger.shutdown();
      throw error;
    }
    if (this.options.monitorGpus === true) this.startMonitor();
  }

  /**
   * This process's metric logger already runs the backends `initBackends` started: the facade logs
   * to those (one pipeline, one set of backends) instead of failing, says which of its own options
   * are ignored, and leaves the logger's shutdown to the code that started them.
   */
  private adopt(): void {
    this.adopted = true;
    const ignored = ADOPTION_IGNORES.filter((name) => this.options[name] !== undefined);
    if (ignored.length > 0) {
      warn(
        "facade.backendsStarted",
        `Logger: this process's metric logger already has its backends (initBackends() was called before); the Logger logs to them, and its options ${ignored.join(", ")} are ignored. ` +
          "To choose the backends here instead, create the Logger before initBackends() (or call shutdown() on the metric logger first).",
      );
    }
    if (this.options.monitorGpus === true) this.startMonitor();
  }

  private startMonitor(): void {
    if (this.metricLogger === null) return;
    this.monitor = new SystemMonitor({
      logger: this.metricLogger,
      collectionInterval: this.options.gpuMonitoring?.collectionInterval ?? 10,
      flushInterval: this.options.gpuMonitoring?.flushInterval ?? 10,
    }).start();
  }

  private async logger(): Promise<MetricLogger> {
    await this.ready;
    if (this.metricLogger === null)
      throw new Error("Logger: the metric logger did not start (see the error of Logger.create or ready)");
    return this.metricLogger;
  }

  /** The system monitor, when `monitorGpus` is on (after `ready`). */
  get systemMonitor(): SystemMonitor | null {
    return this.monitor;
  }

  /**
   * Log a dict of metrics at `step`: nested objects are flattened with `/`, `prefix` is put in
   * front, numbers are logged and anything else is skipped and counted (`skippedValues`).
   */
  async logMetrics(
    metrics: Readonly<Record<string, unknown>>,
    step: number,
    options: LogMetricsOptions = {},
  ): Promise<FlushResult> {
    const logger = await this.logger();
    const flat = flattenWithSlash(metrics);
    let x = step;
    if (options.stepMetric !== undefined) {
      const value = flat[options.stepMetric];
      if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
        throw new TypeError(
          `logMetrics: stepMetric "${options.stepMetric}" must be a key of metrics with a non-negative integer value, got ${JSON.stringify(value)}`,
        );
      }
      x = value;
    }
    const prefix = options.prefix === undefined || options.prefix === "" ? "" : `${options.prefix}/`;
    for (const [key, value] of Object.entries(flat)) {
      if (typeof value === "number" || typeof value === "bigint") recordMetric(`${prefix}${key}`, value, "mean");
      else {
        this.skippedValues++;
        warn(
          "facade.nonNumeric",
          `logMetrics: "${prefix}${key}" is not a number (${typeof value}); non-numeric values are skipped and counted (Logger.skippedValues)`,
        );
      }
    }
    return logger.flush(x, { allowRepeatedStep: true });
  }

  /**
   * Hand the run's hyperparameters to every backend, nested as given: the same names as the run
   * config's (`model.layers` wherever names are flat, src/core/hyperparams.ts), not a second set.
   */
  async logHyperparams(params: Readonly<Record<string, unknown>>): Promise<void> {
    const logger = await this.logger();
    await logger.logHyperparams(params);
  }

  /** Log the distribution of `values` as a histogram named `name` at `step` (outside the flush cycle). */
  async logHistogram(values: ArrayLike<number>, step: number, name: string): Promise<readonly Metric[]> {
    if (typeof name !== "string" || name.length === 0)
      throw new TypeError(`logHistogram(values, step, name) needs a non-empty name, got ${String(name)}`);
    if (!Number.isInteger(step) || step < 0)
      throw new TypeError(`logHistogram: step must be a non-negative integer, got ${String(step)}`);
    const logger = await this.logger();
    const accumulator = histogramReduce.create();
    for (let i = 0; i < values.length; i++) accumulator.append(Number(values[i]));
    return logger.logDirect([{ key: name, reduce: "histogram", state: accumulator.state() }], { step });
  }

  /** Print validation samples (default `numValSamplesToPrint` of them); returns the text. */
  printValidationSamples(
    samples: readonly ValidationSample[],
    n: number = this.numValSamplesToPrint,
    options: ValidationSampleOptions = {},
  ): string {
    return printValidationSamples(samples, n, options);
  }

  /**
   * Stop the monitor (logging what it holds) and finish every backend. When the backends were
   * started by `initBackends` before this facade (see `adopt`), they are left running: the code
   * that started them shuts them down.
   */
  async finish(): Promise<void> {
    const logger = await this.logger();
    await this.monitor?.stop();
    if (!this.adopted) await logger.shutdown();
  }
}
