/**
 * What the tests of inference runs share (test/inference/, test/alerts/inference.test.ts, the
 * Inference tab's tests in test/ui/web/): a job's quiet logger over a run of its own, its
 * backends started.
 */
import { join } from "node:path";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import type { MetricLoggerOptions } from "../../src/controller/logger-options.js";
import type { BackendsConfig } from "../../src/pipeline/config.js";

/** What `runLogger` makes: the logger, and its run's directory. */
export interface RunLogger {
  readonly logger: MetricLogger;
  readonly runDir: string;
}

/**
 * A quiet logger of the run `experiment/trial` under `root` (its run directory
 * `root/experiment/trial`) in the process named `processName`, with `options` besides, and
 * `backends` started.
 */
export async function runLogger(
  root: string,
  experiment: string,
  trial: string,
  processName: string,
  backends: BackendsConfig,
  options: MetricLoggerOptions = {},
): Promise<RunLogger> {
  const runDir = join(root, experiment, trial);
  const logger = new MetricLogger({ processName, runDir, experiment, trial, quiet: true, ...options });
  await logger.initBackends(backends);
  return { logger, runDir };
}
