// The run's timeline from a RANKSCOPE_TEST_CPU file (scripts/file-cpu.mjs): per slice of the run,
// how many test files were running and how many cores their CPU filled (each file's CPU spread
// evenly over its life), then the files that ended last. Slices where the files ran but the cores
// were not full are where the suite waited; the last files show what a run ends on.
//
//   node scripts/file-timeline.mjs cpu.txt [slice seconds, default 15]
import { readFileSync } from "node:fs";

const [path, sliceArg] = process.argv.slice(2);
if (path === undefined) {
  console.error("usage: node scripts/file-timeline.mjs CPU_FILE [SLICE_SECONDS]");
  process.exit(2);
}
const slice = Number(sliceArg ?? 15);
const files = readFileSync(path, "utf8")
  .split("\n")
  .map((line) => line.trim().split(/\s+/))
  .filter((f) => f.length === 4)
  .map(([cpu, name, start, end]) => ({ cpu: Number(cpu), name, start: Number(start), end: Number(end) }));
if (files.length === 0) {
  console.error(`${path}: no lines with start and end times (written by scripts/file-cpu.mjs)`);
  process.exit(1);
}
const t0 = Math.min(...files.map((f) => f.start));
const t1 = Math.max(...files.map((f) => f.end));
console.log(
  `${files.length} files, ${(t1 - t0).toFixed(0)} s from the first start to the last end, ${files.reduce((s, f) => s + f.cpu, 0).toFixed(0)} s of CPU`,
);
console.log("   from  files  cores");
for (let from = t0; from < t1; from += slice) {
  const to = Math.min(from + slice, t1);
  let running = 0;
  let cpu = 0;
  for (const f of files) {
    const overlap = Math.min(to, f.end) - Math.max(from, f.start);
    if (overlap <= 0) continue;
    running++;
    cpu += (f.cpu * overlap) / Math.max(f.end - f.start, 1e-3);
  }
  console.log(
    `${(from - t0).toFixed(0).padStart(6)} s ${String(running).padStart(5)} ${(cpu / (to - from)).toFixed(2).padStart(6)}`,
  );
}
console.log("the last to end (seconds after the first start: start → end, CPU s):");
for (const f of [...files].sort((a, b) => b.end - a.end).slice(0, 8)) {
  console.log(
    `  ${(f.start - t0).toFixed(0).padStart(4)} → ${(f.end - t0).toFixed(0).padStart(4)}  ${f.cpu.toFixed(1).padStart(5)}  ${f.name}`,
  );
}
