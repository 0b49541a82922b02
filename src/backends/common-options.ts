/**
 * The options every backend config takes besides its own, declared once: `CommonBackendOptions`,
 * `BackendConfigBase`, the names config validation knows and their checks all come from this shape.
 */
import { z } from "zod";
import { LOGGING_MODES } from "../core/metric.js";
import { says, type OptionsOf } from "./option-schema.js";

const EVERY = "every must be a positive integer (log every N-th flush)";
const DEADLINE = "deadlineMs must be a positive integer (milliseconds one call of this backend may take)";

/** The common options' shape (see `CommonBackendOptions` for their meaning). */
export const COMMON_OPTION_SHAPE = {
  /** Required: how this backend sees the ranks. */
  loggingMode: z.enum(LOGGING_MODES, {
    errorMap: (_issue, ctx) => ({
      message:
        ctx.data === undefined
          ? `loggingMode is required; valid: ${LOGGING_MODES.join(", ")}`
          : `loggingMode ${JSON.stringify(ctx.data)} is not valid; valid: ${LOGGING_MODES.join(", ")}`,
    }),
  }),
  /** With a per-rank mode: ranks share one run (e.g. one W&B run) instead of one each. */
  perRankShareRun: z.boolean(says(() => "perRankShareRun must be true or false")).optional(),
  /**
   * Log only every N-th flush. The skipped flushes are not lost: their values are merged into the
   * one that is logged (a `mean` over all N flushes, a `sum` of all of them).
   */
  every: z
    .number(says(() => EVERY))
    .int()
    .min(1)
    .optional(),
  /** The registered backend to use, when the config key is an alias (two `jsonl` backends, say). */
  type: z
    .string(says(() => "type must name a registered backend"))
    .min(1)
    .optional(),
  /**
   * How long one call of this backend (`init`, `logBatch`, `logStream`, `logSamples`,
   * `logHistograms`, `logHyperparams`, `flushed`, `finish`) may take before the caller goes on
   * without it (reported and counted). Default: the logger's `backendDeadlineMs` (10 000 ms).
   */
  deadlineMs: z
    .number(says(() => DEADLINE))
    .int()
    .min(1)
    .optional(),
};

/** The common options' schema (config validation parses every entry with it first). */
export const COMMON_OPTIONS_SCHEMA = z.object(COMMON_OPTION_SHAPE);

/** Their names, in declaration order (for "unknown option …; valid: …"). */
export const COMMON_OPTION_NAMES: readonly string[] = Object.keys(COMMON_OPTION_SHAPE);

/** Options every backend accepts, besides its own. */
export type CommonBackendOptions = OptionsOf<typeof COMMON_OPTION_SHAPE>;
