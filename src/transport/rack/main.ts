/**
 * `node …/transport/rack/main.js`: run the rack agent of one rack as its own small process, the
 * way a launcher starts it (one per rack, or per level-2 group of hosts; docs/scale.md, "A deeper
 * tree"). Configured by environment: `RANKSCOPE_NATS_URL` (one URL or every cluster node,
 * comma-separated), `RANKSCOPE_RUN_ID`, `RANKSCOPE_RUN_SECRET` (the controller's run secret),
 * `RANKSCOPE_RACK_ID` (required: this rack's id; its host agents start with the same),
 * `RANKSCOPE_PARENT_RACK_ID` (the rack agent above, for a deeper tree; default: the controller),
 * `RANKSCOPE_JOIN_DEADLINE_MS`, and the NATS credentials of the `rack` role (`RANKSCOPE_NATS_*`:
 * docs/security.md). Prints `rack agent <id> ready` once registered; exits when the run is shut down.
 */
import { runAgentProcess } from "../host/agent-process.js";
import { startRackAgent } from "./agent.js";

await runAgentProcess({
  what: "rack agent",
  unset:
    "set RANKSCOPE_NATS_URL (nats://host:port[,…]), RANKSCOPE_RUN_ID (the controller's run id) and RANKSCOPE_RACK_ID (this rack's id)",
  read: (text) => {
    const rackId = text("RANKSCOPE_RACK_ID");
    const parentRackId = text("RANKSCOPE_PARENT_RACK_ID");
    return {
      id: rackId,
      start: (settings, id) =>
        startRackAgent({ ...settings, rackId: id, ...(parentRackId === undefined ? {} : { parentRackId }) }),
    };
  },
});
