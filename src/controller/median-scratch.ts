/**
 * Medians for straggler attribution, O(n) by selection (not sorting) in scratch space reused from
 * one flush to the next: a median, or with a center the median absolute deviation around it.
 */

/** Scratch space for medians, grown as needed (one analysis at a time per tracker). */
export class Scratch {
  private buffer = new Float64Array(1024);
  /**
   * Median of the finite values of `values` (NaN when none), and how many there were; with
   * `center`, the median of their distances from it (the median absolute deviation).
   */
  median(values: Float64Array, center?: number): { median: number; n: number } {
    if (this.buffer.length < values.length) this.buffer = new Float64Array(values.length * 2);
    const b = this.buffer;
    let n = 0;
    for (let i = 0; i < values.length; i++) {
      const v = values[i] ?? NaN;
      if (Number.isFinite(v)) b[n++] = center === undefined ? v : Math.abs(v - center);
    }
    return { median: n === 0 ? NaN : medianOf(b, n), n };
  }
}

/** Median of b[0..n) by selection (reorders b). */
function medianOf(b: Float64Array, n: number): number {
  const hi = n >> 1;
  const upper = select(b, n, hi);
  if (n % 2 === 1) return upper;
  // After selecting `hi`, every value below it is in b[0..hi): the lower middle is their maximum.
  let lower = -Infinity;
  for (let i = 0; i < hi; i++) lower = Math.max(lower, b[i] ?? -Infinity);
  return (lower + upper) / 2;
}

/** The k-th smallest of b[0..n) (Hoare's selection; reorders b so smaller values come before it). */
function select(b: Float64Array, n: number, k: number): number {
  let left = 0;
  let right = n - 1;
  while (left < right) {
    const pivot = b[(left + right) >> 1] ?? 0;
    let i = left;
    let j = right;
    while (i <= j) {
      while ((b[i] ?? 0) < pivot) i++;
      while ((b[j] ?? 0) > pivot) j--;
      if (i <= j) {
        const t = b[i] ?? 0;
        b[i] = b[j] ?? 0;
        b[j] = t;
        i++;
        j--;
      }
    }
    if (k <= j) right = j;
    else if (k >= i) left = i;
    else break;
  }
  return b[k] ?? NaN;
}
