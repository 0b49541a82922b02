/**
 * `node …/transport/host/main.js`: run the host agent of this host as its own small process, the
 * way a launcher starts it (one per machine, before or beside the ranks). Configured by
 * environment: `RANKSCOPE_NATS_URL` (one URL or every cluster node, comma-separated),
 * `RANKSCOPE_RUN_ID`, `RANKSCOPE_RUN_SECRET` (the controller's run secret: every message is sealed
 * with it), `RANKSCOPE_HOST_ID` (default: the machine's host name, made a subject token),
 * `RANKSCOPE_RACK_ID` (the rack agent to register with, when the launcher starts rack agents;
 * default: the controller),
 * `RANKSCOPE_JOIN_DEADLINE_MS`, and the NATS credentials (`RANKSCOPE_NATS_USER`, `…_PASSWORD`,
 * `…_TOKEN`, `…_NKEY_SEED(_FILE)`, `…_CREDS_FILE`, `…_TLS*`: docs/security.md). Prints
 * `host agent <id> ready` once registered; exits when the controller shuts the run down.
 */
import { hostname } from "node:os";
import { startHostAgent } from "./agent.js";
import { runAgentProcess } from "./agent-process.js";

await runAgentProcess({
  what: "host agent",
  unset: "set RANKSCOPE_NATS_URL (nats://host:port[,…]) and RANKSCOPE_RUN_ID (the controller's run id)",
  read: (text) => {
    const hostId = text("RANKSCOPE_HOST_ID") ?? hostname().replace(/[^A-Za-z0-9_-]/g, "_");
    const rackId = text("RANKSCOPE_RACK_ID");
    return {
      id: hostId,
      start: (settings) => startHostAgent({ ...settings, hostId, ...(rackId === undefined ? {} : { rackId }) }),
    };
  },
});
