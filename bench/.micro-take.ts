import { Collector, type MetricEntry } from "../src/core/collector.js";
import { StateEncoder } from "../src/transport/wire/codec.js";
import { scaleKeys } from "./scale-keys.js";
const keys = scaleKeys(1000);
const only = process.env["ONLY"];
const ks = only === undefined ? keys : keys.filter((k) => only.split(",").includes(k.reduce));
const ranks = 256;
const cs = Array.from({ length: ranks }, () => new Collector());
const es = cs.map((c) => ks.map(({ key, reduce }) => c.entryFor(key, reduce) as MetricEntry));
const enc = cs.map(() => new StateEncoder());
const header = { proto: "rankscope", v: 1, run: "r", t: "reply" };
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const times: number[] = [];
for (let f = 0; f < 30; f++) {
  es.forEach((e, r) => { for (let k = 0; k < e.length; k++) (e[k] as MetricEntry).accumulator.append((((r * 7 + k * 13 + f) % 101) / 10) as never); });
  const t0 = cpu();
  for (let r = 0; r < ranks; r++) (enc[r] as StateEncoder).encodeTaking(header, (cs[r] as Collector).entriesInKeyOrder());
  times.push(cpu() - t0);
}
times.sort((a, b) => a - b);
console.log(only ?? "all", "per rank µs (median of 30):", ((times[15] as number) / ranks * 1000).toFixed(1), "min", ((times[0] as number) / ranks * 1000).toFixed(1));
