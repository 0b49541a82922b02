// The rank module of bench/ranks.bench.ts: compiled rankscope from dist/, so 64 ranks start fast.
import { recordMetric, Reduce } from "../dist/index.js";

const REDUCTIONS = [Reduce.MEAN, Reduce.SUM, Reduce.MAX, Reduce.MIN, Reduce.STD];

/** Record `count` keys with mixed reductions, `perKey` values each. */
export function recordMany(count, perKey, seed) {
  for (let i = 0; i < count; i++) {
    const reduce = REDUCTIONS[i % REDUCTIONS.length];
    for (let j = 0; j < perKey; j++) recordMetric(`bench/key_${i}`, seed + i * 0.5 + j, reduce);
  }
}
