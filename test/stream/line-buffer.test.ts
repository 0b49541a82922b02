import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { jsonNumberText } from "../../src/core/json.js";
import { LineBuffer } from "../../src/stream/line-buffer.js";

const buffer = new LineBuffer(64);
function doubleText(v: number): string {
  buffer.clear();
  buffer.putDouble(v);
  return buffer.bytes.toString("latin1", 0, buffer.length);
}
function float32Text(v: number): string {
  buffer.clear();
  buffer.putFloat32(v);
  return buffer.bytes.toString("latin1", 0, buffer.length);
}
const bits = new Float64Array(1);
const words = new Uint32Array(bits.buffer);
/** A double from random bits (any sign, exponent and mantissa, NaN and ±Infinity included). */
function randomDouble(next: () => number): number {
  words[0] = (next() * 2 ** 32) >>> 0;
  words[1] = (next() * 2 ** 32) >>> 0;
  return bits[0] as number;
}
/** A deterministic generator, so a failure names a value that reproduces. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0;
    s = (s ^ (s >>> 13)) >>> 0;
    return s / 2 ** 32;
  };
}
/** The reference float32 text: the fewest significant digits that read back, closest first. */
function shortestFloat32(v: number): string {
  for (let digits = 1; digits <= 9; digits++) {
    const candidate = Number(v.toPrecision(digits));
    if (Math.fround(candidate) === v) return String(candidate);
  }
  throw new Error(`no float32 text for ${v}`);
}

describe("LineBuffer numbers", () => {
  it("writes every double exactly as String(v) (jsonNumberText for NaN and ±Infinity)", () => {
    const next = seeded(1);
    const families: ((i: number) => number)[] = [
      () => randomDouble(next),
      // short decimals at every magnitude and length, the fast path's territory
      () => Number((next() * 10 ** (next() * 24 - 8)).toPrecision(1 + Math.floor(next() * 17))),
      (i) => i * 0.001,
      (i) => 2 + Math.sin(i), // 16–17 significant digits: the fallback
      (i) => Math.fround(Math.sin(i) * 100), // float32 widened to double
      (i) => -i / 7,
      (i) => i * 1e-7,
      (i) => i * 1e9 + 0.5,
      (i) => Math.round(Math.sin(i) * 1e6) / 1e4,
      // 17 digits whose last nine are near 0 or 10^9: the base-10^9 split and its carries
      (i) => ((10_000_000 + ((i * 7919) % 90_000_000)) * 1e9 + ((i % 9) - 4) * 2) / 10 ** (16 - (i % 12) + 4),
    ];
    let checked = 0;
    for (let i = 0; i < 150_000; i++) {
      for (const family of families) {
        const v = family(i);
        const expected = jsonNumberText(v);
        if (doubleText(v) !== expected) assert.equal(doubleText(v), expected, `value ${v}`);
        checked++;
      }
    }
    const edges = [
      0,
      -0,
      NaN,
      Infinity,
      -Infinity,
      1e-6,
      1e-7,
      1e-6 * (1 - 2 ** -53),
      1.0000000000000002e-6,
      1e15,
      1e15 - 0.5,
      999999999999999.9,
      2 ** 53,
      2 ** 53 - 1,
      2 ** 53 + 2,
      2 ** 31,
      2 ** 31 - 1,
      2 ** 32 + 0.5,
      0.1,
      0.2,
      0.30000000000000004,
      5e-324,
      Number.MAX_VALUE,
      -Number.MIN_VALUE,
      123.456,
      1e21,
      1e20 + 65536,
      0.5,
      1e8 - 1e-8,
      100000000.1,
      1e-5,
      0.000123,
    ];
    for (const v of edges) assert.equal(doubleText(v), jsonNumberText(v), `value ${v}`);
    assert.ok(checked > 1_000_000);
  });

  it("agrees with String(v) on arbitrary doubles (property)", () => {
    fc.assert(
      fc.property(fc.double(), (v) => doubleText(v) === jsonNumberText(v)),
      { numRuns: 20_000 },
    );
  });

  it("writes float32 values in the shortest text that reads back as the same float32", () => {
    const next = seeded(2);
    const f32 = new Float32Array(1);
    const u32 = new Uint32Array(f32.buffer);
    for (let i = 0; i < 200_000; i++) {
      u32[0] = (next() * 2 ** 32) >>> 0;
      for (const v of [f32[0] as number, Math.fround(Math.sin(i) * 10 ** ((i % 24) - 10)), Math.fround(i * 0.001)]) {
        const text = float32Text(v);
        if (Number.isNaN(v)) {
          assert.equal(text, '"NaN"');
          continue;
        }
        if (!Number.isFinite(v)) {
          assert.equal(text, jsonNumberText(v));
          continue;
        }
        if (Math.fround(Number(text)) !== v) assert.fail(`${text} does not read back as the float32 ${v}`);
        // Integers keep their exact digits (as String does); others are no longer than the shortest.
        if (!Number.isInteger(v) && text.length > shortestFloat32(v).length)
          assert.fail(`${text} is longer than ${shortestFloat32(v)} for ${v}`);
      }
    }
    assert.equal(float32Text(Math.fround(0.1)), "0.1");
    assert.equal(float32Text(Math.fround(-2.5)), "-2.5");
    assert.equal(float32Text(Math.fround(1e-38)), "1e-38");
    assert.equal(float32Text(Math.fround(3.4028234663852886e38)), "3.4028235e+38");
  });

  it("grows to hold what is reserved and keeps what was written", () => {
    const small = new LineBuffer(4);
    small.putLatin1("ab");
    small.reserve(1000);
    for (let i = 0; i < 100; i++) small.putDouble(i + 0.5);
    small.putBytes(new Uint8Array(200).fill(120));
    const text = small.bytes.toString("latin1", 0, small.length);
    assert.ok(text.startsWith("ab0.51.52.5"));
    assert.ok(text.endsWith("x".repeat(200)));
    assert.ok(small.bytes.length >= small.length);
  });
});
