/**
 * `rankscope/host`: per-host reduction over NATS (see docs/scale.md). The controller calls
 * `serveHostsOverNats`; one agent per host (`startHostAgent`, or the `transport/host/main.js`
 * process) gathers the states of the ranks that join with the same `hostId`; for thousands of
 * hosts, rack agents (`startRackAgent`, or the `transport/rack/main.js` process) serve the host
 * agents of their rack and answer the controller once per rack, at any depth the launcher chooses.
 */
// `serveHostsOverNats` without a logger registers hosts with `getOrCreateMetricLogger()`'s, which
// the controller provides when it loads (src/pipeline/default-logger.ts).
import "./controller/metric-logger.js";
export { HostAgent, startHostAgent, type HostAgentOptions, type HostAgentStats } from "./transport/host/agent.js";
export { RackAgent, startRackAgent, type RackAgentOptions, type RackAgentStats } from "./transport/rack/agent.js";
export {
  HostHandle,
  HostServer,
  serveHostsOverNats,
  type HostServerStats,
  type ServeHostsOverNatsOptions,
} from "./transport/host/server.js";
