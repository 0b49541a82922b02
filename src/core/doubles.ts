/** Neighbouring doubles: for bounds that must include or exclude one exact value. */

/** The largest double below `x` (`x` itself when it is not finite). */
export function nextDown(x: number): number {
  if (!Number.isFinite(x)) return x;
  if (x === 0) return -Number.MIN_VALUE;
  const f = new Float64Array([x]);
  const b = new BigInt64Array(f.buffer);
  b[0] = (b[0] ?? 0n) + (x > 0 ? -1n : 1n);
  return f[0] ?? x;
}

/** The smallest double above `x` (`x` itself when it is not finite). */
export function nextUp(x: number): number {
  return -nextDown(-x);
}
