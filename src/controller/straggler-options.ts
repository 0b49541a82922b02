/**
 * The options of straggler attribution (`MetricLoggerOptions.stragglers`, docs/stragglers.md):
 * their defaults, and the check that resolves them (a TypeError saying what is valid).
 */
import { describeValue, rejectUnknownOptions } from "../core/settings.js";
import { STANDS_OUT_DEFAULTS } from "../core/stands-out.js";

/** Options of straggler attribution (`MetricLoggerOptions.stragglers`; `false` turns it off). */
export interface StragglerOptions {
  /** How many ranks are named per measure at most (default 3). */
  readonly topK?: number;
  /** A rank is named when it exceeds the median rank by more than this share of the median step time (default 0.25)… */
  readonly tolerance?: number;
  /** …and by more than this many ms (default 20). */
  readonly minExcessMs?: number;
  /** Flushes in the chronic window (default 10, at most 30): a rank named in at least half of them is chronic. */
  readonly chronicWindow?: number;
  /** The Tracer (prefix) whose runs are the step; default: the one the ranks spent the most time in. */
  readonly tracer?: string;
}

/** The options with every default filled in. */
export type ResolvedStragglerOptions = Required<Omit<StragglerOptions, "tracer">> & Pick<StragglerOptions, "tracer">;

export const DEFAULT_STRAGGLER_OPTIONS: ResolvedStragglerOptions = { ...STANDS_OUT_DEFAULTS, chronicWindow: 10 };

/** The longest chronic window: a rank's history is the bits of one number. */
const MAX_WINDOW = 30;

const OPTIONS = ["topK", "tolerance", "minExcessMs", "chronicWindow", "tracer"];

function numberIn(name: string, value: unknown, fallback: number, min: number, max: number, integer: boolean): number {
  if (value === undefined) return fallback;
  if (
    typeof value !== "number" ||
    !Number.isFinite(value) ||
    value < min ||
    value > max ||
    (integer && !Number.isInteger(value))
  ) {
    throw new TypeError(
      `stragglers.${name} must be ${integer ? "an integer" : "a number"} from ${min} to ${max}, got ${describeValue(value)}`,
    );
  }
  return value;
}

/** Check `MetricLoggerOptions.stragglers` (a TypeError saying what is valid); null when attribution is off. */
export function resolveStragglerOptions(value: unknown): ResolvedStragglerOptions | null {
  if (value === false) return null;
  if (value === undefined || value === true) return DEFAULT_STRAGGLER_OPTIONS;
  if (value === null || typeof value !== "object")
    throw new TypeError(
      `stragglers must be false or an object of options (${OPTIONS.join(", ")}), got ${describeValue(value)}`,
    );
  rejectUnknownOptions("stragglers", value, OPTIONS);
  const v: Record<string, unknown> = { ...value };
  const tracer = v["tracer"];
  if (tracer !== undefined && (typeof tracer !== "string" || tracer.length === 0))
    throw new TypeError(
      `stragglers.tracer must be a Tracer's prefix (a non-empty string), got ${describeValue(tracer)}`,
    );
  const d = DEFAULT_STRAGGLER_OPTIONS;
  return {
    topK: numberIn("topK", v["topK"], d.topK, 1, 100, true),
    tolerance: numberIn("tolerance", v["tolerance"], d.tolerance, 0, 100, false),
    minExcessMs: numberIn("minExcessMs", v["minExcessMs"], d.minExcessMs, 0, 3_600_000, false),
    chronicWindow: numberIn("chronicWindow", v["chronicWindow"], d.chronicWindow, 1, MAX_WINDOW, true),
    ...(typeof tracer === "string" ? { tracer } : {}),
  };
}
