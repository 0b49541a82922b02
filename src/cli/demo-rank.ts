/**
 * The ranks of the demo job (`rankscope demo`): an actor whose exported functions the controller
 * calls on every rank, like Forge's endpoints.
 */
import { recordMetric } from "../core/collector.js";
import { Reduce } from "../core/registry.js";
import { currentRank } from "../pipeline/current-rank.js";
import { flushStream } from "../stream/stream.js";
import { traceScope } from "../trace/perf-tracer.js";
import { getLogger } from "../textlog/logger.js";

/** Seed 001 §2: record this rank's local rank with SUM. */
export function myFn(): void {
  recordMetric("my_sum_rank_metric", currentRank().localRank, Reduce.SUM);
}

/** A deterministic pseudo-random sequence, so the demo prints the same numbers every run. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** One step of a toy RL rollout on this rank, recorded with every reduction. */
export function rollout(step: number): void {
  traceScope("rollout", { category: "compute", args: { step } }, () => recordRollout(step));
  getLogger("RolloutWorker").info({ step, episodes: 8 }, "rollout done");
}

function recordRollout(step: number): void {
  const { rank } = currentRank();
  const random = lcg(7919 * (rank + 1) + step);
  for (let episode = 0; episode < 8; episode++) {
    const reward = Math.round((random() + step * 0.2 + rank * 0.05) * 1000) / 1000;
    const latencyMs = 20 + random() * 80 + rank * 10;
    recordMetric("rollout/reward", reward, Reduce.MEAN);
    recordMetric("rollout/reward_std", reward, Reduce.STD);
    recordMetric("rollout/reward_max", reward, Reduce.MAX);
    recordMetric("rollout/reward_min", reward, Reduce.MIN);
    recordMetric("rollout/latency_ms", latencyMs, Reduce.QUANTILES);
    recordMetric("rollout/response_len", Math.round(50 + random() * 200), Reduce.HISTOGRAM);
    recordMetric("rollout/sample", { rank, episode, reward, response: `answer ${rank}.${episode}` }, Reduce.SAMPLE);
    recordMetric("rollout/tokens", 128, Reduce.SUM);
  }
  // Each rank's share of the (toy) training loss: a line per rank, their mean globally.
  recordMetric("train/loss", 1 / (step + 1) + rank * 0.01, Reduce.MEAN);
}

/** Wait until the raw values recorded so far have reached this rank's stream backends (the console). */
export async function drainStream(): Promise<void> {
  await flushStream(10_000);
}
