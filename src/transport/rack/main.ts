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
import { describeError } from "../../core/diagnostics.js";
import { integerKind, resolveSetting, textKind } from "../../core/settings.js";
import { startRackAgent } from "./agent.js";

const OWNER = "the rack agent";
let url: string | undefined;
let runId: string | undefined;
let rackId: string | undefined;
let parentRackId: string | undefined;
let deadline: number;
try {
  const text = (env: string): string | undefined =>
    resolveSetting<string | undefined>(
      { owner: OWNER, option: env, env, kind: textKind(), fallback: undefined },
      undefined,
    );
  url = text("RANKSCOPE_NATS_URL");
  runId = text("RANKSCOPE_RUN_ID");
  rackId = text("RANKSCOPE_RACK_ID");
  parentRackId = text("RANKSCOPE_PARENT_RACK_ID");
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
  process.stderr.write(`rankscope rack agent: ${describeError(error)}\n`);
  process.exit(2);
}
if (url === undefined || runId === undefined || rackId === undefined) {
  process.stderr.write(
    "rankscope rack agent: set RANKSCOPE_NATS_URL (nats://host:port[,…]), RANKSCOPE_RUN_ID (the controller's run id) and RANKSCOPE_RACK_ID (this rack's id)\n",
  );
  process.exit(2);
}
try {
  const agent = await startRackAgent({
    url,
    runId,
    rackId,
    joinDeadlineMs: deadline,
    ...(parentRackId === undefined ? {} : { parentRackId }),
  });
  process.stdout.write(`rack agent ${rackId} ready\n`);
  const reason = await agent.closed;
  process.stdout.write(`rack agent ${rackId} left: ${reason}\n`);
} catch (error) {
  process.stderr.write(`rankscope rack agent ${rackId}: ${describeError(error)}\n`);
  process.exitCode = 1;
}
