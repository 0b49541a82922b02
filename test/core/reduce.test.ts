import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { getReduceDefinition, Reduce, registerReduce } from "../../src/core/registry.js";
import type { Accumulator, AccumulatorState, ReduceDefinition, SampleRecord } from "../../src/core/reduce.js";
import { HISTOGRAM_EDGES } from "../../src/core/accumulators/histogram.js";
import { recordMetric } from "../../src/core/collector.js";
import { peekProcessWide } from "../../src/core/process-wide.js";

type Def = ReduceDefinition<AccumulatorState>;

/** Numbers for numeric reductions, records for SAMPLE: `input` tells which the accumulator takes. */
function accumulate(reduce: string, values: readonly (number | SampleRecord)[]): AccumulatorState {
  const def = getReduceDefinition(reduce);
  if (def.input === "object") {
    const acc = def.create();
    for (const v of values) acc.append(typeof v === "number" ? assert.fail(`${reduce} takes records, got ${v}`) : v);
    return acc.state();
  }
  const acc = def.create();
  for (const v of values) acc.append(typeof v === "number" ? v : assert.fail(`${reduce} takes numbers, got a record`));
  return acc.state();
}

function valueOf(reduce: string, values: readonly (number | SampleRecord)[]): ReturnType<Def["value"]> {
  return getReduceDefinition(reduce).value(accumulate(reduce, values));
}

test("Forge's numbers: mean, sum, max, min, std", () => {
  assert.equal(valueOf(Reduce.MEAN, [10, 20]), 15);
  assert.equal(valueOf(Reduce.SUM, [5, 3]), 8);
  assert.equal(valueOf(Reduce.MAX, [5, 10, 3]), 10);
  assert.equal(valueOf(Reduce.MIN, [5, 10, 3]), 3);
  assert.equal(valueOf(Reduce.STD, [5, 7]), 1);
  assert.equal(valueOf(Reduce.STD, [5]), 0, "std of fewer than two values is 0");
  assert.equal(valueOf(Reduce.MEAN, []), 0, "mean of nothing is 0");
});

test("merging mean states (sum 10, count 2) and (sum 20, count 3) gives 6", () => {
  const mean = getReduceDefinition(Reduce.MEAN);
  const merged = mean.merge([
    { v: 1, count: 2, sum: 10 },
    { v: 1, count: 3, sum: 20 },
  ] as unknown as AccumulatorState[]);
  assert.equal(mean.value(merged), 6);
  assert.equal(merged.count, 5);
});

test("accumulator value() equals the value of its state, and reset() empties it", () => {
  for (const reduce of [
    Reduce.MEAN,
    Reduce.SUM,
    Reduce.MAX,
    Reduce.MIN,
    Reduce.STD,
    Reduce.QUANTILES,
    Reduce.HISTOGRAM,
  ]) {
    const def = getReduceDefinition(reduce);
    assert.notEqual(def.input, "object", reduce);
    if (def.input === "object") continue;
    const acc = def.create();
    for (const v of [3, 1, 4, 1, 5, 9, 2, 6]) acc.append(v);
    assert.deepEqual(acc.value(), def.value(acc.state()), reduce);
    acc.reset();
    assert.equal(acc.count, 0, reduce);
    assert.equal(acc.state().count, 0, reduce);
  }
});

test("states are plain JSON with a version", () => {
  for (const reduce of [
    Reduce.MEAN,
    Reduce.SUM,
    Reduce.MAX,
    Reduce.MIN,
    Reduce.STD,
    Reduce.QUANTILES,
    Reduce.HISTOGRAM,
  ]) {
    const state = accumulate(reduce, [1, 2, 3]);
    assert.equal(state.v, 1, reduce);
    assert.deepEqual(JSON.parse(JSON.stringify(state)), state, `${reduce} state survives JSON`);
  }
  const sample = accumulate(Reduce.SAMPLE, [{ reward: 1, text: "a" }]);
  assert.deepEqual(JSON.parse(JSON.stringify(sample)), sample);
});

test("STD of two finite values whose difference overflows: a finite mean, M2 +Infinity (never negative), on one rank and merged", () => {
  // The counterexample fast-check found on the wire: 1.7976931348623133e308 − (−2.49e293) is
  // past the largest double, so the Welford step made the mean +Infinity and M2 −Infinity, and
  // the rank's own frame was refused as corrupt by its controller.
  const values = [-2.4948003869183998e293, 1.7976931348623133e308];
  const std = getReduceDefinition(Reduce.STD);
  const check = std.check ?? assert.fail("std checks its states");
  for (const state of [accumulate(Reduce.STD, values), std.merge(values.map((v) => accumulate(Reduce.STD, [v])))]) {
    const { mean, m2 } = state as unknown as { mean: number; m2: number };
    assert.ok(
      Number.isFinite(mean) && Math.abs(mean - (values[0]! / 2 + values[1]! / 2)) <= Math.abs(mean) * 1e-15,
      `mean ${mean}`,
    );
    assert.equal(m2, Infinity);
    assert.equal(
      check(state as unknown as Record<string, unknown>),
      undefined,
      "a state made from finite values passes the check",
    );
    assert.equal(std.value(state), Infinity);
  }
  const opposite = accumulate(Reduce.STD, [1.7e308, -1.7e308]) as unknown as { mean: number; m2: number };
  assert.deepEqual([opposite.mean, opposite.m2], [0, Infinity]);
  // Merging large means whose squares overflow: M2 0·∞ was NaN for the first state.
  const large = std.merge([1e200, 1e200, 1e200].map((v) => accumulate(Reduce.STD, [v])));
  assert.deepEqual([std.value(large), (large as unknown as { mean: number }).mean], [0, 1e200]);
});

test("STD merges exactly (Chan) where sum-of-squares loses everything: 1e9 + {0, 1, 2}", () => {
  const values = [1e9, 1e9 + 1, 1e9 + 2];
  const exact = Math.sqrt(2 / 3);
  const std = getReduceDefinition(Reduce.STD);
  // One rank per value, merged on the controller.
  const merged = std.merge(values.map((v) => accumulate(Reduce.STD, [v])));
  assert.ok(Math.abs((std.value(merged) as number) - exact) < 1e-9, `Chan merge: ${String(std.value(merged))}`);
  // Forge's formula: sqrt(E[x²] - E[x]²) from per-rank sums and sums of squares.
  const n = values.length;
  const sum = values.reduce((a, b) => a + b, 0);
  const sumSq = values.reduce((a, b) => a + b * b, 0);
  const naive = Math.sqrt(Math.max(0, sumSq / n - (sum / n) ** 2));
  assert.ok(
    Math.abs(naive - exact) > 0.1,
    `sum-of-squares formula is off by more than 0.1 (got ${naive}, exact ${exact})`,
  );
});

test("NaN and ±Infinity propagate as IEEE arithmetic does", () => {
  assert.ok(Number.isNaN(valueOf(Reduce.MEAN, [1, NaN, 2])));
  assert.ok(Number.isNaN(valueOf(Reduce.SUM, [1, NaN])));
  assert.ok(Number.isNaN(valueOf(Reduce.MAX, [1, NaN, 2])));
  assert.ok(Number.isNaN(valueOf(Reduce.MIN, [NaN, 1])));
  assert.ok(Number.isNaN(valueOf(Reduce.STD, [1, NaN, 3])));
  assert.equal(valueOf(Reduce.MAX, [1, Infinity]), Infinity);
  assert.equal(valueOf(Reduce.MIN, [1, -Infinity]), -Infinity);
  assert.equal(valueOf(Reduce.SUM, [1, -Infinity]), -Infinity);
  const q = valueOf(Reduce.QUANTILES, [1, 2, NaN]) as Record<string, number>;
  assert.ok(Number.isNaN(q["p50"]));
  const inf = valueOf(Reduce.quantiles([0, 0.5, 1]), [-Infinity, 1, Infinity]) as Record<string, number>;
  assert.equal(inf["p0"], -Infinity);
  assert.equal(inf["p100"], Infinity);
  assert.ok(Math.abs((inf["p50"] as number) - 1) <= 0.0101, `p50 ${inf["p50"]}`);
});

test("QUANTILES reports p50/p90/p99 within 1% relative error", () => {
  const values = Array.from({ length: 10_000 }, (_, i) => i + 1);
  const q = valueOf(Reduce.QUANTILES, values) as Record<string, number>;
  assert.deepEqual(Object.keys(q), ["p50", "p90", "p99"]);
  const exact = (p: number): number => values[Math.floor(p * (values.length - 1))] as number;
  for (const [suffix, p] of [
    ["p50", 0.5],
    ["p90", 0.9],
    ["p99", 0.99],
  ] as const) {
    const rel = Math.abs((q[suffix] as number) - exact(p)) / exact(p);
    assert.ok(rel <= 0.0101, `${suffix}: ${q[suffix]} vs ${exact(p)} (rel ${rel})`);
  }
});

test("QUANTILES merges negative values across ranks (the bug that ruled out @datadog/sketches-js)", () => {
  const def = getReduceDefinition(Reduce.quantiles([0, 0.5, 1]));
  const merged = def.merge([accumulate(def.name, [-5, -4, -3]), accumulate(def.name, [-2, -1, 1])]);
  assert.equal(merged.count, 6);
  const q = def.value(merged) as Record<string, number>;
  assert.equal(q["p0"], -5);
  assert.equal(q["p100"], 1);
  // The median of [-5, -4, -3, -2, -1, 1] lies between -3 and -2 (within the 1% accuracy).
  assert.ok((q["p50"] as number) >= -3 * 1.0101 && (q["p50"] as number) <= -2 * 0.9899, `p50 ${q["p50"]}`);
});

test("Reduce.quantiles names its suffixes and validates", () => {
  const name = Reduce.quantiles([0.5, 0.95, 0.999]);
  assert.equal(name, "quantiles(0.5,0.95,0.999)");
  assert.deepEqual(Object.keys(valueOf(name, [1, 2, 3]) as object), ["p50", "p95", "p99.9"]);
  assert.equal(Reduce.quantiles([0.5, 0.9, 0.99]), "quantiles");
  assert.throws(() => Reduce.quantiles([1.5]), /quantiles must be numbers in \[0, 1\], got 1.5/);
  assert.throws(() => Reduce.quantiles([]), /at least one quantile/);
});

test("HISTOGRAM reports count/min/max/mean and keeps mergeable buckets", () => {
  const def = getReduceDefinition(Reduce.HISTOGRAM);
  const a = accumulate(Reduce.HISTOGRAM, [1, 2, 3]);
  const b = accumulate(Reduce.HISTOGRAM, [10, -4]);
  const merged = def.merge([a, b]);
  assert.deepEqual(def.value(merged), { count: 5, min: -4, max: 10, mean: 12 / 5 });
  const h = def.histogram?.(merged);
  assert.ok(h !== undefined);
  assert.equal(
    h.bucketCounts.reduce((x, y) => x + y, 0),
    5,
  );
  // Each value sits in the bucket whose upper limit is the first edge ≥ the value.
  for (const v of [1, 2, 3, 10, -4]) {
    const limit = h.bucketLimits.find((l) => l >= v);
    assert.ok(limit !== undefined && limit / v < 1.11 + (v < 0 ? 1 : 0), `bucket for ${v}: ${limit}`);
  }
  assert.equal(HISTOGRAM_EDGES[HISTOGRAM_EDGES.length - 1], Number.MAX_VALUE);
});

test("SAMPLE keeps the best and the worst record by reward, and merges across ranks", () => {
  const def = getReduceDefinition(Reduce.SAMPLE);
  const a = accumulate(Reduce.SAMPLE, [
    { id: "a1", reward: 0.2 },
    { id: "a2", reward: 0.9 },
    { id: "a3", reward: 0.5 },
  ]);
  const b = accumulate(Reduce.SAMPLE, [
    { id: "b1", reward: -1 },
    { id: "b2", reward: 0.4 },
  ]);
  const records = def.samples?.(def.merge([a, b])) ?? [];
  assert.deepEqual(
    records.map((r) => r["id"]),
    ["a2", "b1"],
  );
  const one = def.samples?.(accumulate(Reduce.SAMPLE, [{ id: "only", reward: 1 }])) ?? [];
  assert.deepEqual(
    one.map((r) => r["id"]),
    ["only"],
    "a single record is reported once",
  );
});

test("Reduce.sample({ k, by }) keeps k each way and reports each record once", () => {
  const name = Reduce.sample({ k: 2, by: "score" });
  assert.equal(name, "sample(k=2,by=score)");
  const def = getReduceDefinition(name);
  const records =
    def.samples?.(
      accumulate(name, [
        { n: 1, score: 1 },
        { n: 2, score: 2 },
        { n: 3, score: 3 },
      ]),
    ) ?? [];
  assert.deepEqual(
    records.map((r) => r["n"]),
    [3, 2, 1],
  );
  const many =
    def.samples?.(
      accumulate(
        name,
        [1, 5, 3, 9, 7].map((score) => ({ score })),
      ),
    ) ?? [];
  assert.deepEqual(
    many.map((r) => r["score"]),
    [9, 7, 1, 3],
  );
  assert.throws(
    () => accumulate(name, [{ reward: 1 }]),
    /ranks records by the numeric field "score", but a record has score = undefined/,
  );
});

test("an unknown reduce lists the valid ones", () => {
  assert.throws(
    () => getReduceDefinition("median"),
    /unknown reduce "median"; valid: mean, sum, max, min, std, quantiles, histogram, rate, sample/,
  );
});

test("registerReduce: a user-defined reduction works like a built-in", () => {
  interface LastState extends AccumulatorState {
    last: number;
    at: number;
  }
  let clock = 0;
  registerReduce<LastState>("last", {
    create: () => {
      let last = 0;
      let at = 0;
      let count = 0;
      return {
        get count() {
          return count;
        },
        append(v: number) {
          last = v;
          at = ++clock;
          count++;
        },
        value: () => last,
        state: () => ({ v: 1, count, last, at }),
        reset() {
          count = 0;
        },
      };
    },
    merge: (states) => states.reduce((a, b) => (b.at > a.at ? b : a)),
    value: (s) => s.last,
  });
  assert.equal(valueOf("last", [1, 2, 7]), 7);
  assert.throws(
    () =>
      registerReduce("mean", {
        create: () => {
          throw new Error();
        },
        merge: (s) => s[0] as AccumulatorState,
        value: () => 0,
      }),
    /built-in reduction and cannot be replaced/,
  );
  assert.throws(() => registerReduce("broken", {} as never), /needs a create\(\) function/);
});

test("a reduction's input kind and its accumulator agree, checked by the compiler", () => {
  const numbers = (): Accumulator<AccumulatorState, number> => ({
    count: 0,
    append: () => {},
    value: () => 0,
    state: () => ({ v: 1, count: 0 }),
    reset: () => {},
  });
  const base = { merge: (s: readonly AccumulatorState[]) => s[0] ?? { v: 1, count: 0 }, value: () => 0 };
  // Compiled, never run: a reduction of records must create an accumulator of records.
  const _mismatched = (): void =>
    // @ts-expect-error -- an accumulator of numbers for input "object"
    registerReduce("typed_records", { ...base, input: "object", create: numbers });
  registerReduce("typed_numbers", { ...base, create: numbers });
  const def = getReduceDefinition("typed_numbers");
  assert.equal(def.input, undefined, "a reduction without input takes numbers");
  if (def.input !== "object") def.create().append(1);
  const sample = getReduceDefinition(Reduce.SAMPLE);
  assert.equal(sample.input, "object");
  // Without checking input, create() may be either kind, so the compiler refuses a number (and so
  // does the accumulator at run time).
  // @ts-expect-error -- a number for an accumulator that may take records
  assert.throws(() => sample.create().append(1), /ranks records by the numeric field "reward"/);
});

// How a user declares a registered reduction of records, so recordMetric takes records for it.
declare module "../../src/core/reduce.js" {
  interface RegisteredReduces {
    typed_best: "object";
  }
}

test('recordMetric takes records for a reduction declared as "object", and numbers for the others', () => {
  let kept: SampleRecord | undefined;
  registerReduce("typed_best", {
    input: "object",
    create: () => ({
      count: 0,
      append: (record: SampleRecord) => {
        kept = record;
      },
      value: () => 0,
      state: () => ({ v: 1, count: 0 }),
      reset: () => {},
    }),
    merge: (s) => s[0] ?? { v: 1, count: 0 },
    value: () => 0,
  });
  recordMetric("typed/best", { reward: 3 }, "typed_best");
  assert.deepEqual(kept, { reward: 3 });
  // @ts-expect-error -- a number for a reduction declared as taking records
  assert.throws(() => recordMetric("typed/best", 1, "typed_best"), /takes a plain object record/);
  recordMetric("typed/mean", 1, "mean");
  // @ts-expect-error -- a record for a reduction of numbers
  assert.throws(() => recordMetric("typed/mean", { reward: 1 }, "mean"), /takes a number or a bigint/);
});

// Property tests: merging states is associative and commutative, and equals one stream.
const finite = fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true });
const chunks = fc.array(fc.array(finite, { minLength: 0, maxLength: 20 }), { minLength: 1, maxLength: 6 });

function close(a: unknown, b: unknown): boolean {
  if (typeof a === "number" && typeof b === "number") {
    if (Number.isNaN(a) && Number.isNaN(b)) return true;
    return Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(a), Math.abs(b));
  }
  if (a !== null && b !== null && typeof a === "object" && typeof b === "object") {
    const ka = Object.keys(a);
    return (
      ka.length === Object.keys(b).length &&
      ka.every((k) => close((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
    );
  }
  return a === b;
}

for (const reduce of [
  Reduce.MEAN,
  Reduce.SUM,
  Reduce.MAX,
  Reduce.MIN,
  Reduce.STD,
  Reduce.QUANTILES,
  Reduce.HISTOGRAM,
]) {
  test(`property: ${reduce} merge equals the single-stream result, in any grouping and order`, () => {
    const def = getReduceDefinition(reduce);
    fc.assert(
      fc.property(chunks, (parts) => {
        const single = def.value(accumulate(reduce, parts.flat()));
        const states = parts.map((p) => accumulate(reduce, p));
        const flat = def.value(def.merge(states));
        const reversed = def.value(def.merge([...states].reverse()));
        const nested = def.value(def.merge([def.merge(states.slice(0, 1)), def.merge(states.slice(1))]));
        if (parts.flat().length === 0) return true;
        return close(single, flat) && close(flat, reversed) && close(flat, nested);
      }),
      { numRuns: 200 },
    );
  });
}

test("property: SAMPLE merge keeps the same best and worst scores as one stream", () => {
  const name = Reduce.sample({ k: 2 });
  const def = getReduceDefinition(name);
  fc.assert(
    fc.property(chunks, (parts) => {
      const toRecords = (xs: number[]): SampleRecord[] => xs.map((reward) => ({ reward }));
      const single = def.samples?.(accumulate(name, toRecords(parts.flat()))) ?? [];
      const merged = def.samples?.(def.merge(parts.map((p) => accumulate(name, toRecords(p))))) ?? [];
      return JSON.stringify(single.map((r) => r["reward"])) === JSON.stringify(merged.map((r) => r["reward"]));
    }),
    { numRuns: 200 },
  );
});

test("parameterised reductions named by other processes are kept in a bounded table, and every name still resolves", () => {
  // A controller merges whatever names ranks send: 3,000 distinct quantile sets must not grow memory without bound.
  const names = Array.from({ length: 3000 }, (_, i) => `quantiles(0.${String(i + 1).padStart(4, "0")})`);
  for (const name of names) assert.equal(getReduceDefinition(name).name, name);
  const kept = peekProcessWide<Map<string, unknown>>("reduceParameterised");
  assert.ok(
    kept !== undefined && kept.size <= 1024,
    `the table of parameterised definitions holds ${kept?.size} names`,
  );
  // Past the bound a name is built again for each lookup, and works the same.
  const last = names[names.length - 1] ?? "";
  assert.equal(kept.has(last), false);
  const median = valueOf("quantiles(0.5)", [1, 2, 3, 4, 5]);
  assert.ok(
    typeof median === "object" && Math.abs((median["p50"] ?? NaN) - 3) < 0.05,
    `quantiles(0.5) of 1..5: ${JSON.stringify(median)}`,
  );
  const lastValue = valueOf(last, [1, 2, 3, 4, 5]);
  assert.equal(typeof lastValue, "object", `${last} reduces past the bound: ${JSON.stringify(lastValue)}`);
  assert.throws(() => getReduceDefinition("quantiles(2)"), RangeError);
});
