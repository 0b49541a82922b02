/** A `runs` row as the dashboard lists it: labels, status, params and lost ranks, checked. */
import { isRecord } from "../core/json.js";
import type { LostRank } from "../store/read-types.js";
import type { LabelledRun } from "../ui/source.js";

export interface RunRow {
  id: number;
  run_key: string;
  experiment: string;
  trial: string;
  status: string;
  started_at: number | null;
  ended_at: number | null;
  updated_at: number | null;
  resume_step: number;
  tags: string[];
  grp: string | null;
  params: unknown;
  lost_ranks: unknown;
}

/** The lost ranks a run row holds (written by ingest from a checked batch; anything else is left out). */
function lostRanksOf(value: unknown): LostRank[] {
  if (!Array.isArray(value)) return [];
  const rows: readonly unknown[] = value;
  return rows.flatMap((l) =>
    isRecord(l) &&
    typeof l["rank"] === "number" &&
    typeof l["rankName"] === "string" &&
    typeof l["wall"] === "number" &&
    typeof l["reason"] === "string"
      ? [
          {
            rank: l["rank"],
            rankName: l["rankName"],
            step: typeof l["step"] === "number" ? l["step"] : null,
            wall: l["wall"],
            reason: l["reason"],
            backStep: typeof l["backStep"] === "number" ? l["backStep"] : null,
          },
        ]
      : [],
  );
}

export function toLabelled(r: RunRow): LabelledRun {
  const params: Record<string, string | number | boolean | null> = {};
  if (isRecord(r.params)) {
    for (const [k, v] of Object.entries(r.params))
      if (v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean") params[k] = v;
  }
  return {
    id: r.run_key,
    experiment: r.experiment,
    trial: r.trial,
    status:
      r.status === "running" || r.status === "finished" || r.status === "failed" || r.status === "crashed"
        ? r.status
        : "unknown",
    startedAt: r.started_at,
    endedAt: r.ended_at,
    updatedAt: r.updated_at,
    resumeStep: r.resume_step,
    lostRanks: lostRanksOf(r.lost_ranks),
    tags: r.tags,
    group: r.grp,
    params,
  };
}
