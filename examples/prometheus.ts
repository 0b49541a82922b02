// An inference server's own HTTP server serves /metrics for Prometheus to scrape.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { getOrCreateMetricLogger, recordMetric, Reduce } from "rankscope";
import { metricsHandler } from "rankscope/prometheus";

const logger = await getOrCreateMetricLogger({ experiment: "prometheus-example" });
await logger.initBackends({ prometheus: { loggingMode: "global_reduce", serve: false } });
const server = createServer(metricsHandler()).listen(0, "127.0.0.1");
await new Promise((resolve) => server.once("listening", resolve));

for (let step = 1; step <= 2; step++) {
  recordMetric("serve/tokens", 100 * step, Reduce.SUM); // a counter: the running total
  recordMetric("serve/batch_size", 8 * step, Reduce.MEAN); // a gauge: the latest flush's value
  recordMetric("eval/acc@1", 0.5, Reduce.MAX); // "/" and "@" become "_" in Prometheus names
  await logger.flush(step);
}

const { port } = server.address() as AddressInfo;
const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
console.log(text.trim());
server.close();
await logger.shutdown();
