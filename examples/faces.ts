import { getLogger, Logger, stats, StatReduce } from "rankscope";

// NeMo-RL style: one Logger over the same backends; AReaL-style stats recorded anywhere.
const logger = await Logger.create({
  console: { layout: "grid" }, // AReaL's 4-pairs-per-row table
  jsonl: true,
  numValSamplesToPrint: 2,
  runConfig: { lr: 1e-5, wandb: { project: "demo", apiKey: "not-written-to-disk" } },
});
const log = getLogger("Trainer");

for (let step = 0; step < 3; step++) {
  await stats.recordTiming("rollout", async () => {
    stats.get("rollout").scalar({ reward: step / 2 });
  });
  stats.scope("ppo_actor", () => {
    const mask = new Uint8Array([1, 1, 0, 1]);
    stats.denominator({ nValidTokens: mask });
    stats.stat({ loss: new Float32Array([0.5, 0.25, 9, 0.75]) }, { denominator: "nValidTokens" });
    stats.stat({ clipped: [0, 1, 1, 0] }, { denominator: "nValidTokens", reduce: StatReduce.SUM });
  });
  await logger.logMetrics({ lr: 1e-5, grad: { norm: 1 / (step + 1) } }, step, { prefix: "train" });
  log.info({ step }, "step done");
}
logger.printValidationSamples([
  { prompt: "2+2?", response: "4", reward: 1 },
  { prompt: "3+3?", response: "7", reward: 0 },
  { prompt: "1+1?", response: "2", reward: 1 },
]);
await logger.finish();
