/** `rankscope traces merge RUN`: one Perfetto-ready `trace.json` from a run's per-rank traces. */
import type { Command } from "commander";
import { mergeTraces } from "../../trace/merge.js";

/** Runs this large get a progress bar on a terminal without asking. */
const AUTO_PROGRESS_BYTES = 8 * 1024 * 1024;
const BAR_WIDTH = 30;

/** A progress bar on stderr, redrawn at most every 100 ms and at 100%. */
export function progressBar(stream: NodeJS.WriteStream, label: string): (done: number, total: number) => void {
  let lastDraw = 0;
  let finished = false;
  return (done, total) => {
    if (finished) return;
    const now = Date.now();
    const complete = done >= total;
    if (!complete && now - lastDraw < 100) return;
    lastDraw = now;
    const fraction = total > 0 ? done / total : 1;
    const filled = Math.round(fraction * BAR_WIDTH);
    const mb = (n: number): string => (n / (1024 * 1024)).toFixed(1);
    stream.write(`\r${label} [${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}] ${String(Math.floor(fraction * 100)).padStart(3)}% ${mb(done)}/${mb(total)} MB`);
    if (complete) {
      finished = true;
      stream.write("\n");
    }
  };
}

export function registerTracesCommand(program: Command): void {
  const traces = program.command("traces").description("work with a run's perf traces (traces/rank-{r}.jsonl)");
  traces
    .command("merge")
    .description("merge every rank's trace into one trace.json (common time origin, sorted) that Perfetto opens")
    .argument("<run>", "the run directory")
    .option("-o, --out <file>", "output file (default RUN/traces/trace.json)")
    .option("--progress", "always show a progress bar on stderr (default: on a terminal, for runs over 8 MB)")
    .option("--no-progress", "never show a progress bar")
    .action(async (run: string, options: { out?: string; progress?: boolean }) => {
      let onProgress: ((done: number, total: number) => void) | undefined;
      let bar: ((done: number, total: number) => void) | undefined;
      if (options.progress === true) bar = progressBar(process.stderr, "merging traces");
      else if (options.progress === undefined && process.stderr.isTTY) {
        onProgress = (done, total) => {
          if (total < AUTO_PROGRESS_BYTES) return;
          bar ??= progressBar(process.stderr, "merging traces");
          bar(done, total);
        };
      }
      const result = await mergeTraces(run, { out: options.out, onProgress: onProgress ?? bar });
      for (const file of result.truncatedFiles) process.stderr.write(`rankscope: ${file} ends in a cut-off line (a crash?); merged up to its last full event\n`);
      if (result.badLines > 0) process.stderr.write(`rankscope: skipped ${result.badLines} unreadable line(s)\n`);
      process.stdout.write(`merged ${result.events} events from ${result.files} rank file(s) into ${result.out}\n`);
    });
}
