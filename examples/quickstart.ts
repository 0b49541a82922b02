import { getOrCreateMetricLogger, recordMetric, Reduce } from "rankscope";

// Set up the logger (in the controller process)
const logger = await getOrCreateMetricLogger({ processName: "Controller" });
await logger.initBackends({ console: { loggingMode: "global_reduce" } });

// Call this from anywhere in the process: no logger, no dictionary to pass around
function myFn(n: number): void {
  recordMetric("my_sum_metric", n, Reduce.SUM); // sum(1, 2, 3)
  recordMetric("my_max_metric", n, Reduce.MAX); // max(1, 2, 3)
  recordMetric("my_mean_metric", n, Reduce.MEAN); // mean(1, 2, 3)
}

for (const n of [1, 2, 3]) myFn(n);

// Flush once per step, shut down when done
await logger.flush(0);
await logger.shutdown();
