/**
 * The system monitor (NeMo-RL's GPU monitoring, for every machine): samples CPU and memory of this
 * process and this machine, and GPUs through nvidia-smi when it exists, every `collectionInterval`
 * seconds; every `flushInterval` seconds logs what it sampled under `system/{label}/...`.
 *
 * It has its own x-axis, `system/step` (one per flush; the wall time is in every metric's
 * timestamp), and logs through `MetricLogger.logDirect`, outside the flush cycle: it never calls
 * `flush(step)`, so it never moves or fills the training step (NeMo-RL issue #83). Samples go
 * into a collector of its own, so the values between two flushes are reduced like any metric
 * (utilisation and CPU averaged, memory as its peak).
 */
import { cpus, freemem, hostname, totalmem } from "node:os";
import { Collector } from "../core/collector.js";
import { reportError, warn } from "../core/diagnostics.js";
import type { Metric } from "../core/metric.js";
import type { MetricLogger } from "../controller/metric-logger.js";
import { getOrCreateMetricLogger } from "../controller/metric-logger.js";
import { queueOffCycleLog } from "../pipeline/off-cycle.js";
import { reduceStates } from "../pipeline/reduce-states.js";
import { currentRun } from "../run/current.js";
import { queryNvidiaSmi, type GpuSample } from "./nvidia-smi.js";

/** The monitor's own x-axis. */
export const SYSTEM_AXIS = "system/step";

/** Options of `SystemMonitor`. */
export interface SystemMonitorOptions {
  /** Seconds between samples (default 10). */
  collectionInterval?: number;
  /** Seconds between logs of what was sampled (default 10). */
  flushInterval?: number;
  /** Query GPUs through nvidia-smi (default true). */
  gpus?: boolean;
  /** The node/rank label in keys, `system/{label}/...` (default: the host name). */
  label?: string;
  /** The nvidia-smi command (default `nvidia-smi`, found on PATH). */
  nvidiaSmi?: string;
  /** Where to log (default: this process's MetricLogger). */
  logger?: MetricLogger;
}

function positiveSeconds(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0)
    throw new TypeError(`${name} must be a positive number of seconds, got ${String(value)}`);
  return v;
}

const MIB = 1024 * 1024;

/** Samples the system and logs it on its own axis. `start()` it, `stop()` it at the end. */
export class SystemMonitor {
  readonly collectionInterval: number;
  readonly flushInterval: number;
  readonly label: string;
  /** The next `system/step`. */
  step = 0;
  /** Samples taken so far. */
  samples = 0;
  /** nvidia-smi calls that failed (not counting a missing command). */
  gpuFailures = 0;
  /** False once nvidia-smi turned out to be missing (or GPUs are off). */
  gpuAvailable: boolean;
  private readonly collector = new Collector();
  private readonly nvidiaSmi: string;
  private loggerPromise: Promise<MetricLogger> | null;
  private sampleTimer: NodeJS.Timeout | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private sampling: Promise<void> | null = null;
  private flushing: Promise<readonly Metric[]> = Promise.resolve([]);
  private lastCpu = process.cpuUsage();
  private lastCpuTime = performance.now();
  private lastMachine = machineTimes();
  private readonly gpuNames = new Map<number, string>();

  constructor(options: SystemMonitorOptions = {}) {
    this.collectionInterval = positiveSeconds("gpuMonitoring.collectionInterval", options.collectionInterval, 10);
    this.flushInterval = positiveSeconds("gpuMonitoring.flushInterval", options.flushInterval, 10);
    this.label = options.label ?? hostname();
    if (this.label.length === 0 || this.label.includes("/"))
      throw new TypeError(
        `system monitor label must be a non-empty name without "/", got ${JSON.stringify(this.label)}`,
      );
    this.gpuAvailable = options.gpus ?? true;
    this.nvidiaSmi = options.nvidiaSmi ?? "nvidia-smi";
    this.loggerPromise = options.logger === undefined ? null : Promise.resolve(options.logger);
  }

  /** Start sampling and flushing on timers (which never keep the process alive). */
  start(): this {
    if (this.sampleTimer !== null) return this;
    this.sampleTimer = setInterval(() => void this.sample(), this.collectionInterval * 1000);
    this.flushTimer = setInterval(() => void this.flush(), this.flushInterval * 1000);
    this.sampleTimer.unref();
    this.flushTimer.unref();
    return this;
  }

  /** Take one sample now (skipped if one is still running). */
  sample(): Promise<void> {
    if (this.sampling !== null) return this.sampling;
    this.sampling = this.takeSample().finally(() => {
      this.sampling = null;
    });
    return this.sampling;
  }

  /** Log what was sampled since the last flush at the next `system/step`; returns the metrics logged. */
  flush(): Promise<readonly Metric[]> {
    this.flushing = this.flushing.then(() => this.logSamples());
    return this.flushing;
  }

  /** Stop the timers and log what is left. */
  async stop(): Promise<void> {
    if (this.sampleTimer !== null) clearInterval(this.sampleTimer);
    if (this.flushTimer !== null) clearInterval(this.flushTimer);
    this.sampleTimer = null;
    this.flushTimer = null;
    if (this.sampling !== null) await this.sampling;
    await this.flush();
  }

  private record(key: string, value: number, reduce: "mean" | "max"): void {
    this.collector.recordSlow(`system/${this.label}/${key}`, value, reduce);
  }

  private async takeSample(): Promise<void> {
    const now = performance.now();
    const cpu = process.cpuUsage();
    const elapsedMicros = (now - this.lastCpuTime) * 1000;
    if (elapsedMicros > 0) {
      const used = cpu.user - this.lastCpu.user + (cpu.system - this.lastCpu.system);
      this.record("cpu/process_percent", (used / elapsedMicros) * 100, "mean");
    }
    this.lastCpu = cpu;
    this.lastCpuTime = now;
    // The machine's CPU times move in clock ticks (10 ms): a sample taken within one tick of the
    // last has nothing to measure yet and leaves the window open, so the next one measures both.
    const machine = machineTimes();
    const total = machine.total - this.lastMachine.total;
    if (total > 0) {
      this.record("cpu/machine_percent", ((total - (machine.idle - this.lastMachine.idle)) / total) * 100, "mean");
      this.lastMachine = machine;
    }
    const memory = process.memoryUsage();
    this.record("memory/process_rss_mib", memory.rss / MIB, "max");
    this.record("memory/process_heap_used_mib", memory.heapUsed / MIB, "max");
    const totalMem = totalmem();
    this.record("memory/machine_used_mib", (totalMem - freemem()) / MIB, "max");
    this.record("memory/machine_total_mib", totalMem / MIB, "max");
    if (this.gpuAvailable) await this.sampleGpus();
    this.samples++;
  }

  private async sampleGpus(): Promise<void> {
    const result = await queryNvidiaSmi(this.nvidiaSmi);
    if (result.kind === "missing") {
      this.gpuAvailable = false;
      warn(
        "system.nvidiaSmiMissing",
        `${this.nvidiaSmi} was not found on PATH; the system monitor logs CPU and memory only (no GPU metrics)`,
      );
      return;
    }
    if (result.kind === "failed") {
      this.gpuFailures++;
      reportError(
        "system.nvidiaSmiFailed",
        `${result.message}; GPU metrics are missing from this sample (tried again at the next one, failures counted)`,
      );
      return;
    }
    for (const gpu of result.gpus) this.recordGpu(gpu);
  }

  private recordGpu(gpu: GpuSample): void {
    this.gpuNames.set(gpu.index, gpu.name);
    const prefix = `gpu/${gpu.index}`;
    if (gpu.utilizationPercent !== undefined)
      this.record(`${prefix}/utilization_percent`, gpu.utilizationPercent, "mean");
    if (gpu.memoryUsedMiB !== undefined) this.record(`${prefix}/memory_used_mib`, gpu.memoryUsedMiB, "max");
    if (gpu.memoryTotalMiB !== undefined) this.record(`${prefix}/memory_total_mib`, gpu.memoryTotalMiB, "max");
    if (gpu.memoryUsedMiB !== undefined && gpu.memoryTotalMiB !== undefined && gpu.memoryTotalMiB > 0) {
      this.record(`${prefix}/memory_used_percent`, (gpu.memoryUsedMiB / gpu.memoryTotalMiB) * 100, "max");
    }
  }

  /** Names of the GPUs seen, by index. */
  get gpus(): ReadonlyMap<number, string> {
    return this.gpuNames;
  }

  private async logSamples(): Promise<readonly Metric[]> {
    const states = this.collector.takeStates();
    if (states.length === 0) return [];
    const step = this.step++;
    if (this.loggerPromise === null && currentRun()?.role === "rank") {
      // A rank has no global backends (and creating a logger here would start a second run): its
      // samples go to the controller with the next flush, which logs them on the monitor's axis.
      const timestamp = Date.now();
      queueOffCycleLog({ axis: SYSTEM_AXIS, step, timestamp, states });
      return reduceStates(states, { step, timestamp, axis: SYSTEM_AXIS }).metrics;
    }
    try {
      this.loggerPromise ??= getOrCreateMetricLogger();
      const logger = await this.loggerPromise;
      return await logger.logDirect(states, { step, axis: SYSTEM_AXIS });
    } catch (error) {
      reportError("system.log", `system monitor could not log at system/step ${step}: ${String(error)}`);
      return [];
    }
  }
}

function machineTimes(): { total: number; idle: number } {
  let total = 0;
  let idle = 0;
  for (const cpu of cpus()) {
    const t = cpu.times;
    total += t.user + t.nice + t.sys + t.idle + t.irq;
    idle += t.idle;
  }
  return { total, idle };
}

/** Create and start a system monitor. */
export function startSystemMonitor(options: SystemMonitorOptions = {}): SystemMonitor {
  return new SystemMonitor(options).start();
}
