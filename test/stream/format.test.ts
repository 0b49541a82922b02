/**
 * The stream's line format against a golden file. The golden lines were made by the string-based
 * formatter the writer used before it wrote bytes (commit c6b24e1), so this also holds the byte
 * writer to the same output: any change to the format is a visible diff.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { LineBuffer } from "../../src/stream/line-buffer.js";
import { emptySlot, type Dtype } from "../../src/stream/ring.js";
import { endLine, isoTime, StreamLineFormat } from "../../src/stream/format.js";

const golden = readFileSync(new URL("./golden/lines.jsonl", import.meta.url), "utf8");

describe("stream line format", () => {
  it("writes metric, probe and final lines exactly as the golden file", () => {
    const format = new StreamLineFormat(2);
    // A small buffer, so the lines also cross its growth.
    const out = new LineBuffer(16);
    const metrics: [number, string, number, number][] = [
      [1795406400123, "loss", 0.25, 3],
      [1795406400123, "loss", 2.3025850929940455, 3],
      [1795406400124, "reward/mean", -1234.5678, 3],
      [1795406400124, "tokens", 151936, 4],
      [1795406400125, "lr", 3e-7, 4],
      [1795406400125, "grad_norm", NaN, 4],
      [1795406400125, "grad_norm", Infinity, 4],
      [1795406400125, "grad_norm", -Infinity, 5],
      [1795406400126, 'quote"d\\key', 1e21, 5],
      [1795406400126, "ünï/ключ", Math.fround(0.1), 6],
      [1795406400127, "big", 123456789012.5, 7],
      [1795406400127, "tiny", 0.000012345678901234568, 7],
    ];
    for (const [timestamp, key, value, step] of metrics)
      format.putMetric(out, timestamp, format.metricMiddle(key), value, step);
    const values = new Float64Array(32);
    const probes: [number, string, number, Dtype, number, number[]][] = [
      [
        1795406400200,
        "logits",
        5,
        "f32",
        151936,
        [0.1, -2.5, NaN, Infinity, 7, 1e-38, 3.4028234663852886e38, 1 / 3].map(Math.fround),
      ],
      [1795406400201, "hidden", 6, "f64", 2, [0.1, 1e-300]],
      [1795406400202, "plain", 7, "number", 3, [1, -0, 2.5]],
      [1795406400203, "empty", 8, "number", 0, []],
    ];
    for (const [timestamp, checkpoint, index, dtype, length, probeValues] of probes) {
      probeValues.forEach((v, i) => (values[6 + i] = v));
      const slot = Object.assign(emptySlot(), {
        kind: 2,
        timestamp,
        index,
        length,
        dtype,
        valuesAt: 6,
        count: probeValues.length,
      });
      format.putProbe(out, format.probeMiddle(checkpoint), slot, values);
    }
    const end = endLine(isoTime(1795406401000), 2, "SIGTERM", {
      written: 16,
      dropped: 3,
      ringFull: 2,
      writeFailed: 1,
      backendDropped: 0,
    });
    const written = `${out.bytes.toString("utf8", 0, out.length)}${end}\n`;
    assert.equal(written, golden);
    // Every line is JSON, with NaN and ±Infinity as strings.
    const parsed = written
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.equal(parsed[5]?.["value"], "NaN");
    assert.equal(parsed[9]?.["key"], "ünï/ключ");
  });
});
