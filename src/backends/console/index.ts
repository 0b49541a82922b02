/**
 * `console`: readable tables on stdout, in Forge's format.
 *
 * ```
 * === [GlobalReduce] - METRICS STEP 0 ===
 * loss:   0.25
 * reward: 1.0
 * ===============
 * ```
 * Keys are sorted and values aligned; reduced values print as floats (`4.0`), stream lines print
 * the raw value as recorded: `[rank] [Process-localRank/localWorldSize] time INFO key: value`.
 */
import type { Metric, SampleBatch, StreamRecord } from "../../core/metric.js";
import type { Backend, BackendContext } from "../backend.js";
import { registerBackend } from "../backend.js";

/**
 * A reduced value as the console prints it: integral values keep a decimal point (`4.0`), like
 * Python's floats; others show 6 significant digits, so columns stay readable. The exact value is
 * in every other backend.
 */
export function formatReducedValue(value: number): string {
  if (Number.isInteger(value) && Math.abs(value) < 1e16) return value.toFixed(1);
  if (!Number.isFinite(value)) return String(value);
  return String(Number(value.toPrecision(6)));
}

/** `YYYY-MM-DD HH:MM:SS` in local time, as Python's logging prints it. */
export function formatLocalTime(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number): string => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

const RULE = "===============";

/** The controller's rank counts: printed only at a step where a rank was missing (stderr names it too). */
const RANK_COUNT_KEYS = new Set(["rankscope/ranks_expected", "rankscope/ranks_reporting"]);

function allRanksReported(metrics: readonly Metric[]): boolean {
  const expected = metrics.find((m) => m.key === "rankscope/ranks_expected")?.value;
  const reporting = metrics.find((m) => m.key === "rankscope/ranks_reporting")?.value;
  return expected === reporting;
}

/** The table printed for one flush. */
export function formatMetricsTable(displayName: string, step: number, metrics: readonly Metric[]): string {
  const width = metrics.reduce((w, m) => Math.max(w, m.key.length + 1), 0);
  const lines = [`=== [${displayName}] - METRICS STEP ${step} ===`];
  for (const m of metrics) lines.push(`${`${m.key}:`.padEnd(width)} ${formatReducedValue(m.value)}`);
  lines.push(RULE);
  return `${lines.join("\n")}\n`;
}

class ConsoleBackend implements Backend {
  private displayName = "GlobalReduce";
  private streamPrefix = "";

  init(context: BackendContext): void {
    this.displayName = context.displayName;
    const id = context.identity;
    this.streamPrefix = `[${id.localRank}] [${id.processName}-${id.localRank}/${id.localWorldSize}]`;
  }

  logBatch(metrics: readonly Metric[], step: number): void {
    const visible = metrics.filter((m) => !m.key.endsWith("__count") && !(RANK_COUNT_KEYS.has(m.key) && allRanksReported(metrics)));
    if (visible.length === 0) return;
    process.stdout.write(formatMetricsTable(this.displayName, step, visible));
  }

  logStream(batch: readonly StreamRecord[]): void {
    let text = "";
    for (const r of batch) text += `${this.streamPrefix} ${formatLocalTime(r.timestamp)} INFO ${r.key}: ${String(r.value)}\n`;
    if (text.length > 0) process.stdout.write(text);
  }

  logSamples(samples: SampleBatch, step: number): void {
    const keys = Object.keys(samples).sort();
    if (keys.length === 0) return;
    const lines = [`=== [${this.displayName}] - SAMPLE LOGS STEP ${step} ===`];
    for (const key of keys) {
      const records = samples[key] ?? [];
      lines.push(`[${key}] (${records.length} sample${records.length === 1 ? "" : "s"})`);
      for (const r of records) lines.push(JSON.stringify(r, null, 2));
    }
    lines.push(RULE);
    process.stdout.write(`${lines.join("\n")}\n`);
  }
}

registerBackend("console", () => new ConsoleBackend());
