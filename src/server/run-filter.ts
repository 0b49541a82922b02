/**
 * `/api/runs`' query (`src/ui/run-query.ts`) as SQL over `runs`: every value a bound parameter,
 * only fixed SQL text chosen by the query's checked fields, so a filter is never code. Matches
 * what the local source does in memory (`runFilter`, `runOrder`): text orders by code point
 * (`COLLATE "C"`), values that are missing sort last either way, ties go by id.
 *
 * A run's last value of a key (`metric=`, `sort=metric:`) is its global line's, else its lowest
 * rank's (`series.last_value`, NULL there meaning NaN), as `/api/summary` answers it.
 */
import type { ParamFilter, MetricFilter, RunQuery } from "../ui/source.js";

/** The columns a page selects (`id` for reading the page's last values after). */
const RUN_COLUMNS =
  "runs.id, run_key, experiment, trial, status, started_at, ended_at, updated_at, resume_step, tags, grp, params, lost_ranks";

/**
 * The last values a query compares or sorts by, one lateral join per key (each an index lookup
 * per run, done once however often the value is used): `alias.v` is the run's last value of the
 * key (NaN as 'NaN'), NULL when it has none.
 */
class LastValueJoins {
  private readonly joins: string[] = [];
  private readonly aliases = new Map<string, string>();

  constructor(private readonly p: (value: unknown) => string) {}

  /** The column holding the last value of `key`. */
  of(key: string): string {
    let alias = this.aliases.get(key);
    if (alias === undefined) {
      alias = `m${this.aliases.size}`;
      this.aliases.set(key, alias);
      this.joins
        .push(`LEFT JOIN LATERAL (SELECT COALESCE(s.last_value, 'NaN'::float8) AS v FROM keys k JOIN series s ON s.key_id = k.id
        WHERE k.run_id = runs.id AND k.kind = 'scalar' AND k.key = ${this.p(key)} AND s.n > 0 ORDER BY s.rank LIMIT 1) ${alias} ON true`);
    }
    return `${alias}.v`;
  }

  sql(): string {
    return this.joins.join(" ");
  }
}

function paramCondition(f: ParamFilter, p: (value: unknown) => string): string {
  const name = p(f.name);
  if (typeof f.value === "number") {
    const value = p(f.value);
    // NULL unless the parameter is a JSON number (CASE: PostgreSQL does not promise to test AND's sides in order).
    const asNumber = `(CASE WHEN jsonb_typeof(params -> ${name}) = 'number' THEN (params ->> ${name})::float8 END)`;
    if (f.op === "!=") return `NOT COALESCE(${asNumber} = ${value}, false)`;
    return `COALESCE(${asNumber} ${f.op} ${value}, false)`;
  }
  const value = p(f.value);
  // Text compares with the parameter's text form; a missing parameter is "not equal".
  if (f.op === "=") return `params ->> ${name} = ${value}`;
  return `(params ->> ${name}) IS DISTINCT FROM ${value}`;
}

function metricCondition(f: MetricFilter, p: (value: unknown) => string, last: LastValueJoins): string {
  const v = last.of(f.key);
  const value = p(f.value);
  // PostgreSQL's NaN equals itself and sorts above every number; a NaN last value matches only !=.
  if (f.op === "!=") return `NOT COALESCE(${v} <> 'NaN'::float8 AND ${v} = ${value}, false)`;
  return `COALESCE(${v} <> 'NaN'::float8 AND ${v} ${f.op} ${value}, false)`;
}

function orderBy(query: RunQuery, p: (value: unknown) => string, last: LastValueJoins): string {
  const dir = query.reverse === true ? "DESC" : "ASC";
  const newest = query.reverse === true ? "ASC" : "DESC";
  const sort = query.sort ?? { field: "started" };
  const byId = 'run_key COLLATE "C" ASC';
  switch (sort.field) {
    case "name":
      return `run_key COLLATE "C" ${dir}`;
    case "started":
      return `started_at IS NULL, started_at ${newest}, ${byId}`;
    case "updated":
      return `updated_at IS NULL, updated_at ${newest}, ${byId}`;
    case "status":
      return `status COLLATE "C" ${dir}, ${byId}`;
    case "group":
      return `grp IS NULL, grp COLLATE "C" ${dir}, ${byId}`;
    case "param": {
      const name = p(sort.name);
      const type = `jsonb_typeof(params -> ${name})`;
      return [
        `COALESCE(${type}, 'null') NOT IN ('number', 'string', 'boolean')`,
        `CASE ${type} WHEN 'number' THEN 0 WHEN 'string' THEN 1 ELSE 2 END ${dir}`,
        `CASE WHEN ${type} = 'number' THEN (params ->> ${name})::float8 END ${dir}`,
        `CASE WHEN ${type} <> 'number' THEN params ->> ${name} END COLLATE "C" ${dir}`,
        byId,
      ].join(", ");
    }
    case "metric": {
      const v = last.of(sort.name);
      return `${v} IS NULL, ${v} = 'NaN'::float8 ${dir}, ${v} ${dir}, ${byId}`;
    }
  }
}

/** The page's SELECT with its parameters, and the COUNT of the matching runs with its own. */
export function runsSql(
  projectId: number,
  query: RunQuery,
): { sql: string; params: unknown[]; countSql: string; countParams: unknown[] } {
  const params: unknown[] = [projectId];
  const p = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  const last = new LastValueJoins(p);
  const where = ["project_id = $1"];
  if (query.ids !== undefined) where.push(`run_key = ANY(${p(query.ids)}::text[])`);
  if (query.statuses !== undefined) where.push(`status = ANY(${p(query.statuses)}::text[])`);
  if (query.group !== undefined) where.push(`grp = ${p(query.group)}`);
  if (query.tags !== undefined) where.push(`tags @> ${p(query.tags)}::text[]`);
  for (const text of query.texts ?? []) {
    const like = p(`%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    where.push(
      `(run_key ILIKE ${like} OR experiment ILIKE ${like} OR trial ILIKE ${like} OR grp ILIKE ${like} OR EXISTS (SELECT 1 FROM unnest(tags) t WHERE t ILIKE ${like}))`,
    );
  }
  for (const f of query.params ?? []) where.push(paramCondition(f, p));
  for (const f of query.metrics ?? []) where.push(metricCondition(f, p, last));
  const filter = where.join(" AND ");
  const countSql = `SELECT count(*)::bigint AS n FROM runs ${last.sql()} WHERE ${filter}`;
  const countParams = [...params];
  const order = orderBy(query, p, last);
  const limit = p(query.limit ?? null);
  const offset = p(query.offset ?? 0);
  const sql = `SELECT ${RUN_COLUMNS} FROM runs ${last.sql()} WHERE ${filter} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}`;
  return { sql, params, countSql, countParams };
}

/** The last value of every scalar key of the given runs: `(run_id, key, value)` rows, value NULL for NaN. */
export const LAST_VALUES_SQL = `SELECT DISTINCT ON (k.run_id, k.key) k.run_id, k.key, s.last_value FROM keys k JOIN series s ON s.key_id = k.id
  WHERE k.run_id = ANY($1::bigint[]) AND k.kind = 'scalar' AND s.n > 0 ORDER BY k.run_id, k.key, s.rank`;
