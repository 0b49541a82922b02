/**
 * The perf tracer's options: their types, their checks (a TypeError saying what is valid), and
 * the environment variables they fall back to at construction, through the one settings resolver.
 */
import { describeValue } from "../core/collector.js";
import { envFlag, envInteger } from "../core/env.js";
import { resolveSetting, type SettingKind } from "../core/settings.js";
import type { RankFileOptions } from "./rank-file.js";
import { parseRankSelection, type RankSelection } from "./rank-selection.js";
import { TRACE_CATEGORIES, type TraceCategory } from "./trace-events.js";

/** Options of a perf tracer (`configurePerfTracer`, or `new PerfTracer`). */
export interface PerfTracerOptions extends RankFileOptions {
  /** Record at all (default true; `RANKSCOPE_DISABLE_TRACING` turns it off). */
  enabled?: boolean;
  /** Ranks that write traces: `"all"`, `"0,2"`, `"0-3"`, or an array (default env `RANKSCOPE_TRACE_RANKS`, else all). */
  ranks?: string | readonly number[];
  /** How often buffered events are written, in ms (default 1000, env `RANKSCOPE_TRACE_SAVE_INTERVAL_MS`). */
  saveIntervalMs?: number;
  /** Events held in memory between saves; past it they are dropped and counted (default 100000). */
  maxBufferedEvents?: number;
}

/** Options of one `traceScope`. */
export interface TraceScopeOptions {
  /** What kind of work (default `"misc"`). */
  category?: TraceCategory;
  /** Extra fields shown on the span (JSON-serialisable). */
  args?: Record<string, unknown>;
}

/** Counts of what a perf tracer did. */
export interface PerfTracerStats {
  /** Events recorded (kept or not). */
  recorded: number;
  /** Events dropped because the buffer was full. */
  dropped: number;
  /** Events handed to the file. */
  written: number;
  /** Events waiting in memory. */
  buffered: number;
}

/** A perf tracer's settings, every one resolved. */
export interface PerfTracerSettings {
  readonly enabled: boolean;
  readonly selection: RankSelection;
  readonly saveIntervalMs: number;
  readonly maxBufferedEvents: number;
  /** Where the rank file is (unset parts come from the current run). */
  readonly target: RankFileOptions;
}

/** The settings of a tracer made without options and without environment variables. */
export const DEFAULT_PERF_SETTINGS: PerfTracerSettings = {
  enabled: true,
  selection: "all",
  saveIntervalMs: 1000,
  maxBufferedEvents: 100_000,
  target: {},
};

/**
 * `options` applied over `current`: every option is checked first (a TypeError for the first bad
 * one, `current` unchanged). With `fromEnv` (at construction) unset options come from the
 * environment; otherwise they keep their current value.
 */
export function resolvePerfSettings(
  options: PerfTracerOptions,
  current: PerfTracerSettings,
  fromEnv: boolean,
): PerfTracerSettings {
  if (options === null || typeof options !== "object")
    throw new TypeError(`perf tracer options must be an object, got ${describeValue(options)}`);
  const { runDir, rank, role } = options;
  if (rank !== undefined && (!Number.isInteger(rank) || rank < 0))
    throw new TypeError(`perf tracer rank must be an integer ≥ 0, got ${describeValue(rank)}`);
  if (runDir !== undefined && (typeof runDir !== "string" || runDir.length === 0))
    throw new TypeError(`perf tracer runDir must be a non-empty path, got ${describeValue(runDir)}`);
  if (role !== undefined && typeof role !== "string")
    throw new TypeError(`perf tracer role must be a string such as "Trainer", got ${describeValue(role)}`);
  const selection =
    options.ranks !== undefined
      ? parseRankSelection(options.ranks, "perf tracer ranks")
      : fromEnv
        ? rankSelectionFromEnv()
        : current.selection;
  const saveIntervalMs =
    options.saveIntervalMs !== undefined
      ? positiveInteger(options.saveIntervalMs, "saveIntervalMs")
      : fromEnv
        ? envInteger("RANKSCOPE_TRACE_SAVE_INTERVAL_MS", 1000, 1)
        : current.saveIntervalMs;
  const maxBufferedEvents =
    options.maxBufferedEvents !== undefined
      ? positiveInteger(options.maxBufferedEvents, "maxBufferedEvents")
      : current.maxBufferedEvents;
  const enabled =
    options.enabled !== undefined
      ? options.enabled === true
      : fromEnv
        ? !envFlag("RANKSCOPE_DISABLE_TRACING")
        : current.enabled;
  const target = {
    runDir: runDir ?? current.target.runDir,
    rank: rank ?? current.target.rank,
    role: role ?? current.target.role,
  };
  return { enabled, selection, saveIntervalMs, maxBufferedEvents, target };
}

const CATEGORY_SET: ReadonlySet<unknown> = new Set(TRACE_CATEGORIES);

function isTraceCategory(value: unknown): value is TraceCategory {
  return CATEGORY_SET.has(value);
}

/** A scope's category, checked (`"misc"` when unset). */
export function checkCategory(category: unknown, name: string): TraceCategory {
  if (category === undefined) return "misc";
  if (isTraceCategory(category)) return category;
  throw new TypeError(
    `traceScope("${name}") category ${describeValue(category)} is not valid; valid: ${TRACE_CATEGORIES.join(", ")}`,
  );
}

function positiveInteger(value: unknown, name: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1)
    throw new TypeError(`perf tracer ${name} must be an integer ≥ 1, got ${describeValue(value)}`);
  return value;
}

/** `RANKSCOPE_TRACE_RANKS`, through the one settings resolver (an invalid value is a TypeError). */
const RANK_SELECTION_KIND: SettingKind<RankSelection> = {
  valid: 'a rank selection such as "0", "0,2", "1-3" or "all"',
  fromOption: () => undefined,
  fromEnv: (raw) => {
    try {
      return parseRankSelection(raw, "RANKSCOPE_TRACE_RANKS");
    } catch {
      return undefined;
    }
  },
};

function rankSelectionFromEnv(): RankSelection {
  return resolveSetting<RankSelection>(
    { owner: "perf tracer", option: "ranks", env: "RANKSCOPE_TRACE_RANKS", kind: RANK_SELECTION_KIND, fallback: "all" },
    undefined,
  );
}
