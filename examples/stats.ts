import { getOrCreateMetricLogger, stats } from "rankscope";

// AReaL's stats tracker: scopes, masked statistics, scalars with a count for weighted merges.
const logger = await getOrCreateMetricLogger();
await logger.initBackends({ console: { loggingMode: "global_reduce" } });

await stats.scope("ppo_actor", async () => {
  stats.denominator({ nValidTokens: [true, false, true] }); // a token mask
  stats.stat({ loss: [1, 2, 3] }, { denominator: "nValidTokens" }); // over the valid tokens only
  stats.scalar({ klCoef: 0.1 });
});
stats.get("rollout").scalar({ reward: 0.5 });
stats.get("rollout").scalar({ reward: 1.0 });

await logger.flush(0);
await logger.shutdown();
