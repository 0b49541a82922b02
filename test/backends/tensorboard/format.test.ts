/** The pieces of the tfevents format on their own: TFRecord framing and CRCs, histogram buckets, hyperparameters. */
import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import { HISTOGRAM_EDGES } from "../../../src/core/accumulators/histogram.js";
import { cellText, flattenHyperparams, histogramBuckets } from "../../../src/backends/tensorboard/events.js";
import { frameRecord, frameRecords, maskedCrc32c } from "../../../src/backends/tensorboard/record.js";
import { eventFileName } from "../../../src/backends/tensorboard/writer.js";
import { crc32cBitwise, mask, readRecords } from "./tfevents-reader.js";

it("maskedCrc32c equals TensorFlow's masked CRC-32C computed bit by bit", () => {
  // The CRC-32C check value of "123456789" is 0xe3069283.
  assert.equal(crc32cBitwise(new TextEncoder().encode("123456789")), 0xe3069283);
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
      assert.equal(maskedCrc32c(bytes), mask(crc32cBitwise(bytes)));
    }),
  );
});

it("frames records as u64 length, masked CRC of the length, data, masked CRC of the data", () => {
  const data = new Uint8Array([1, 2, 3, 250]);
  const framed = frameRecord(data);
  assert.equal(framed.length, 4 + 16);
  assert.equal(framed.readBigUInt64LE(0), 4n);
  assert.equal(framed.readUInt32LE(8), mask(crc32cBitwise(framed.subarray(0, 8))));
  assert.deepEqual([...framed.subarray(12, 16)], [1, 2, 3, 250]);
  assert.equal(framed.readUInt32LE(16), mask(crc32cBitwise(data)));
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ maxLength: 70 }), { maxLength: 8 }), (records) => {
      assert.deepEqual(
        readRecords(frameRecords(records)).map((r) => [...r]),
        records.map((r) => [...r]),
      );
    }),
  );
});

it("names event files as TensorBoard's writers do", () => {
  assert.equal(eventFileName(1_700_000_123_999, "host-a", 4242, 3), "events.out.tfevents.1700000123.host-a.4242.3");
  assert.equal(eventFileName(999_000, "h", 1, 0), "events.out.tfevents.0000000999.h.1.0");
});

it("histogram buckets: an empty bucket marks each gap between kept default buckets; custom limits pass through", () => {
  const i = HISTOGRAM_EDGES.findIndex((edge) => edge > 1);
  assert.ok(i > 0);
  const e = (k: number): number => HISTOGRAM_EDGES[k] as number;
  const data = {
    count: 6,
    min: 0.5,
    max: 100,
    sum: 0,
    sumSquares: 0,
    bucketLimits: [e(i), e(i + 1), e(i + 5)],
    bucketCounts: [2, 1, 3],
  };
  assert.deepEqual(histogramBuckets(data), { limits: [e(i), e(i + 1), e(i + 4), e(i + 5)], counts: [2, 1, 0, 3] });
  const custom = { count: 3, min: 0, max: 9, sum: 0, sumSquares: 0, bucketLimits: [1.5, 7.25], bucketCounts: [1, 2] };
  assert.deepEqual(histogramBuckets(custom), { limits: [1.5, 7.25], counts: [1, 2] });
});

it("flattens a config into hyperparameters and sample fields into table text", () => {
  const flat = flattenHyperparams({
    a: { b: { c: 1 } },
    nan: NaN,
    big: 5n,
    list: [1, "x"],
    when: new Date(0),
    fn: () => 1,
    skip: undefined,
  });
  assert.deepEqual(Object.fromEntries(flat), {
    "a.b.c": { number_value: 1 },
    nan: { number_value: NaN },
    big: { number_value: 5 },
    list: { string_value: '[1,"x"]' },
    when: { string_value: "1970-01-01T00:00:00.000Z" },
  });
  assert.equal(cellText(NaN), "NaN");
  assert.equal(cellText(-Infinity), "-Infinity");
  assert.equal(cellText({ score: Infinity }), '{"score":"Infinity"}');
  assert.equal(cellText(undefined), "");
  assert.equal(cellText("as is"), "as is");
});
