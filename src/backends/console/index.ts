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
 * the raw value as recorded: `[rank] [Process-localRank/localWorldSize] time INFO key: value`
 * (the controller's own: `[controller] [Process]`; a user worker thread's add `[thread t]`).
 * Keys ending in `__count` (the weights of `stats.scalar`) are not shown. With
 * `layout: "grid"`, AReaL's table instead: `pairsPerRow` (4) key/value pairs per row, box-drawn.
 */
import { jsonText, numberText } from "../../core/json.js";
import type { Metric, SampleBatch, StreamRecord } from "../../core/metric.js";
import { GLOBAL_DISPLAY_NAME, roleOf } from "../../core/rank-identity.js";
import type { Backend, BackendContext, BackendOptions } from "../backend.js";
import { registerBackend } from "../backend.js";
import { CONSOLE_OPTIONS } from "./options.js";
import {
  DROPPED_KEY_RECORDS_KEY,
  isInternalKey,
  RANKS_EXPECTED_KEY,
  RANKS_REPORTING_KEY,
  STREAM_DROPPED_KEY,
} from "../../core/internal-keys.js";

/**
 * A reduced value as the console prints it: integral values keep a decimal point (`4.0`), like
 * Python's floats; others show 6 significant digits, so columns stay readable. The exact value is
 * in every other backend.
 */
function formatReducedValue(value: number): string {
  if (Number.isInteger(value) && Math.abs(value) < 2 ** 53) return value.toFixed(1);
  if (!Number.isFinite(value)) return String(value);
  // From 2^53 up in exponent form (`9.22337e+18`): zero-padded digits would read as an exact integer.
  return numberText(Number(value.toPrecision(6)));
}

/** `YYYY-MM-DD HH:MM:SS` in local time, as Python's logging prints it. */
function formatLocalTime(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number): string => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

const RULE = "===============";

/** The controller's rank counts: printed only at a step where a rank was missing (stderr names it too). */
const RANK_COUNT_KEYS = new Set([RANKS_EXPECTED_KEY, RANKS_REPORTING_KEY]);

function allRanksReported(metrics: readonly Metric[]): boolean {
  const expected = metrics.find((m) => m.key === RANKS_EXPECTED_KEY)?.value;
  const reporting = metrics.find((m) => m.key === RANKS_REPORTING_KEY)?.value;
  return expected === reporting;
}

/** The table printed for one flush. */
function formatMetricsTable(displayName: string, step: number, metrics: readonly Metric[]): string {
  const width = metrics.reduce((w, m) => Math.max(w, m.key.length + 1), 0);
  const lines = [`=== [${displayName}] - METRICS STEP ${step} ===`];
  for (const m of metrics) lines.push(`${`${m.key}:`.padEnd(width)} ${formatReducedValue(m.value)}`);
  lines.push(RULE);
  return `${lines.join("\n")}\n`;
}

/** Python's `format(value, ".4e")`: `2.5000e-01`, `nan`, `inf` (AReaL's table). */
export function formatScientific(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  const text = value.toExponential(4);
  const e = text.indexOf("e");
  const mantissa = text.slice(0, e);
  const exponent = text.slice(e + 1);
  const sign = exponent.startsWith("-") ? "-" : "+";
  return `${mantissa}e${sign}${exponent.replace(/^[+-]/, "").padStart(2, "0")}`;
}

/**
 * AReaL's console table: `pairsPerRow` key/value pairs per row, filled column by column, in a
 * box-drawn grid (tabulate's `fancy_grid`), values in `.4e`.
 */
export function formatMetricsGrid(
  displayName: string,
  step: number,
  metrics: readonly Metric[],
  pairsPerRow = 4,
): string {
  const rows = Math.ceil(metrics.length / pairsPerRow);
  const cells: string[][] = [];
  for (let r = 0; r < rows; r++) {
    const row: string[] = [];
    for (let c = 0; c < pairsPerRow; c++) {
      const m = metrics[r + c * rows];
      row.push(m === undefined ? "" : m.key, m === undefined ? "" : formatScientific(m.value));
    }
    cells.push(row);
  }
  const columns = pairsPerRow * 2;
  const widths = Array.from({ length: columns }, (_, c) =>
    cells.reduce((w, row) => Math.max(w, (row[c] ?? "").length), 0),
  );
  // Drop trailing columns that are empty in every row (fewer metrics than pairs per row).
  let used = columns;
  while (used > 2 && widths[used - 1] === 0 && widths[used - 2] === 0) used -= 2;
  const rule = (left: string, fill: string, mid: string, right: string): string =>
    `${left}${widths
      .slice(0, used)
      .map((w) => fill.repeat(w + 2))
      .join(mid)}${right}`;
  const lines = [`=== [${displayName}] - METRICS STEP ${step} ===`, rule("╒", "═", "╤", "╕")];
  cells.forEach((row, r) => {
    const text = row
      .slice(0, used)
      .map((cell, c) => (c % 2 === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0)));
    lines.push(`│ ${text.join(" │ ")} │`);
    if (r < cells.length - 1) lines.push(rule("├", "─", "┼", "┤"));
  });
  lines.push(rule("╘", "═", "╧", "╛"));
  return `${lines.join("\n")}\n`;
}

/** Console options: `layout: "list"` (default, Forge's) or `"grid"` (AReaL's), `pairsPerRow` for the grid (default 4). */
function consoleLayout(options: BackendOptions): { grid: boolean; pairsPerRow: number } {
  return {
    grid: options["layout"] === "grid",
    pairsPerRow: typeof options["pairsPerRow"] === "number" ? options["pairsPerRow"] : 4,
  };
}

class ConsoleBackend implements Backend {
  private displayName = GLOBAL_DISPLAY_NAME;
  private streamPrefix = "";
  private readonly layout: { grid: boolean; pairsPerRow: number };

  constructor(options: BackendOptions) {
    this.layout = consoleLayout(options);
  }

  init(context: BackendContext): void {
    this.displayName = context.displayName;
    const id = context.identity;
    // The controller's own raw values are never shown as a rank's (docs/DESIGN.md, "Identity").
    // Forge's prefix for a rank (its place in its replica); the controller's own is never a rank's.
    this.streamPrefix =
      roleOf(id) === "controller"
        ? `[controller] [${id.processName}]`
        : `[${id.localRank}] [${id.processName}-${id.localRank}/${id.localWorldSize}]`;
  }

  logBatch(metrics: readonly Metric[], step: number): void {
    // Internal keys (the shared rule) are shown only when they say something: a missing rank, a drop.
    const visible = metrics.filter(
      // The stream's drop count is shown once something was dropped.
      (m) =>
        !isInternalKey(m.key) ||
        (RANK_COUNT_KEYS.has(m.key) && !allRanksReported(metrics)) ||
        (m.key === STREAM_DROPPED_KEY && m.value !== 0) ||
        m.key === DROPPED_KEY_RECORDS_KEY,
    );
    if (visible.length === 0) return;
    process.stdout.write(
      this.layout.grid
        ? formatMetricsGrid(this.displayName, step, visible, this.layout.pairsPerRow)
        : formatMetricsTable(this.displayName, step, visible),
    );
  }

  logStream(batch: readonly StreamRecord[]): void {
    let text = "";
    for (const r of batch)
      text += `${this.streamPrefix}${r.thread === 0 ? "" : ` [thread ${r.thread}]`} ${formatLocalTime(r.timestamp)} INFO ${r.key}: ${numberText(r.value)}\n`;
    if (text.length > 0) process.stdout.write(text);
  }

  logSamples(samples: SampleBatch, step: number): void {
    const keys = Object.keys(samples).sort();
    if (keys.length === 0) return;
    const lines = [`=== [${this.displayName}] - SAMPLE LOGS STEP ${step} ===`];
    for (const key of keys) {
      const records = samples[key] ?? [];
      lines.push(`[${key}] (${records.length} sample${records.length === 1 ? "" : "s"})`);
      for (const r of records) lines.push(jsonText(r, "string", "  "));
    }
    lines.push(RULE);
    process.stdout.write(`${lines.join("\n")}\n`);
  }
}

registerBackend("console", (options) => new ConsoleBackend(options), { options: CONSOLE_OPTIONS });
