/**
 * A reusable byte buffer that JSONL writers fill directly, number by number, instead of building
 * strings and encoding them.
 *
 * Why: in the stream writer, `String(double)` plus concatenating a line and `Buffer.from` of the
 * batch cost ~230 ns per line, against ~20 ns for the write itself. Writing bytes skips the
 * string heap, the cons-string flattening and the UTF-8 pass. Numbers are written in the same
 * text as `jsonNumberText` (`String(number)`, but exponent form from 2^53 up, and the proto3
 * strings for NaN/±Infinity), byte for byte; a test holds them equal over millions of values.
 *
 * Doubles: many metric values have a short decimal form (`0.25`, `1234.567`, integers). Those are
 * found with float64 arithmetic alone — the fewest decimals `k` whose `round(v·10^k)/10^k` is `v`
 * again (`putFixed`). A value that needs 16 or 17 significant digits (a float32 loss widened to
 * double, a ratio) is scaled exactly with Dekker's product and rounded to 16 or 17 digits
 * (`putLong`). What neither takes — magnitudes below 1e-5 or from 1e15 up, and the rare value
 * within 1e-9 of a rounding tie — is written from `numberText(v)`.
 *
 * Float32 probe values are written in the shortest form that reads back (through a double) as
 * the same float32, found the same way.
 */
import { jsonNumberText, numberText } from "../core/json.js";

/** Exact powers of ten as doubles (10^0 … 10^22 are all exactly representable). */
const POW10 = Array.from({ length: 23 }, (_, k) => Number(`1e${k}`));
/** Bound on the scaled decimal (at most 15 digits) for which float64 arithmetic is exact (see putFixed). */
const MAX_FAST = 1e15;
/** Below this magnitude `String` writes an exponent (`1e-7`): left to `String`. */
const MIN_FIXED = 1e-6;
/** 2^53: every double below it that is an integer is written as its exact digits (from it up: exponent form, `numberText`). */
const EXACT_INTEGERS = 9007199254740992;

/** Smallest value `putLong` takes: the 10^k that scales it to 17 digits is then an exact double (k ≤ 22). */
const MIN_LONG = 1e-5;
/** Veltkamp's splitter for doubles, 2^27 + 1. */
const SPLITTER = 134217729;
/** Each power of ten split into high and low halves of 26 bits (for Dekker's exact product). */
const POW10_HIGH = POW10.map((x) => SPLITTER * x - (SPLITTER * x - x));
const POW10_LOW = POW10.map((x, k) => x - (POW10_HIGH[k] ?? 0));
/** Distances this close to a tie or to the rounding interval's edge are left to `String`. */
const TIE_MARGIN = 1e-9;
/** "00" … "99" as character codes, two per entry: digits are written in pairs. */
const DIGIT_PAIRS = new Uint8Array(200);
for (let i = 0; i < 100; i++) {
  DIGIT_PAIRS[2 * i] = 48 + Math.floor(i / 10);
  DIGIT_PAIRS[2 * i + 1] = 48 + (i % 10);
}

/** Views for reading a double's exponent bits. */
const BITS_F64 = new Float64Array(1);
const BITS_U32 = new Uint32Array(BITS_F64.buffer);
/** The index of the word holding sign and exponent: 1 on little-endian machines. */
const HIGH_WORD = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0;

const ZERO = 48;
const MINUS = 45;
const DOT = 46;

export class LineBuffer {
  /** The bytes written so far are `bytes.subarray(0, length)`. */
  bytes: Buffer;
  length = 0;

  /**
   * @param initialBytes starting size; it doubles as lines need
   * @param shared keep the bytes in a SharedArrayBuffer (for another thread to write out)
   */
  constructor(
    initialBytes = 1 << 20,
    private readonly shared = false,
  ) {
    this.bytes = this.allocate(initialBytes);
  }

  private allocate(size: number): Buffer {
    return this.shared ? Buffer.from(new SharedArrayBuffer(size)) : Buffer.allocUnsafe(size);
  }

  /** The SharedArrayBuffer under `bytes` (of a buffer made `shared`), for another thread to read. */
  sharedBuffer(): SharedArrayBuffer {
    const buffer = this.bytes.buffer;
    if (!(buffer instanceof SharedArrayBuffer))
      throw new TypeError("LineBuffer.sharedBuffer(): this buffer was not made with shared = true");
    return buffer;
  }

  /** Start over (keeps the memory). */
  clear(): void {
    this.length = 0;
  }

  /** Make room for `n` more bytes. Call before a line with a bound on its length. */
  reserve(n: number): void {
    const need = this.length + n;
    if (need <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < need) size *= 2;
    const grown = this.allocate(size);
    this.bytes.copy(grown, 0, 0, this.length);
    this.bytes = grown;
  }

  /** Copy bytes (pre-encoded constant parts of a line). */
  putBytes(src: Uint8Array): void {
    const out = this.bytes;
    let at = this.length;
    const n = src.length;
    // A plain loop beats the native `set` below ~64 bytes, which is every constant part of a line.
    if (n > 64) out.set(src, at);
    else for (let i = 0; i < n; i++) out[at + i] = src[i] ?? 0;
    at += n;
    this.length = at;
  }

  /** Copy a string of code points below 256 (number text, ISO dates); other text is encoded once and copied with `putBytes`. */
  putLatin1(text: string): void {
    const out = this.bytes;
    const at = this.length;
    const n = text.length;
    for (let i = 0; i < n; i++) out[at + i] = text.charCodeAt(i);
    this.length = at + n;
  }

  /** One byte (an ASCII character code). */
  putByte(code: number): void {
    this.bytes[this.length++] = code;
  }

  /**
   * A double as a JSON token, the same text as `jsonNumberText`: `numberText(v)` for finite values,
   * `"NaN"`, `"Infinity"`, `"-Infinity"` otherwise. At most 24 bytes.
   */
  putDouble(v: number): void {
    this.putNumber(v, false);
  }

  /**
   * A float32 value (held in a double) in the shortest decimal that reads back, through a
   * double, as the same float32 (`0.1`, not `0.10000000149011612`). At most 24 bytes.
   */
  putFloat32(v: number): void {
    this.putNumber(v, true);
  }

  private putNumber(v: number, f32: boolean): void {
    if (v === 0) {
      this.putByte(ZERO); // String(-0) is "0" too
      return;
    }
    if (v - v !== 0) {
      this.putLatin1(jsonNumberText(v));
      return;
    }
    let a = v;
    if (a < 0) {
      this.putByte(MINUS);
      a = -a;
    }
    if (a < EXACT_INTEGERS && Math.floor(a) === a) this.putInteger(a);
    else if (a >= MIN_FIXED && a < MAX_FAST && this.putFixed(a, f32)) return;
    else if (f32) this.putLatin1(float32TextSlow(a));
    else if (a < MIN_LONG || a >= MAX_FAST || !this.putLong(a)) this.putLatin1(numberText(a));
  }

  /** A non-negative integer up to 2^53, in decimal digits. */
  putInteger(x: number): void {
    if (x < 1e8) {
      this.putSmall(x | 0);
      return;
    }
    const high = Math.floor(x / 1e8);
    this.putSmall(high); // below 2^53 / 1e8 ≈ 9.0e7: an int32
    this.putPadded(x - high * 1e8, 8);
  }

  /**
   * Write `a` (1e-6 ≤ a < 1e15, not an integer) with the fewest decimals `k` for which the
   * rounded `m = round(a·10^k)` reads back as `a`, if that `m` has at most 15 digits; false if
   * none does (the value needs 16 or 17 significant digits).
   *
   * Exactness: `a·10^k` is computed with a relative error of at most 2^-53, so for `m < 10^15`
   * it is within 0.11 of the exact product, and any decimal with k places that reads back as `a`
   * is also within 0.11 of it: the rounded product is that decimal. `m / 10^k` (both exact
   * doubles) is correctly rounded, i.e. what parsing the text gives. Distinct decimals of at most
   * 15 significant digits are further apart than a double's spacing, so the one found is the one
   * `String` picks. If `k` decimals read back, so do `k + 1`, which makes the search binary.
   */
  private putFixed(a: number, f32: boolean): boolean {
    // Decimals at which m would reach 10^15; the search runs over 1…maxK. The decimal exponent is
    // estimated from the binary one (log10(2) ≈ 0.30103): never too low, at most one too high.
    BITS_F64[0] = a;
    const binaryExponent = ((BITS_U32[HIGH_WORD] ?? 0) >>> 20) - 1022;
    let maxK = 15 - Math.ceil(binaryExponent * 0.30103);
    if (maxK > 21) maxK = 21;
    else if (a * (POW10[maxK + 1] ?? 0) < MAX_FAST) maxK++;
    if (maxK < 1 || !readsBack(a, maxK, f32)) return false;
    let low = 1;
    let high = maxK;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (readsBack(a, mid, f32)) high = mid;
      else low = mid + 1;
    }
    const scale = POW10[high] ?? 0;
    const m = Math.round(a * scale);
    const whole = Math.floor(m / scale);
    this.putInteger(whole);
    this.putByte(DOT);
    this.putPadded(m - whole * scale, high);
    return true;
  }

  /**
   * Write `a` (1e-5 ≤ a < 1e15, not an integer) that needs 16 or 17 significant digits — call it
   * only after `putFixed` found no shorter form. False (write nothing) in the rare cases left to
   * `String`: `a` a power of two (its rounding interval is lopsided), or a candidate so near a
   * tie or the interval's edge that float64 arithmetic could choose wrongly.
   *
   * With `k` decimals chosen so that X = a·10^k lies in [10^16, 10^17), X is computed exactly as
   * `p + err` (Dekker's product: 10^k ≤ 10^22 is exact). The doubles nearest `a` lie at X ± 2h,
   * h = ulp(a)/2 · 10^k (exact, and ≥ 0.55), so a decimal reads back as `a` when it lies within
   * h of X: the nearest integer always does (17 digits); the nearest multiple of ten does when
   * its distance is below h (16 digits). Each is the closest of its length, as `String` picks.
   */
  private putLong(a: number): boolean {
    BITS_F64[0] = a;
    const high = BITS_U32[HIGH_WORD] ?? 0;
    if ((high & 0xfffff) === 0 && BITS_U32[1 - HIGH_WORD] === 0) return false;
    const exponent = (high >>> 20) - 1023; // a in [2^exponent, 2^(exponent + 1))
    let k = 17 - Math.ceil((exponent + 1) * 0.30103); // at most one too small (see putFixed)
    let scale = POW10[k] ?? 0;
    let p = a * scale;
    if (p < 1e16) {
      k++;
      scale = POW10[k] ?? 0;
      p = a * scale;
    }
    if (k > 22 || p >= 1e17) return false;
    // err = a·scale − p exactly (Veltkamp split of both factors, then Dekker's product).
    const ac = SPLITTER * a;
    const aHigh = ac - (ac - a);
    const aLow = a - aHigh;
    const scaleHigh = POW10_HIGH[k] ?? 0;
    const scaleLow = POW10_LOW[k] ?? 0;
    const err = aHigh * scaleHigh - p + aHigh * scaleLow + aLow * scaleHigh + aLow * scaleLow;
    // ulp(a)/2 = 2^(exponent − 53), built from its bits (Math.pow is a call); a ≥ 1e-5 keeps it normal.
    BITS_U32[HIGH_WORD] = (exponent - 53 + 1023) << 20;
    BITS_U32[1 - HIGH_WORD] = 0;
    const halfInterval = (BITS_F64[0] ?? 0) * scale;
    // p ≥ 10^16 > 2^53 is an integer: split it in base 10^9, both parts exact. The estimate of
    // `upper` by a multiplication may be one off (then −10^9 < lower < 2·10^9, still an int32);
    // it is set right after rounding, with the carry.
    let upper = Math.floor(p * 1e-9);
    let lower = p - upper * 1e9;
    // 16 digits: the multiple of ten nearest X, at distance |offset − tens| from it. (A product by
    // 0.1 that rounds the wrong way lands within the tie margin of 5, and is left to String.)
    const lowerInt = lower | 0;
    const lastDigit = lowerInt - ((lowerInt / 10) | 0) * 10;
    const offset = lastDigit + err;
    const tens = 10 * Math.round(offset * 0.1);
    const distance16 = Math.abs(offset - tens);
    if (Math.abs(distance16 - 5) < TIE_MARGIN || Math.abs(distance16 - halfInterval) < TIE_MARGIN) return false;
    let digits: number;
    if (distance16 < halfInterval) {
      lower += tens - lastDigit;
      digits = 16;
    } else {
      const floor = Math.floor(err);
      const fraction = err - floor;
      if (Math.abs(fraction - 0.5) < TIE_MARGIN) return false;
      lower += fraction < 0.5 ? floor : floor + 1;
      digits = 17;
    }
    while (lower < 0) {
      upper--;
      lower += 1e9;
    }
    while (lower >= 1e9) {
      upper++;
      lower -= 1e9;
    }
    if (upper >= 1e8 || upper < 1e7) return false; // rounded to 10^17, or below 10^16
    // The digits of upper·10^9 + lower, with the decimal point after the first 17 − k of them.
    const whole = 17 - k;
    const out = this.bytes;
    let at = this.length;
    if (whole <= 0) {
      out[at++] = ZERO;
      out[at++] = DOT;
      for (let i = whole; i < 0; i++) out[at++] = ZERO;
      putDigits17(out, at, upper | 0, lower | 0);
      this.length = at + digits;
    } else {
      // Write the digits one byte to the right, then move the whole part left over the gap.
      putDigits17(out, at + 1, upper | 0, lower | 0);
      for (let i = 0; i < whole; i++) out[at + i] = out[at + 1 + i] ?? 0;
      out[at + whole] = DOT;
      this.length = at + digits + 1;
    }
    return true;
  }

  /** A non-negative int32, no padding. */
  private putSmall(x: number): void {
    let digits = 1;
    for (let p = 10; p <= x && digits < 10; p *= 10) digits++;
    const out = this.bytes;
    let at = this.length + digits;
    this.length = at;
    let rest = x;
    do {
      const q = (rest / 10) | 0;
      out[--at] = ZERO + rest - q * 10;
      rest = q;
    } while (rest > 0);
  }

  /** A non-negative integer below 10^width (width ≤ 21), left-padded with zeros to `width` digits. */
  private putPadded(x: number, width: number): void {
    const out = this.bytes;
    const start = this.length;
    let at = start + width;
    this.length = at;
    let rest = x;
    // Above int32 range, peel digits in float64 until the rest fits.
    while (rest >= 2147483648) {
      const q = Math.floor(rest / 10);
      out[--at] = ZERO + (rest - q * 10);
      rest = q;
    }
    let small = rest | 0;
    while (at > start) {
      const q = (small / 10) | 0;
      out[--at] = ZERO + small - q * 10;
      small = q;
    }
  }
}

/**
 * The 17 digits of `upper·10^9 + lower` (10^7 ≤ upper < 10^8, 0 ≤ lower < 10^9, both int32) at
 * `at`, in pairs: int32 division by a constant compiles to a multiplication.
 */
function putDigits17(out: Uint8Array, at: number, upper: number, lower: number): void {
  let rest = upper;
  for (let i = at + 6; i >= at; i -= 2) {
    const q = (rest / 100) | 0;
    const pair = (rest - q * 100) * 2;
    out[i] = DIGIT_PAIRS[pair] ?? 0;
    out[i + 1] = DIGIT_PAIRS[pair + 1] ?? 0;
    rest = q;
  }
  rest = lower;
  for (let i = at + 15; i > at + 8; i -= 2) {
    const q = (rest / 100) | 0;
    const pair = (rest - q * 100) * 2;
    out[i] = DIGIT_PAIRS[pair] ?? 0;
    out[i + 1] = DIGIT_PAIRS[pair + 1] ?? 0;
    rest = q;
  }
  out[at + 8] = 48 + rest;
}

/** Does `round(a·10^k) / 10^k` read back as `a` (as a double, or as a float32 through a double)? */
function readsBack(a: number, k: number, f32: boolean): boolean {
  const scale = POW10[k] ?? 0;
  const back = Math.round(a * scale) / scale;
  return f32 ? Math.fround(back) === a : back === a;
}

/** The float32 text for values outside the fast path (tiny or huge magnitudes): by string search. */
function float32TextSlow(value: number): string {
  if (!Number.isFinite(value)) return jsonNumberText(value);
  for (let digits = 1; digits < 9; digits++) {
    const candidate = Number(value.toPrecision(digits));
    if (Math.fround(candidate) === value) return numberText(candidate);
  }
  return numberText(Number(value.toPrecision(9)));
}
