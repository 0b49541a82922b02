/**
 * The demo job: a toy RL loop in one process that records with every reduction, flushes once per
 * step to the console, and shows the config it used.
 */
import { isAbsolute, join, relative } from "node:path";
import { recordMetric, metric } from "../core/collector.js";
import { Reduce } from "../core/registry.js";
import { getOrCreateMetricLogger } from "../controller/metric-logger.js";

/** Options of the demo. */
export interface DemoOptions {
  steps: number;
}

/** A deterministic pseudo-random sequence, so the demo prints the same numbers every run. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

export async function runDemo(options: DemoOptions): Promise<void> {
  const logger = await getOrCreateMetricLogger({ processName: "Controller" });
  await logger.initBackends({ console: { loggingMode: "global_reduce" }, store: { loggingMode: "global_reduce" } });
  const random = lcg(42);
  const tokens = metric("rollout/tokens", Reduce.SUM);
  for (let step = 0; step < options.steps; step++) {
    for (let episode = 0; episode < 16; episode++) {
      const reward = Math.round((random() + step * 0.2) * 1000) / 1000;
      const latencyMs = 20 + random() * 80;
      recordMetric("rollout/reward", reward, Reduce.MEAN);
      recordMetric("rollout/reward_std", reward, Reduce.STD);
      recordMetric("rollout/reward_max", reward, Reduce.MAX);
      recordMetric("rollout/reward_min", reward, Reduce.MIN);
      recordMetric("rollout/latency_ms", latencyMs, Reduce.QUANTILES);
      recordMetric("rollout/response_len", Math.round(50 + random() * 200), Reduce.HISTOGRAM);
      recordMetric("rollout/sample", { episode, reward, response: `answer ${episode}` }, Reduce.SAMPLE);
      tokens.record(128);
    }
    recordMetric("train/loss", 1 / (step + 1), Reduce.MEAN);
    await logger.flush(step);
  }
  await logger.shutdown();
  printDashboardHint(logger.run.root, logger.run.runDir);
}

/** How to look at what the demo stored. */
function printDashboardHint(root: string, runDir: string): void {
  const rel = relative(process.cwd(), root);
  const shown = rel === "" ? "." : rel.startsWith("..") || isAbsolute(rel) ? root : rel;
  process.stdout.write(`\nStored in ${join(runDir, "metrics.db")}. Open the dashboard with:\n  npx rankscope ui --root ${shown}\n`);
}
