/**
 * `rankscope/nats`: ranks on other machines, over a NATS server (docs/ranks.md). The controller
 * calls `serveRanksOverNats`; ranks join with `joinRun` and its URL. The carrier itself is
 * `transport/controller/nats.ts`.
 */
// `serveRanksOverNats` without a logger registers ranks with `getOrCreateMetricLogger()`'s, which
// the controller provides when it loads (src/pipeline/default-logger.ts).
import "./controller/metric-logger.js";

export * from "./transport/controller/nats.js";
