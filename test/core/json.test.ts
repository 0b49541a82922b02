// JSON that every reader reads right: numbers from 2^53 up in exponent form, bigints exact in user
// data and across the transport, and a forged bigint tag that cannot make decoding slow.
import assert from "node:assert/strict";
import { describe, it, test } from "node:test";
import fc from "fast-check";
import {
  decodeMessage,
  encodeMessage,
  jsonNumberText,
  jsonText,
  nonFiniteReplacer,
  numberText,
  stringifyNonFinite,
} from "../../src/core/json.js";

test("numberText: String(v), except 2^53 ≤ |v| < 1e21 in exponent form that reads back as the same double", () => {
  assert.equal(numberText(2 ** 53 - 1), "9007199254740991");
  assert.equal(numberText(2 ** 53), "9.007199254740992e+15");
  assert.equal(numberText(-(2 ** 63)), "-9.223372036854776e+18");
  assert.equal(numberText(1e21), "1e+21");
  assert.equal(numberText(0.1), "0.1");
  for (const v of [2 ** 53, 2 ** 60, 2 ** 63, 1e20, -(2 ** 70)]) assert.equal(Number(JSON.parse(numberText(v))), v);
  assert.equal(jsonNumberText(NaN), '"NaN"');
});

test("jsonText writes what JSON.stringify writes, with bigints exact (int64 as literals, beyond as strings) and NaN kept", () => {
  const value = {
    a: [1, 0.5, "x", null, true, undefined],
    b: { c: new Date(0) },
    skip: undefined,
    big: 2n ** 63n - 1n,
    huge: -(2n ** 70n),
    nan: NaN,
    f: 2 ** 60,
  };
  assert.equal(
    jsonText(value),
    '{"a":[1,0.5,"x",null,true,null],"b":{"c":"1970-01-01T00:00:00.000Z"},"big":9223372036854775807,"huge":"-1180591620717411303424","nan":"NaN","f":1.152921504606847e+18}',
  );
  assert.equal(
    jsonText({ a: [1, { b: 2 }], c: {} }, "token", "  "),
    JSON.stringify({ a: [1, { b: 2 }], c: {} }, null, 2),
  );
  assert.equal(jsonText([Infinity], "token"), "[Infinity]");
  const cyclic: Record<string, unknown> = {};
  cyclic["self"] = cyclic;
  assert.throws(() => jsonText(cyclic), /contains itself/);
});

test("messages carry bigints exactly; a forged bigint tag of more than 1,000 digits stays the object it is", () => {
  const message = { t: "reply", records: [{ tokens: 2n ** 80n, text: "$b", n: NaN }] };
  const decoded = decodeMessage(encodeMessage(message)) as typeof message;
  assert.equal(decoded.records[0]?.tokens, 2n ** 80n);
  assert.equal(decoded.records[0]?.text, "$b");
  assert.ok(Number.isNaN(decoded.records[0]?.n));
  const forged = `{"x":{"$b":"${"9".repeat(100_000)}"}}`;
  const kept = decodeMessage(forged) as { x: unknown };
  assert.equal(typeof kept.x, "object", "not parsed into a 100,000-digit bigint");
});

describe("stringifyNonFinite", () => {
  it("writes exactly what JSON.stringify with nonFiniteReplacer writes, for any JSON-like value", () => {
    const number = fc.oneof(
      fc.double(),
      fc.constantFrom(-0, NaN, Infinity, -Infinity, Number.MAX_VALUE, 5e-324, 2 ** 53 + 2),
    );
    const value = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small" },
        number,
        fc.string(),
        fc.boolean(),
        fc.constant(null),
        fc.constant(undefined),
        fc.array(number),
        fc.array(tie("value"), { maxLength: 4 }),
        fc.dictionary(fc.string(), tie("value"), { maxKeys: 4 }),
        fc.date({ noInvalidDate: true }),
      ),
    })).value;
    fc.assert(
      fc.property(value, (v) => {
        assert.equal(stringifyNonFinite(v), JSON.stringify(v, nonFiniteReplacer));
      }),
      { numRuns: 500 },
    );
  });

  it("writes a series' number arrays with non-finite values as their strings", () => {
    const text = stringifyNonFinite({
      steps: [0, 1, 2],
      values: [-0, NaN, Infinity],
      cursor: null,
      skipped: undefined,
    });
    assert.equal(text, '{"steps":[0,1,2],"values":[0,"NaN","Infinity"],"cursor":null}');
  });
});
