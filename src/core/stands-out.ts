/**
 * When one rank's figure stands out from the others' (docs/stragglers.md): its excess over the
 * median rank is larger than all three of a floor (`minExcess`), `tolerance` × a scale (the
 * median step time, the median TTFT) and `MAD_K` robust standard deviations of the figure across
 * the ranks (the median absolute deviation × 1.4826). The controller's straggler attribution
 * (step time, lateness, others' wait) and the dashboard's slowest replicas (TTFT per replica,
 * docs/inference.md) both judge with this one rule.
 */

/** Robust standard deviations (MAD × 1.4826) an excess must pass as well. */
export const MAD_K = 5;
export const MAD_TO_SIGMA = 1.4826;
/** Fewer ranks than this with a figure cannot name anyone (no median worth comparing with). */
export const MIN_RANKS_COMPARED = 3;

/** The rule's defaults: ranks named per measure at most, the share of the scale, the floor in ms. */
export const STANDS_OUT_DEFAULTS = { topK: 3, tolerance: 0.25, minExcessMs: 20 } as const;

/** The bar an excess over the median must pass: max(minExcess, tolerance × scale, MAD_K robust σ). */
export function standsOutBar(minExcess: number, tolerance: number, scale: number, mad: number): number {
  const spread = Number.isFinite(mad) ? MAD_K * MAD_TO_SIGMA * mad : 0;
  return Math.max(minExcess, tolerance * (Number.isFinite(scale) ? scale : 0), spread);
}

/** The median of the finite values (NaN when none): a small list's, by sorting a copy. */
export function medianOfFinite(values: readonly number[]): number {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return NaN;
  const mid = n >> 1;
  return n % 2 === 1 ? (sorted[mid] ?? NaN) : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2;
}

/** One figure judged: its excess over the median and whether it stands out. */
export interface Standing {
  readonly value: number;
  readonly excess: number;
  readonly standsOut: boolean;
}

/**
 * Judge a few figures (one per rank, NaN where none) against each other, with the figures' own
 * median as the scale: the median, the bar, how many had a figure, and each one's standing.
 * Nobody stands out among fewer than `MIN_RANKS_COMPARED`.
 */
export function judgeFigures(
  values: readonly number[],
  minExcess: number,
  tolerance: number = STANDS_OUT_DEFAULTS.tolerance,
): { median: number; bar: number; n: number; standings: Standing[] } {
  const median = medianOfFinite(values);
  const mad = medianOfFinite(values.map((v) => Math.abs(v - median)));
  const n = values.filter((v) => Number.isFinite(v)).length;
  const bar = standsOutBar(minExcess, tolerance, median, mad);
  const standings = values.map((value) => {
    const excess = value - median;
    return { value, excess, standsOut: n >= MIN_RANKS_COMPARED && excess > bar };
  });
  return { median, bar, n, standings };
}
