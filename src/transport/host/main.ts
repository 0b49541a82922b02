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
import { describeError } from "../../core/diagnostics.js";
import { integerKind, resolveSetting, textKind } from "../../core/settings.js";
import { startHostAgent } from "./agent.js";

/** The agent's settings: environment variables only, through the one resolver (bad values are errors). */
const OWNER = "the host agent";
let url: string | undefined;
let runId: string | undefined;
let hostId: string;
let rackId: string | undefined;
let deadline: number;
try {
  const text = (env: string): string | undefined =>
    resolveSetting<string | undefined>(
      { owner: OWNER, option: env, env, kind: textKind(), fallback: undefined },
      undefined,
    );
  url = text("RANKSCOPE_NATS_URL");
  runId = text("RANKSCOPE_RUN_ID");
  hostId = text("RANKSCOPE_HOST_ID") ?? hostname().replace(/[^A-Za-z0-9_-]/g, "_");
  rackId = text("RANKSCOPE_RACK_ID");
  deadline = resolveSetting(
    {
      owner: OWNER,
      option: "RANKSCOPE_JOIN_DEADLINE_MS",
      env: "RANKSCOPE_JOIN_DEADLINE_MS",
      kind: integerKind(1),
      fallback: 30_000,
    },
    undefined,
  );
} catch (error) {
  process.stderr.write(`rankscope host agent: ${describeError(error)}\n`);
  process.exit(2);
}
if (url === undefined || runId === undefined) {
  process.stderr.write(
    "rankscope host agent: set RANKSCOPE_NATS_URL (nats://host:port[,…]) and RANKSCOPE_RUN_ID (the controller's run id)\n",
  );
  process.exit(2);
}
try {
  const agent = await startHostAgent({
    url,
    runId,
    hostId,
    joinDeadlineMs: deadline,
    ...(rackId === undefined ? {} : { rackId }),
  });
  process.stdout.write(`host agent ${hostId} ready\n`);
  const reason = await agent.closed;
  process.stdout.write(`host agent ${hostId} left: ${reason}\n`);
} catch (error) {
  process.stderr.write(`rankscope host agent ${hostId}: ${describeError(error)}\n`);
  process.exitCode = 1;
}
