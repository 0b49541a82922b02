import { getOrCreateMetricLogger, spawnRanks } from "rankscope";

// One controller, an actor on 2 replicas × 2 ranks (child processes); each rank runs my-actor.ts,
// whose myFn() records its local rank (0 or 1) with Reduce.SUM.
const logger = await getOrCreateMetricLogger({ processName: "Controller" });
await logger.initBackends({ console: { loggingMode: "global_reduce" } });
const actor = await spawnRanks({
  module: new URL("./distributed/my-actor.ts", import.meta.url),
  replicas: 2,
  ranksPerReplica: 2,
  processName: "MyActor",
});

for (let i = 0; i < 2; i++) await actor.fanout("myFn"); // 2 steps on every rank
await logger.flush(0); // (0 + 1) × 2 steps × 2 replicas
await logger.shutdown(); // stops the ranks too
