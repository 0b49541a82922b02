/**
 * `/api/groups`: the request checked, the runs it names grouped by the fields it names, and each
 * group's band (group-bands.ts) over the lines `groupLine` reads.
 */
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import {
  type GroupValue,
  type RunLine,
  compareGroupValues,
  fieldLabel,
  groupBand,
  parseGroupField,
} from "./group-bands.js";
import { MAX_BATCH_POINTS, maxPointsParam, requiredParam } from "./params.js";
import { MAX_RUN_IDS } from "./run-query.js";
import { HttpError } from "./security.js";
import type { DashboardSource, LabelledRun } from "./source.js";

/** Most fields one `/api/groups` request groups by. */
const MAX_GROUP_FIELDS = 5;

/**
 * `/api/groups?key=&by=…&run=…[&maxPoints=]`: the runs named (`run`, repeatable) grouped by the
 * fields `by` names (repeatable: `param:NAME`, `group`, `experiment`, `status`), and for each
 * group the mean, standard deviation, min and max of the key's global line across its runs,
 * aligned by step (group-bands.ts). Lines are read one run at a time with a turn of the event
 * loop between, each run's at most `MAX_BATCH_POINTS / runs` points.
 */
export async function answerGroups(
  params: URLSearchParams,
  gone: () => boolean,
  source: Pick<DashboardSource, "listRuns">,
  groupLine: (id: string, key: string, maxPoints: number) => Promise<RunLine | null>,
): Promise<unknown> {
  const key = requiredParam(params, "key");
  const maxPoints = maxPointsParam(params);
  const by = params.getAll("by").filter((b) => b !== "");
  if (by.length === 0 || by.length > MAX_GROUP_FIELDS)
    throw new HttpError(
      400,
      `by must be given 1 to ${MAX_GROUP_FIELDS} times: param:NAME, group, experiment or status`,
    );
  const fields = by.map((raw) => {
    const field = parseGroupField(raw);
    if (field === null || raw.length > 200)
      throw new HttpError(
        400,
        `by must be param:NAME, group, experiment or status, got ${JSON.stringify(raw.slice(0, 80))}`,
      );
    return field;
  });
  const ids = [...new Set(params.getAll("run").filter((r) => r !== ""))];
  if (ids.length === 0 || ids.length > MAX_RUN_IDS)
    throw new HttpError(400, `run must be given 1 to ${MAX_RUN_IDS} times (experiment/trial as /api/runs lists it)`);
  const perRun = Math.max(3, Math.min(maxPoints, Math.floor(MAX_BATCH_POINTS / ids.length)));
  const { runs } = await source.listRuns({ ids, sort: { field: "name" } });
  const groups = new Map<string, { values: GroupValue[]; runs: LabelledRun[] }>();
  for (const run of runs) {
    const values = fields.map((f): GroupValue =>
      f.kind === "param"
        ? (run.params[f.name] ?? null)
        : f.kind === "group"
          ? run.group
          : f.kind === "experiment"
            ? run.experiment
            : run.status,
    );
    const id = JSON.stringify(values);
    const group = groups.get(id) ?? { values, runs: [] };
    group.runs.push(run);
    groups.set(id, group);
  }
  const found = new Set(runs.map((r) => r.id));
  const missing = ids.filter((id) => !found.has(id));
  const out = [];
  for (const group of [...groups.values()].sort((a, b) => compareGroupValues(a.values, b.values))) {
    const lines: RunLine[] = [];
    const members: string[] = [];
    for (const run of group.runs) {
      if (gone()) return { key, groups: [], missing: [] };
      await yieldToEventLoop();
      const line = await groupLine(run.id, key, perRun);
      if (line === null) missing.push(run.id);
      else {
        lines.push(line);
        members.push(run.id);
      }
    }
    if (members.length === 0) continue;
    const label = fields
      .map(
        (f, i) =>
          `${fieldLabel(f)}=${group.values[i] === null || group.values[i] === undefined ? "–" : String(group.values[i])}`,
      )
      .join(" · ");
    out.push({ values: group.values, label, runs: members, ...groupBand(lines, maxPoints) });
  }
  return { key, by, groups: out, missing };
}
