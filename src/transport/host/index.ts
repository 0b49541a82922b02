/**
 * `rankscope/host`: per-host reduction over NATS (see docs/scale.md). The controller calls
 * `serveHostsOverNats`; one agent per host (`startHostAgent`, or the `transport/host/main.js`
 * process) gathers the states of the ranks that join with the same `hostId`.
 */
export { HostAgent, startHostAgent, type HostAgentOptions, type HostAgentStats } from "./agent.js";
export { HostHandle, HostServer, serveHostsOverNats, type HostServerStats, type ServeHostsOverNatsOptions } from "./server.js";
