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

  /** How many values it holds (at most `capacity`). */
  get size(): number {
    return this.count;
  }

  /** Add a finite value; the oldest leaves once the window is full. */
  push(value: number): void {
    const sorted = this.sorted;
    if (this.count === this.capacity) {
      const leaving = this.ring[this.next] ?? 0;
      const at = lowerBound(sorted, this.count, leaving);
      sorted.copyWithin(at, at + 1, this.count);
      this.count--;
    }
    const at = lowerBound(sorted, this.count, value);
    sorted.copyWithin(at + 1, at, this.count);
    sorted[at] = value;
    this.count++;
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
