/**
 * Which metric keys are rankscope's own bookkeeping rather than the user's measurements: the
 * weights `stats.scalar` logs beside a mean (`…__count`) and everything under `rankscope/`
 * (`rankscope/ranks_expected`, `rankscope/ranks_reporting`, `rankscope/stream_dropped`).
 *
 * The one rule every face applies: `tail`, `export` and the TensorBoard backend leave them out
 * unless asked (`--internal`, `internal: true`), the dashboard hides them behind a toggle, and the
 * console shows them only when they say something (a missing rank, a drop).
 */

/** The prefix of the keys rankscope records about itself. */
export const INTERNAL_KEY_PREFIX = "rankscope/";

/** How many ranks the controller expected at a flush (recorded at every flush of a job with ranks). */
export const RANKS_EXPECTED_KEY = "rankscope/ranks_expected";

/** How many of them answered by the flush deadline. */
export const RANKS_REPORTING_KEY = "rankscope/ranks_reporting";

/** Raw stream records dropped because the ring was full (a `sum`, per flush). */
export const STREAM_DROPPED_KEY = "rankscope/stream_dropped";

/** Followed by a backend's config name: the calls it did not get since the last flush. */
export const BACKEND_UNDELIVERED_KEY_PREFIX = "rankscope/backend_undelivered/";

/**
 * Followed by a `per_rank_no_reduce` backend's config name: the raw stream records queued for it
 * and not yet delivered when a rank answered the flush (summed over ranks; logged from the first
 * flush it was behind at).
 */
export const STREAM_BACKLOG_KEY_PREFIX = "rankscope/stream_backlog/";

/** Followed by such a backend's config name: the records dropped for it since the last flush because its backlog was full. */
export const STREAM_BACKEND_DROPPED_KEY_PREFIX = "rankscope/stream_backend_dropped/";

/** The suffix of the weight `stats.scalar` logs beside each mean. */
export const COUNT_KEY_SUFFIX = "__count";

/** True for a key rankscope records for itself (see the module comment). */
export function isInternalKey(key: string): boolean {
  return key.startsWith(INTERNAL_KEY_PREFIX) || key.endsWith(COUNT_KEY_SUFFIX);
}

/**
 * The prefix of straggler attribution's keys (docs/stragglers.md): `skew`, `median_step_ms`,
 * `median_wait_ms`, `slow_ranks`, `chronic_ranks`, and per named rank `step_ms/{rankName}@{host}`,
 * `lateness_ms/…`, `caused_wait_ms/…`, `chronic/…`.
 */
export const STRAGGLER_KEY_PREFIX = "rankscope/stragglers/";
