/**
 * TensorBoard's smoothing: an exponential moving average debiased like Adam's moments, so the
 * first points are not dragged towards zero. Non-finite values pass through unsmoothed and do
 * not poison the average. `weight` 0 returns the values as they are.
 *
 * A line is smoothed at most over a tenth of its points (`smoothingFor`): the EMA's window,
 * about 1 / (1 − w) points, is held to n / 10, so a short run is drawn as its values (10 points
 * or fewer: not smoothed at all) instead of a bold line that lags its own points.
 */

/** The most of a line's points one smoothing window may span. */
export const MAX_WINDOW_FRACTION = 0.1;

export function smoothDebiasedEma(values: readonly (number | null)[], weight: number): (number | null)[] {
  if (!(weight > 0)) return values.slice();
  const w = Math.min(weight, 0.999);
  let last = 0;
  let count = 0;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return v;
    last = last * w + (1 - w) * v;
    count++;
    return last / (1 - Math.pow(w, count));
  });
}

/** The weight a line of `points` finite values is smoothed with: the slider's `weight`, lowered so its window (1 / (1 − w) points) spans at most a tenth of them. */
export function smoothingFor(weight: number, points: number): number {
  if (!(weight > 0)) return 0;
  const cap = 1 - 1 / (MAX_WINDOW_FRACTION * points);
  return Math.max(0, Math.min(weight, 0.999, cap));
}

/** A line's values as drawn smoothed at the slider's `weight` (`smoothingFor` its number of finite values). */
export function smoothLine(values: readonly (number | null)[], weight: number): (number | null)[] {
  let points = 0;
  for (const v of values) if (v !== null && Number.isFinite(v)) points++;
  return smoothDebiasedEma(values, smoothingFor(weight, points));
}
