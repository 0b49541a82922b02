/**
 * The last N values of a key with their median and median absolute deviation (MAD), for the
 * `spike` and `rate_drop` rules. Kept twice in typed arrays: in arrival order (a ring, to know
 * which value leaves) and sorted (the median is one read, the MAD one merge walk), so adding a
 * value costs a binary search and a move of at most N numbers, with no allocation.
 */
export class RollingWindow {
  private readonly ring: Float64Array;
  private readonly sorted: Float64Array;
  private next = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    this.ring = new Float64Array(capacity);
    this.sorted = new Float64Array(capacity);
  }

  /** The values held, ascending, in `[0, size)` (read only: `madVerdict`). */
  get sortedValues(): Float64Array {
    return this.sorted;
  }

  /** How many values it holds (at most `capacity`). */
  get size(): number {
    return this.count;
  }

  /** Add a finite value; the oldest leaves once the window is full. */
  push(recorded: number): void {
    // −0 is held as 0 (the one rule for −0, docs/DESIGN.md): the two compare equal, so which of
    // them a window kept would otherwise depend on the order values came and went.
    const value = recorded + 0;
    const sorted = this.sorted;
    const n = this.count;
    const at = lowerBound(sorted, n, value);
    if (n === this.capacity) {
      // The oldest leaves from `out` and the value goes in at `at`: one shift of the values between
      // (a plain loop: for windows of tens of values it beats two typed-array copies).
      const out = lowerBound(sorted, n, this.ring[this.next] ?? 0);
      if (at > out) {
        for (let i = out; i < at - 1; i++) sorted[i] = sorted[i + 1] ?? 0;
        sorted[at - 1] = value;
      } else {
        for (let i = out; i > at; i--) sorted[i] = sorted[i - 1] ?? 0;
        sorted[at] = value;
      }
    } else {
      for (let i = n; i > at; i--) sorted[i] = sorted[i - 1] ?? 0;
      sorted[at] = value;
      this.count++;
    }
    this.ring[this.next] = value;
    this.next = (this.next + 1) % this.capacity;
  }

  /** The median of the values held (NaN when empty). */
  median(): number {
    const n = this.count;
    if (n === 0) return NaN;
    const s = this.sorted;
    const mid = n >> 1;
    return n % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
  }

  /**
   * The median of |value − median| over the values held. The deviations below and above the
   * median are each already in order in the sorted array (walking outwards from it), so their
   * median is found by merging the two walks half way.
   */
  mad(median: number): number {
    const n = this.count;
    if (n === 0) return NaN;
    const s = this.sorted;
    let left = lowerBound(s, n, median) - 1;
    let right = left + 1;
    const want = n >> 1;
    let previous = 0;
    let current = 0;
    for (let i = 0; i <= want; i++) {
      previous = current;
      const dl = left >= 0 ? median - (s[left] ?? 0) : Infinity;
      const dr = right < n ? (s[right] ?? 0) - median : Infinity;
      if (dl <= dr) {
        current = dl;
        left--;
      } else {
        current = dr;
        right++;
      }
    }
    return n % 2 === 1 ? current : (previous + current) / 2;
  }
}

/**
 * How a window's MAD compares with a threshold, found by counting instead of computing it:
 * `below` (MAD > 0 and MAD < t), `above` (MAD ≥ t, or MAD is 0), or `unsure` (too close to tell
 * without the exact MAD).
 */
type MadVerdict = "below" | "above" | "unsure";

/** The relative margin the counting test keeps from `t` (with the median's rounding), so rounding never decides a verdict. */
const MARGIN = 1e-9;

/**
 * Compare the MAD about `median` with `t` in O(log N): the MAD is the middle order statistic of
 * the deviations, so it is below `t` when more than half the values lie within `t` of the median,
 * and at least `t` when fewer than half do — two binary searches each, on the sorted values.
 * Within a relative 1e-9 of the edge (and the median's rounding) the answer is `unsure` (compute `mad`). A MAD of 0 (more
 * than half the values equal to the median) is `above`: such a window judges nothing.
 */
export function madVerdict(
  window: { readonly sortedValues: Float64Array; readonly size: number },
  median: number,
  t: number,
): MadVerdict {
  const s = window.sortedValues;
  const n = window.size;
  const h = n >> 1;
  if (n === 0 || !(t > 0)) return "above";
  // Values equal to the median: past half of them, the MAD is 0.
  if (upperBound(s, n, median) - lowerBound(s, n, median) > h) return "above";
  // Values strictly within `radius` of the median. `median ± radius` is rounded, and the exact
  // MAD's deviations are too: the margin covers both, relative to t and to the median's size.
  const margin = MARGIN * t + 8 * Number.EPSILON * (Math.abs(median) + t);
  if (countWithin(s, n, median, t - margin) >= h + 1) return "below";
  // Odd N: the MAD is the (h+1)-th deviation. Even N: the mean of the h-th and (h+1)-th, so it
  // is at least t only when the h-th is.
  if (countWithin(s, n, median, t + margin) <= (n % 2 === 1 ? h : h - 1)) return "above";
  return "unsure";
}

/** How many of `sorted[0..n)` lie strictly within `radius` of `center`. */
function countWithin(sorted: Float64Array, n: number, center: number, radius: number): number {
  return lowerBound(sorted, n, center + radius) - upperBound(sorted, n, center - radius);
}

/** The first index in `sorted[0..n)` whose value is > `value`. */
function upperBound(sorted: Float64Array, n: number, value: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid] ?? 0) <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first index in `sorted[0..n)` whose value is ≥ `value`. */
function lowerBound(sorted: Float64Array, n: number, value: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid] ?? 0) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
