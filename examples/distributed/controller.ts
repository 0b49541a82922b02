// An actor on 2 replicas × 2 ranks (child processes), one logging mode per flush.
import { getOrCreateMetricLogger, LOGGING_MODES, spawnRanks } from "rankscope";

const mlogger = await getOrCreateMetricLogger({ processName: "Controller" });
const myActor = await spawnRanks({
  module: new URL("./my-actor.ts", import.meta.url),
  replicas: 2,
  ranksPerReplica: 2,
  processName: "MyActor",
  output: "ordered", // per-rank output printed rank by rank at syncOutput()
});

let step = 0;
for (const loggingMode of LOGGING_MODES) {
  await mlogger.initBackends({ console: { loggingMode } });
  for (let i = 0; i < 2; i++) await myActor.fanout("myFn");
  await mlogger.flush(step++);
  await myActor.syncOutput();
}
await mlogger.shutdown(); // stops the ranks too
