/**
 * Which W&B run one backend instance writes, and as whom (the modes of `wandb-backend.ts`):
 *
 * - `run`: a run of its own — the controller's one run in `global_reduce`, `{experiment}_{trial}`
 *   unless `runId` is given; or a rank's `{runId}_{rankName}` in the per-rank modes.
 * - `primary`: the controller side of per-rank modes; with `perRankShareRun` it creates the run the
 *   ranks share and hands it to them (`SharedRunMetadata`), and it marks the run complete.
 * - `sharedRank`: a rank writing into the primary's run through W&B's shared mode, as a client of
 *   its own, its keys prefixed `{rankName}/`.
 */
import { warn } from "../../core/diagnostics.js";
import type { BackendContext } from "../backend.js";
import { configJson, isUpsertVariables, PRIMARY_CLIENT_ID, type UpsertVariables } from "./client/api.js";
import { sanitiseRunId, type ResolvedWandbOptions } from "./options.js";
import { spoolDirFor } from "./spool/spool.js";
import type { RunTarget } from "./writer/run-target.js";

/** What the primary of a shared run hands to the ranks: the run exactly as it created it. */
export interface SharedRunMetadata {
  readonly upsert: UpsertVariables;
  readonly resume: string;
}

export type Role = "run" | "primary" | "sharedRank";

/** The run one instance writes: its role, the writer's target, the key prefix and the name warnings use. */
export interface RunOf {
  readonly role: Role;
  readonly target: RunTarget;
  /** `{rankName}/` for a rank of a shared run, else empty. */
  readonly prefix: string;
  readonly label: string;
}

/** The run as the options and the job name it, before a rank's own suffix. */
function baseUpsert(
  o: ResolvedWandbOptions,
  config: Record<string, unknown>,
  context: BackendContext,
): UpsertVariables {
  return {
    name: o.runId ?? sanitiseRunId(`${context.experiment}_${context.trial}`),
    project: o.project ?? context.experiment,
    entity: o.entity ?? null,
    displayName: o.name ?? context.trial,
    groupName: o.group ?? `${context.experiment}_${context.trial}`,
    jobType: o.jobType ?? null,
    notes: o.notes ?? null,
    tags: o.tags ?? null,
    config: configJson(config),
  };
}

/** The run of a rank of a shared run: the primary's, as it handed it over (else the derived one, with a warning). */
function sharedRun(context: BackendContext, derived: UpsertVariables): UpsertVariables {
  const shared = context.primaryMetadata["upsert"];
  if (isUpsertVariables(shared)) return shared;
  warn(
    `wandb.noPrimary:${context.backendName}`,
    `wandb (perRankShareRun) on rank ${context.identity.rankName}: no shared run id from the controller; using the derived id ${derived.name}`,
  );
  return derived;
}

/** Which run this instance writes, in which role, from its options, its config and where it runs. */
export function runOf(
  o: ResolvedWandbOptions,
  config: Record<string, unknown>,
  context: BackendContext,
  perRankShareRun: boolean,
): RunOf {
  let upsert = baseUpsert(o, config, context);
  let role: Role = "run";
  let clientId: string | null = null;
  let prefix = "";
  const rankName = context.identity.rankName;
  if (context.role === "controller" && context.loggingMode !== "global_reduce") {
    role = "primary";
    clientId = PRIMARY_CLIENT_ID;
  } else if (context.role === "rank" && context.loggingMode !== "global_reduce" && perRankShareRun) {
    role = "sharedRank";
    clientId = rankName;
    prefix = `${rankName}/`;
    upsert = sharedRun(context, upsert);
  } else if (context.role === "rank") {
    upsert = {
      ...upsert,
      name: sanitiseRunId(`${upsert.name}_${rankName}`),
      displayName: `${upsert.displayName}_${rankName}`,
    };
  }
  const target: RunTarget = {
    upsert,
    resume: o.resume,
    clientId,
    shared: role !== "run",
    sendsComplete: role !== "sharedRank",
    lazy: context.role === "rank",
    runDir: context.runDir,
    spoolDir: spoolDirFor(context.runDir, upsert.name),
  };
  return { role, target, prefix, label: clientId === null ? upsert.name : `${upsert.name} (${clientId})` };
}
