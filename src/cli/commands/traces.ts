/** `rankscope traces merge RUN`: one Perfetto-ready `trace.json` from a run's per-rank traces. */
import type { Command } from "commander";
import { existsSync } from "node:fs";
import { mergeTraces } from "../../trace/merge.js";
import { ProgressLine, progressBar } from "../progress.js";
import { resolveRunArg, ROOT_OPTION_HELP } from "../run-arg.js";

/** Runs this large get a progress bar on a terminal without asking. */
const AUTO_PROGRESS_BYTES = 8 * 1024 * 1024;

/** `merging traces [#####-----]  50% 12.0/24.0 MB`. */
function mergeProgress(done: number, total: number): string {
  const mb = (n: number): string => (n / (1024 * 1024)).toFixed(1);
  return `merging traces ${progressBar(total > 0 ? done / total : 1)} ${mb(done)}/${mb(total)} MB`;
}

export function registerTracesCommand(program: Command): void {
  const traces = program.command("traces").description("work with a run's perf traces (traces/rank-{r}.jsonl)");
  traces
    .command("merge")
    .description("merge every rank's trace into one trace.json (common time origin, sorted) that Perfetto opens")
    .argument("<run>", "a run directory, or experiment/trial under --root")
    .option("--root <dir>", ROOT_OPTION_HELP)
    .option("-o, --out <file>", "output file (default RUN/traces/trace.json)")
    .option("--progress", "always show a progress bar on stderr (default: on a terminal, for runs over 8 MB)")
    .option("--no-progress", "never show a progress bar")
    .action(async (run: string, options: { out?: string; root?: string; progress?: boolean }) => {
      // A directory as given (mergeTraces says what it lacks), else experiment/trial under --root, like tail and export.
      const runDir = existsSync(run) ? run : resolveRunArg(run, options.root, "traces");
      const bar = new ProgressLine();
      // --progress: always; by default only on a terminal and for large runs; --no-progress: never.
      const show = (total: number): boolean =>
        options.progress === true ||
        (options.progress === undefined && process.stderr.isTTY && total >= AUTO_PROGRESS_BYTES);
      const onProgress =
        options.progress === false
          ? undefined
          : (done: number, total: number): void => {
              if (show(total)) bar.update(mergeProgress(done, total), done >= total);
            };
      const result = await mergeTraces(runDir, { out: options.out, onProgress });
      bar.end();
      for (const file of result.truncatedFiles)
        process.stderr.write(
          `rankscope: ${file} ends in a cut-off line (a crash?); merged up to its last full event\n`,
        );
      if (result.badLines > 0) process.stderr.write(`rankscope: skipped ${result.badLines} unreadable line(s)\n`);
      process.stdout.write(`merged ${result.events} events from ${result.files} rank file(s) into ${result.out}\n`);
    });
}
