import {
  getOrCreateMetricLogger,
  recordMetric,
  Reduce,
  registerBackend,
  type Backend,
  type BackendContext,
  type Metric,
} from "rankscope";

// A backend that alerts when a metric crosses a threshold (think Slack, PagerDuty, a file).
class ThresholdAlertBackend implements Backend {
  private source = "";
  private readonly threshold: number;
  constructor(threshold: number) {
    this.threshold = threshold;
  }

  init(context: BackendContext): void {
    this.source = context.displayName;
  }

  logBatch(metrics: readonly Metric[], step: number): void {
    for (const m of metrics) {
      if (m.value > this.threshold)
        console.log(`[${this.source}] step ${step}: ${m.key} = ${m.value} > ${this.threshold}`);
    }
  }
}

registerBackend("alert", (options) => new ThresholdAlertBackend(Number(options["threshold"])), {
  knownOptions: ["threshold"],
});
// Its options, for the compiler: `{ alert: { loggingMode: "global_reduce", treshold: 10 } }` is then a compile error.
declare module "rankscope" {
  interface BackendOptionsMap {
    alert: { threshold: number };
  }
}

const logger = await getOrCreateMetricLogger();
await logger.initBackends({ alert: { loggingMode: "global_reduce", threshold: 10 } });
for (let step = 0; step < 3; step++) {
  recordMetric("grad_norm", 4 * step + 3, Reduce.MAX);
  recordMetric("grad_norm", 5 * step, Reduce.MAX);
  await logger.flush(step);
}
await logger.shutdown();
