/**
 * `node …/transport/host/main.js`: run the host agent of this host as its own small process, the
 * way a launcher starts it (one per machine, before or beside the ranks). Configured by
 * environment: `RANKSCOPE_NATS_URL` (one URL or every cluster node, comma-separated),
 * `RANKSCOPE_RUN_ID`, `RANKSCOPE_HOST_ID` (default: the machine's host name, made a subject token),
 * `RANKSCOPE_JOIN_DEADLINE_MS`. Prints `host agent <id> ready` once registered; exits when the
 * controller shuts the run down.
 */
import { hostname } from "node:os";
import { describeError } from "../../core/diagnostics.js";
import { startHostAgent } from "./agent.js";

const url = process.env["RANKSCOPE_NATS_URL"];
const runId = process.env["RANKSCOPE_RUN_ID"];
if (url === undefined || url === "" || runId === undefined || runId === "") {
  process.stderr.write("rankscope host agent: set RANKSCOPE_NATS_URL (nats://host:port[,…]) and RANKSCOPE_RUN_ID (the controller's run id)\n");
  process.exit(2);
}
const hostId = process.env["RANKSCOPE_HOST_ID"] ?? hostname().replace(/[^A-Za-z0-9_-]/g, "_");
const deadline = Number(process.env["RANKSCOPE_JOIN_DEADLINE_MS"] ?? "30000");
try {
  const agent = await startHostAgent({ url, runId, hostId, joinDeadlineMs: Number.isInteger(deadline) && deadline > 0 ? deadline : 30_000 });
  process.stdout.write(`host agent ${hostId} ready\n`);
  const reason = await agent.closed;
  process.stdout.write(`host agent ${hostId} left: ${reason}\n`);
} catch (error) {
  process.stderr.write(`rankscope host agent ${hostId}: ${describeError(error)}\n`);
  process.exitCode = 1;
}
