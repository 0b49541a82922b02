/**
 * Keeping a live line's points bounded in the page: past a cap, the older points are thinned to
 * the first, min, max and last of each bucket (as the server downsamples), so spikes stay visible
 * and the newest points stay raw. A watched run's memory then stays flat however long it runs.
 */

/** Points a live line may hold before it is thinned. */
export const LIVE_POINT_CAP = 6000;
/** What a thinned line keeps, about: `keep` thinned older points plus the newest `rawTail` raw ones. */
const THINNED_KEEP = 2000;
const RAW_TAIL = 1000;

/** Arrays of one line, same length. */
interface Points {
  steps: number[];
  times: number[];
  values: number[];
}

/**
 * Thin `p` when it holds more than `cap` points: the points before the newest `rawTail` become at
 * most `keep` (first, min, max, last of each bucket, in order). Non-finite values are always kept.
 * Returns whether anything was dropped.
 */
export function thinPoints(p: Points, cap = LIVE_POINT_CAP, keep = THINNED_KEEP, rawTail = RAW_TAIL): boolean {
  const n = p.values.length;
  if (n <= cap) return false;
  const head = n - rawTail;
  const buckets = Math.max(1, Math.floor(keep / 4));
  const size = head / buckets;
  const chosen: number[] = [];
  for (let b = 0; b < buckets; b++) {
    const from = Math.floor(b * size);
    const to = Math.min(head, Math.floor((b + 1) * size));
    if (to <= from) continue;
    let lo = -1;
    let hi = -1;
    const odd: number[] = [];
    for (let i = from; i < to; i++) {
      const v = p.values[i] ?? NaN;
      if (!Number.isFinite(v)) {
        odd.push(i);
        continue;
      }
      if (lo === -1 || v < (p.values[lo] ?? 0)) lo = i;
      if (hi === -1 || v > (p.values[hi] ?? 0)) hi = i;
    }
    const picks = new Set([from, to - 1, ...odd]);
    if (lo !== -1) picks.add(lo);
    if (hi !== -1) picks.add(hi);
    chosen.push(...[...picks].sort((a, b2) => a - b2));
  }
  for (let i = head; i < n; i++) chosen.push(i);
  p.steps = chosen.map((i) => p.steps[i] ?? 0);
  p.times = chosen.map((i) => p.times[i] ?? 0);
  p.values = chosen.map((i) => p.values[i] ?? NaN);
  return true;
}
