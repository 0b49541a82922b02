import { getOrCreateMetricLogger, spawnRanks, splitAttributedKey } from "rankscope";

// Three model-server replicas (child processes) serve two models; each flush reduces their
// requests exactly: per model, the GenAI histograms with p50/p90/p99, counts and rates.
const logger = await getOrCreateMetricLogger({ processName: "Controller" });
await logger.initBackends({
  store: { loggingMode: "global_reduce" }, // metrics.db, for `rankscope ui`'s Inference tab
  jsonl: { loggingMode: "global_reduce" }, // metrics.jsonl: the reduced values and buckets
  raw: { type: "jsonl", loggingMode: "per_rank_no_reduce" }, // every measurement, per replica
  replicas: { type: "store", loggingMode: "per_rank_reduce" }, // each replica's own lines: the slowest replicas
});
const servers = await spawnRanks({
  module: new URL("./inference/model-server.ts", import.meta.url),
  replicas: 3,
  processName: "ModelServer",
});

for (let step = 0; step < 2; step++) {
  await servers.fanout("serve", 8); // 8 requests of each model on every replica
  const { metrics } = await logger.flush(step);
  const counts = new Map<string, string[]>(); // per model: its requests, errors and tokens this flush
  for (const { key, value } of metrics) {
    const { name, attributes } = splitAttributedKey(key); // "inference/requests/total", { … }
    if (!name.startsWith("inference/") || !name.endsWith("/total")) continue;
    const model = attributes["gen_ai.request.model"] ?? "";
    const error = attributes["error.type"] === undefined ? "" : ` (${attributes["error.type"]})`;
    counts.set(model, [...(counts.get(model) ?? []), `${value} ${name.slice(10, -6)}${error}`]);
  }
  for (const [model, parts] of counts) console.log(`step ${step} ${model}: ${parts.join(", ")}`);
}
await logger.shutdown(); // stops the replicas too
