/**
 * Cost of the AReaL stats face on the hot path: `stats.scalar` (two collector appends per key)
 * and `stats.stat` over a 4096-entry mask, against `recordMetric` as the baseline. Prints a
 * markdown table; run with `npm run bench -- faces`.
 */
import { getCollector, recordMetric } from "../src/core/collector.js";
import { stats, StatReduce } from "../src/stats/index.js";

function measure(
  name: string,
  iterations: number,
  fn: (i: number) => void,
): { name: string; nsPerOp: number; opsPerSec: number } {
  for (let i = 0; i < Math.min(iterations, 10_000); i++) fn(i); // warm-up
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn(i);
  const ns = Number(process.hrtime.bigint() - start) / iterations;
  getCollector().takeStates();
  return { name, nsPerOp: ns, opsPerSec: 1e9 / ns };
}

const N = 4096;
const mask = new Uint8Array(N);
const values = new Float32Array(N);
for (let i = 0; i < N; i++) {
  mask[i] = i % 3 === 0 ? 0 : 1;
  values[i] = Math.sin(i);
}
const boolMask = Array.from(mask, (m) => m === 1);
const payload = { reward: 0 };

const rows = [
  measure("recordMetric(key, v) (baseline)", 2_000_000, (i) => recordMetric("baseline", i)),
  measure("stats.scalar({ reward })", 2_000_000, (i) => {
    payload.reward = i;
    stats.scalar(payload);
  }),
  measure("stats.scalar in scope (using)", 1_000_000, (i) => {
    using _s = stats.scope("actor");
    payload.reward = i;
    stats.scalar(payload);
  }),
  measure("stats.denominator(4096 Uint8Array)", 20_000, () => stats.denominator({ nValidTokens: mask })),
  measure("stats.stat(4096 Float32Array, AVG_MIN_MAX)", 20_000, () => {
    stats.denominator({ nValidTokens: mask });
    stats.stat({ loss: values }, { denominator: "nValidTokens" });
  }),
  measure("stats.stat(4096, AVG) boolean[] mask", 20_000, () => {
    stats.denominator({ bmask: boolMask });
    stats.stat({ ratio: values }, { denominator: "bmask", reduce: StatReduce.AVG });
  }),
];

process.stdout.write("| operation | ns/op | ops/s |\n|---|---:|---:|\n");
for (const r of rows)
  process.stdout.write(
    `| ${r.name} | ${r.nsPerOp.toFixed(1)} | ${Math.round(r.opsPerSec).toLocaleString("en-US")} |\n`,
  );
