/** `rankscope demo`: a small job that exercises every reduction and prints what it logged. */
import type { Command } from "commander";
import { runDemo } from "../demo-job.js";

export function registerDemoCommand(program: Command): void {
  program
    .command("demo")
    .description("run a small job that records metrics with every reduction and prints them")
    .option("--steps <n>", "how many steps", "3")
    .action(async (options: { steps: string }) => {
      const steps = Number(options.steps);
      if (!Number.isInteger(steps) || steps < 1) throw new Error(`--steps must be a positive integer, got ${options.steps}`);
      await runDemo({ steps });
    });
}
