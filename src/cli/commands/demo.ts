/** `rankscope demo`: a small distributed job that shows the logging modes and every reduction. */
import type { Command } from "commander";
import { runDemo } from "../demo-job.js";

export function registerDemoCommand(program: Command): void {
  program
    .command("demo")
    .description(
      "run a small distributed job (2 replicas × 2 ranks) that shows the three logging modes and every reduction",
    )
    .option("--steps <n>", "steps of the toy RL loop", "3")
    .option("--threads", "run the ranks as worker threads instead of child processes")
    .option("--nats <url>", "carry the ranks' messages over this NATS server (e.g. nats://127.0.0.1:4222)")
    .action(async (options: { steps: string; threads?: boolean; nats?: string }) => {
      const steps = Number(options.steps);
      if (!Number.isInteger(steps) || steps < 1)
        throw new Error(`--steps must be a positive integer, got ${options.steps}`);
      if (options.nats !== undefined && options.threads === true)
        throw new Error("--nats carries messages between processes; it cannot be combined with --threads");
      await runDemo({
        steps,
        kind: options.threads === true ? "thread" : "process",
        ...(options.nats === undefined ? {} : { natsUrl: options.nats }),
      });
    });
}
