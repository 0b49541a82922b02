/**
 * Text in Unicode code point order — UTF-8 byte order, PostgreSQL's `COLLATE "C"` — rather than
 * JavaScript's UTF-16 unit order (which puts U+10000 and beyond before U+E000–U+FFFF), so the
 * dashboard's two sources and the web app order names alike.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    // A surrogate (half of a code point past U+FFFF) sorts after every other unit.
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}
