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

/** The suffix of the weight `stats.scalar` logs beside each mean. */
export const COUNT_KEY_SUFFIX = "__count";

/** True for a key rankscope records for itself (see the module comment). */
export function isInternalKey(key: string): boolean {
  return key.startsWith(INTERNAL_KEY_PREFIX) || key.endsWith(COUNT_KEY_SUFFIX);
}
