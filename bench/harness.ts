/**
 * A small timing harness shared by the benchmarks: median ns per call over several runs, bytes
 * allocated per call in steady state, and a markdown table. Run through `npm run bench`, which
 * gives each benchmark file its own process with --expose-gc and a large young generation (so a
 * measured loop allocating anything at all shows up as heap growth instead of a silent scavenge).
 */

/** Runs `loop(n)` (which must do n calls) and returns the median ns per call over `runs` runs. */
export function nsPerCall(
  loop: (n: number) => void,
  options: { n?: number; runs?: number; warmup?: number } = {},
): number {
  const n = options.n ?? 2_000_000;
  const runs = options.runs ?? 7;
  loop(options.warmup ?? Math.min(n, 500_000));
  const samples: number[] = [];
  for (let r = 0; r < runs; r++) {
    const start = process.hrtime.bigint();
    loop(n);
    samples.push(Number(process.hrtime.bigint() - start) / n);
  }
  return median(samples);
}

/** Bytes of heap allocated per call by `loop(n)` in steady state (after warm-up). */
export function bytesPerCall(loop: (n: number) => void, n = 500_000): number {
  return Math.max(0, heapGrowth(loop, n) - heapGrowth(emptyLoop, n)) / n;
}

/** The runtime's own background allocation over a loop, subtracted from every measurement. */
function emptyLoop(n: number): void {
  let x = 0;
  for (let i = 0; i < n; i++) x += i & 1;
  if (x < 0) throw new Error("unreachable");
}

function heapGrowth(loop: (n: number) => void, n: number): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  loop(n);
  gc?.();
  const before = process.memoryUsage().heapUsed;
  loop(n);
  return process.memoryUsage().heapUsed - before;
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** Print a markdown table. */
export function printTable(header: readonly string[], rows: readonly (readonly (string | number)[])[]): void {
  const cells = rows.map((r) => r.map((c) => (typeof c === "number" ? format(c) : c)));
  process.stdout.write(`| ${header.join(" | ")} |\n| ${header.map(() => "---").join(" | ")} |\n`);
  for (const r of cells) process.stdout.write(`| ${r.join(" | ")} |\n`);
  process.stdout.write("\n");
}

function format(x: number): string {
  if (x >= 100) return x.toFixed(0);
  if (x >= 10) return x.toFixed(1);
  return x.toFixed(2);
}
