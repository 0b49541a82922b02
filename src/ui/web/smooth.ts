/**
 * TensorBoard's smoothing: an exponential moving average debiased like Adam's moments, so the
 * first points are not dragged towards zero. Non-finite values pass through unsmoothed and do
 * not poison the average. `weight` 0 returns the values as they are.
 */
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
