/**
 * Which metric keys are rankscope's own bookkeeping rather than the user's measurements: the
 * weights `stats.scalar` logs beside a mean (`…__count`) and everything under `rankscope/`
 * (`rankscope/ranks_expected`, `rankscope/ranks_reporting`, `rankscope/stream_dropped`).
 *
 * The one rule every face applies: `tail`, `export` and the TensorBoard, W&B, Prometheus and
 * OTLP backends leave them out unless asked (`--internal`, `internal: true`), the dashboard hides
 * them behind a toggle, the console shows them only when they say something (a missing rank, a
 * drop), and the store and JSONL files keep them (they are the full record).
 */

/** The prefix of the keys rankscope records about itself. */
const INTERNAL_KEY_PREFIX = "rankscope/";

/** How many ranks the controller expected at a flush (recorded at every flush of a job with ranks). */
export const RANKS_EXPECTED_KEY = "rankscope/ranks_expected";

/** How many of them answered by the flush deadline. */
export const RANKS_REPORTING_KEY = "rankscope/ranks_reporting";

/**
 * How many ranks the run has lost so far (their process or thread ended without being shut down,
 * or, over NATS, they fell silent and have not answered again): recorded at every flush once one is.
 */
export const RANKS_LOST_KEY = "rankscope/ranks_lost";

/** Raw stream records dropped because the ring was full (a `sum`, per flush). */
export const STREAM_DROPPED_KEY = "rankscope/stream_dropped";

/**
 * Followed by a kind (`unauthenticated`, `replayed`, `stale`, `malformed`, `foreign`,
 * `invalidState`, `invalidName`, `refused`): the messages each process rejected since its last
 * flush (a `sum`), so an attack on a run shows in its data.
 */
export const REJECTED_KEY_PREFIX = "rankscope/rejected/";

/**
 * Values dropped because their key was new past a process's key bound (`RANKSCOPE_MAX_KEYS`),
 * summed over the ranks that answered, each rank's count since it started (logged once any is).
 */
export const DROPPED_KEY_RECORDS_KEY = "rankscope/dropped_key_records";

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

/** Alerts the webhook did not get since the last flush (a `sum`; logged from the first one it missed; docs/alerts.md). */
export const ALERTS_UNDELIVERED_KEY = "rankscope/alerts_undelivered";

/** The suffix of the weight `stats.scalar` logs beside each mean. */
const COUNT_KEY_SUFFIX = "__count";

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

/**
 * `items` without rankscope's own keys, unless `include` (a backend's `internal: true`). Returns
 * `items` itself when there is nothing to leave out, so the common flush allocates nothing.
 */
export function withoutInternalKeys<T extends { readonly key: string }>(
  items: readonly T[],
  include: boolean,
): readonly T[] {
  if (include || !items.some((item) => isInternalKey(item.key))) return items;
  return items.filter((item) => !isInternalKey(item.key));
}
