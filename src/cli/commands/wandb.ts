/**
 * `rankscope wandb sync RUN`: send a run's W&B spool (what was recorded offline or could not be
 * sent) to the server. Safe to repeat: lines the server has are skipped, so a second sync is a
 * no-op. Progress goes to stderr as a bar; the summary line to stdout.
 */
import type { Command } from "commander";
import { ProgressLine, progressBar } from "../progress.js";

/** `[#####-----]  50%  500/1000 lines  run-id`. */
function syncProgress(done: number, total: number, label: string): string {
  return `${progressBar(total === 0 ? 1 : done / total)}  ${done}/${total} lines  ${label}`;
}

export function registerWandbCommand(program: Command): void {
  const wandb = program.command("wandb").description("Weights & Biases: replay offline spools");
  wandb
    .command("sync")
    .description(
      "send the W&B spool of a run directory (RUN/wandb/<runId>/) to the server; repeating it sends nothing twice",
    )
    .argument("<run>", "run directory (or its wandb/ folder, or one spool directory)")
    .option("--base-url <url>", "W&B server (default: the one the spool was written for)")
    .action(async (run: string, options: { baseUrl?: string }) => {
      const { syncSpool } = await import("../../backends/wandb/index.js");
      const bar = new ProgressLine();
      const result = await syncSpool(run, {
        ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }),
        onProgress: ({ runId, done, total }) => bar.update(syncProgress(done, total, runId), done >= total),
      });
      bar.end();
      for (const r of result.runs) {
        process.stdout.write(
          `${r.runId}: ${r.linesSent} history line(s) sent, ${r.linesSkipped} already on the server${r.completed ? ", run marked complete" : ""} (${r.requests} request(s))\n`,
        );
      }
    });
}
