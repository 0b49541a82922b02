/**
 * `/api/runs`' query (`src/ui/run-query.ts`) as SQL over `runs`: every value a bound parameter,
 * only fixed SQL text chosen by the query's checked fields, so a filter is never code. Matches
 * what the local source does in memory (`runMatches`, `runOrder`).
 */
import type { RunQuery } from "../ui/run-query.js";

/** The page's SELECT and the matching COUNT; the last two parameters (limit, offset) are the SELECT's only. */
export function runsSql(projectId: number, query: RunQuery): { sql: string; countSql: string; params: unknown[] } {
  const params: unknown[] = [projectId];
  const p = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  const where = ["project_id = $1"];
  if (query.statuses !== undefined) where.push(`status = ANY(${p(query.statuses)}::text[])`);
  if (query.group !== undefined) where.push(`grp = ${p(query.group)}`);
  if (query.tags !== undefined) where.push(`tags @> ${p(query.tags)}::text[]`);
  if (query.text !== undefined) {
    const like = p(`%${query.text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    where.push(`(run_key ILIKE ${like} OR experiment ILIKE ${like} OR trial ILIKE ${like} OR grp ILIKE ${like} OR EXISTS (SELECT 1 FROM unnest(tags) t WHERE t ILIKE ${like}))`);
  }
  for (const f of query.params ?? []) {
    const name = p(f.name);
    if (typeof f.value === "number") {
      const value = p(f.value);
      const isNumber = `jsonb_typeof(params -> ${name}) = 'number'`;
      const asNumber = `(params ->> ${name})::float8`;
      if (f.op === "!=") where.push(`NOT (${isNumber} AND ${asNumber} = ${value})`);
      else where.push(`(${isNumber} AND ${asNumber} ${f.op} ${value})`);
    } else {
      const value = p(f.value);
      // Text compares with the parameter's text form; a missing parameter is "not equal".
      if (f.op === "=") where.push(`params ->> ${name} = ${value}`);
      else where.push(`(params ->> ${name}) IS DISTINCT FROM ${value}`);
    }
  }
  const sign = query.reverse === true;
  const order =
    query.sort === "name"
      ? `run_key ${sign ? "DESC" : "ASC"}`
      : `${query.sort === "updated" ? "updated_at" : "started_at"} ${sign ? "ASC" : "DESC"} NULLS LAST, run_key`;
  const filter = where.join(" AND ");
  const countSql = `SELECT count(*)::bigint AS n FROM runs WHERE ${filter}`;
  const limit = p(query.limit ?? null);
  const offset = p(query.offset ?? 0);
  const sql = `SELECT run_key, experiment, trial, status, started_at, ended_at, updated_at, resume_step, tags, grp, params, lost_ranks
    FROM runs WHERE ${filter} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}`;
  return { sql, countSql, params };
}
