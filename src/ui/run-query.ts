/**
 * Filtering and paging `/api/runs`: the query parameters, checked (a 400 saying what is valid for
 * a bad one), and the same query applied in memory (the local source's run index) or translated
 * to SQL (the server's PostgreSQL source, `src/server/run-filter.ts`). Both sources give the same
 * answer for the same query, so the web app need not know which it talks to.
 *
 * The parameters and what each matches are described once, in docs/server.md ("The API", the
 * `/api/runs` table); a change here changes that table with it. Text compares by Unicode code
 * point (PostgreSQL's `COLLATE "C"`), so both sources order names alike whatever the database's
 * locale.
 */
import type { RunStatus } from "../store/read-types.js";
import { compareCodePoints } from "../core/code-points.js";
import { isInternalKey } from "../core/internal-keys.js";

export { compareCodePoints };
import { HttpError } from "./security.js";
import type { LabelledRun, MetricFilter, ParamFilter, ParamOp, RunQuery, RunSort } from "./source.js";

/** Most runs one page may hold. */
const MAX_RUNS_LIMIT = 1_000;
/** Longest text, tag, group or parameter filter accepted. */
const MAX_FILTER_TEXT = 200;
/** Most `tag`, `status`, `param` and `metric` filters of one request. */
const MAX_FILTERS = 20;
/** Most `run` ids of one request. */
export const MAX_RUN_IDS = 1_000;

const STATUSES: readonly RunStatus[] = ["running", "finished", "failed", "crashed", "unknown"];
const FILTER_RE = /^([^<>=!]+?)\s*(<=|>=|!=|=|<|>)\s*(.*)$/s;
const FIELD_SORTS = ["started", "updated", "name", "status", "group"] as const;

function isStatus(s: string): s is RunStatus {
  return STATUSES.some((v) => v === s);
}

function isOp(s: string | undefined): s is ParamOp {
  return s === "=" || s === "!=" || s === "<" || s === "<=" || s === ">" || s === ">=";
}

function text(params: URLSearchParams, name: string): string | undefined {
  const raw = params.get(name);
  if (raw === null || raw === "") return undefined;
  if (raw.length > MAX_FILTER_TEXT) throw new HttpError(400, `${name} is longer than ${MAX_FILTER_TEXT} characters`);
  return raw;
}

function all(params: URLSearchParams, name: string, max = MAX_FILTERS): string[] {
  const values = params.getAll(name).filter((v) => v !== "");
  if (values.length > max) throw new HttpError(400, `at most ${max} ${name} filters per request, got ${values.length}`);
  for (const v of values)
    if (v.length > MAX_FILTER_TEXT)
      throw new HttpError(400, `a ${name} filter is longer than ${MAX_FILTER_TEXT} characters`);
  return values;
}

function integer(params: URLSearchParams, name: string, min: number, max: number): number | undefined {
  const raw = params.get(name);
  if (raw === null || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new HttpError(
      400,
      `${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw.slice(0, 40))}`,
    );
  return n;
}

function flag(params: URLSearchParams, name: string): boolean {
  const raw = params.get(name);
  if (raw === null || raw === "" || raw === "0" || raw === "false") return false;
  if (raw === "1" || raw === "true") return true;
  throw new HttpError(400, `${name} must be 1 or 0, got ${JSON.stringify(raw.slice(0, 40))}`);
}

/** One `param=` filter, parsed; a 400 saying the form when it is not one. */
function parseParamFilter(raw: string): ParamFilter {
  const m = FILTER_RE.exec(raw);
  const name = m?.[1]?.trim() ?? "";
  const op = m?.[2];
  if (m === null || name === "" || !isOp(op)) {
    throw new HttpError(
      400,
      `param filters are NAME OP VALUE with OP one of = != < <= > >= (e.g. param=lr<=0.001), got ${JSON.stringify(raw.slice(0, 80))}`,
    );
  }
  const valueText = m[3] ?? "";
  const asNumber = Number(valueText);
  const value = valueText.trim() !== "" && Number.isFinite(asNumber) ? asNumber : valueText;
  if (typeof value === "string" && op !== "=" && op !== "!=")
    throw new HttpError(
      400,
      `param filter ${JSON.stringify(raw.slice(0, 80))}: ${op} compares numbers; the value is not one`,
    );
  return { name, op, value };
}

/** One `metric=` filter, parsed: KEY OP NUMBER. */
function parseMetricFilter(raw: string): MetricFilter {
  const m = FILTER_RE.exec(raw);
  const key = m?.[1]?.trim() ?? "";
  const op = m?.[2];
  const valueText = m?.[3] ?? "";
  const value = Number(valueText);
  if (m === null || key === "" || !isOp(op) || valueText.trim() === "" || !Number.isFinite(value)) {
    throw new HttpError(
      400,
      `metric filters are KEY OP NUMBER with OP one of = != < <= > >= (e.g. metric=train/loss<0.5), got ${JSON.stringify(raw.slice(0, 80))}`,
    );
  }
  return { key, op, value };
}

/** `sort`, parsed: a field, `param:NAME` or `metric:KEY`, `-` before it to reverse. */
function parseRunSort(raw: string): { sort: RunSort; reverse: boolean } {
  const reverse = raw.startsWith("-");
  const body = reverse ? raw.slice(1) : raw;
  const field = FIELD_SORTS.find((f) => f === body);
  if (field !== undefined) return { sort: { field }, reverse };
  const colon = body.indexOf(":");
  const kind = body.slice(0, colon);
  const name = body.slice(colon + 1);
  if (colon > 0 && name !== "" && (kind === "param" || kind === "metric"))
    return { sort: { field: kind, name }, reverse };
  throw new HttpError(
    400,
    `sort must be started, updated, name, status, group, param:NAME or metric:KEY (with - before it to reverse), got ${JSON.stringify(raw.slice(0, 60))}`,
  );
}

/** The checked query of an `/api/runs` request. */
export function parseRunQuery(params: URLSearchParams): RunQuery {
  const statuses = all(params, "status");
  for (const s of statuses)
    if (!isStatus(s))
      throw new HttpError(400, `status must be one of ${STATUSES.join(", ")}, got ${JSON.stringify(s.slice(0, 40))}`);
  const sortRaw = params.get("sort") ?? "";
  if (sortRaw.length > MAX_FILTER_TEXT) throw new HttpError(400, `sort is longer than ${MAX_FILTER_TEXT} characters`);
  const sorted = sortRaw === "" ? undefined : parseRunSort(sortRaw);
  const texts = all(params, "q");
  const group = text(params, "group");
  const offset = integer(params, "offset", 0, Number.MAX_SAFE_INTEGER);
  const limit = integer(params, "limit", 1, MAX_RUNS_LIMIT);
  const tags = all(params, "tag");
  const ids = all(params, "run", MAX_RUN_IDS);
  const paramFilters = all(params, "param").map(parseParamFilter);
  const metricFilters = all(params, "metric").map(parseMetricFilter);
  const summary = flag(params, "summary");
  const internal = flag(params, "internal");
  return {
    ...(texts.length > 0 ? { texts } : {}),
    ...(tags.length > 0 ? { tags } : {}),
    ...(group !== undefined ? { group } : {}),
    ...(statuses.length > 0 ? { statuses: statuses.filter(isStatus) } : {}),
    ...(ids.length > 0 ? { ids } : {}),
    ...(paramFilters.length > 0 ? { params: paramFilters } : {}),
    ...(metricFilters.length > 0 ? { metrics: metricFilters } : {}),
    ...(sorted !== undefined ? { sort: sorted.sort } : {}),
    ...(sorted?.reverse === true ? { reverse: true } : {}),
    ...(offset !== undefined ? { offset } : {}),
    ...(limit !== undefined ? { limit } : {}),
    ...(summary ? { summary } : {}),
    ...(internal ? { internal } : {}),
  };
}

function compareNumber(actual: number, op: ParamOp, value: number): boolean {
  switch (op) {
    case "=":
      return actual === value;
    case "!=":
      return actual !== value;
    case "<":
      return actual < value;
    case "<=":
      return actual <= value;
    case ">":
      return actual > value;
    case ">=":
      return actual >= value;
  }
}

function compare(actual: string | number | boolean | null | undefined, filter: ParamFilter): boolean {
  const { op, value } = filter;
  if (typeof value === "number") {
    if (typeof actual !== "number") return op === "!=";
    return compareNumber(actual, op, value);
  }
  const textValue = actual === undefined || actual === null ? undefined : String(actual);
  return op === "=" ? textValue === value : textValue !== value;
}

/** A run of the index: its row, and its last values when known (for `metric=` and `summary`). */
export interface IndexedRun {
  readonly row: LabelledRun;
  readonly lastValues: Readonly<Record<string, number>>;
}

/** The query's filters (not its paging) as a test of one run. */
function runFilter(query: RunQuery): (run: IndexedRun) => boolean {
  const ids = query.ids === undefined ? undefined : new Set(query.ids);
  return (run) => (ids === undefined || ids.has(run.row.id)) && runMatches(run, query);
}

/** Whether a run passes the query's filters other than `ids` (see `runFilter`). */
function runMatches(run: IndexedRun, query: RunQuery): boolean {
  const { row } = run;
  if (query.statuses !== undefined && !query.statuses.includes(row.status)) return false;
  if (query.group !== undefined && row.group !== query.group) return false;
  if (query.tags !== undefined && !query.tags.every((t) => row.tags.includes(t))) return false;
  if (query.texts !== undefined) {
    const hay = [row.id, row.experiment, row.trial, row.group ?? "", ...row.tags].map((h) => h.toLowerCase());
    for (const text of query.texts) {
      const needle = text.toLowerCase();
      if (!hay.some((h) => h.includes(needle))) return false;
    }
  }
  for (const p of query.params ?? []) if (!compare(row.params[p.name], p)) return false;
  for (const m of query.metrics ?? []) {
    const v = run.lastValues[m.key];
    const ok = v !== undefined && !Number.isNaN(v) && compareNumber(v, m.op, m.value);
    if (m.op === "!=" ? v !== undefined && !Number.isNaN(v) && !ok : !ok) return false;
  }
  return true;
}

type Rank = number;

/** Where a parameter value sorts: numbers, then text, then booleans; missing last (`MISSING`). */
const MISSING: Rank = 9;
function paramRank(v: string | number | boolean | null | undefined): Rank {
  return typeof v === "number" ? 0 : typeof v === "string" ? 1 : typeof v === "boolean" ? 2 : MISSING;
}

function metricRank(v: number | undefined): Rank {
  return v === undefined ? MISSING : Number.isNaN(v) ? 1 : 0;
}

function byId(a: IndexedRun, b: IndexedRun): number {
  return compareCodePoints(a.row.id, b.row.id);
}

/** Values that may be missing: the missing ones last whatever the direction, then `cmp` signed. */
function missingLast<T>(rank: (v: T) => Rank, cmp: (a: T, b: T) => number, sign: number): (a: T, b: T) => number {
  return (a, b) => {
    const ra = rank(a);
    const rb = rank(b);
    if (ra === MISSING || rb === MISSING) return ra - rb;
    return sign * (ra - rb || cmp(a, b));
  };
}

function valueOrder(
  a: string | number | boolean | null | undefined,
  b: string | number | boolean | null | undefined,
): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "string" && typeof b === "string") return compareCodePoints(a, b);
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  return 0;
}

/** The order of `query.sort`, as a comparison of two runs; ties by id (A→Z) either way. */
function runOrder(query: RunQuery): (a: IndexedRun, b: IndexedRun) => number {
  const sign = query.reverse === true ? -1 : 1;
  const sort = query.sort ?? { field: "started" };
  const then = (cmp: (a: IndexedRun, b: IndexedRun) => number) => (a: IndexedRun, b: IndexedRun) =>
    cmp(a, b) || byId(a, b);
  const time = missingLast<number | null>(
    (v) => (v === null ? MISSING : 0),
    (x, y) => (y ?? 0) - (x ?? 0),
    sign,
  );
  const label = missingLast<string | null>(
    (v) => (v === null ? MISSING : 0),
    (x, y) => compareCodePoints(x ?? "", y ?? ""),
    sign,
  );
  switch (sort.field) {
    case "name":
      return (a, b) => sign * byId(a, b);
    case "started":
      return then((a, b) => time(a.row.startedAt, b.row.startedAt));
    case "updated":
      return then((a, b) => time(a.row.updatedAt, b.row.updatedAt));
    case "status":
      return then((a, b) => label(a.row.status, b.row.status));
    case "group":
      return then((a, b) => label(a.row.group, b.row.group));
    case "param": {
      const cmp = missingLast(paramRank, valueOrder, sign);
      return then((a, b) => cmp(a.row.params[sort.name], b.row.params[sort.name]));
    }
    case "metric": {
      const cmp = missingLast<number | undefined>(metricRank, (x, y) => (x ?? 0) - (y ?? 0) || 0, sign);
      return then((a, b) => cmp(a.lastValues[sort.name], b.lastValues[sort.name]));
    }
  }
}

/** The last values a page shows: every scalar key's, rankscope's own only with `internal`. */
export function summaryOf(lastValues: Readonly<Record<string, number>>, internal: boolean): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(lastValues)) if (internal || !isInternalKey(key)) out[key] = value;
  return out;
}

/** Filter, sort and page runs in memory (the local source's run index). */
export function applyRunQuery(runs: readonly IndexedRun[], query: RunQuery): { runs: LabelledRun[]; total: number } {
  const matching = runs.filter(runFilter(query)).sort(runOrder(query));
  const offset = query.offset ?? 0;
  const page = matching.slice(offset, query.limit === undefined ? undefined : offset + query.limit);
  return {
    runs: page.map((r) =>
      query.summary === true ? { ...r.row, summary: summaryOf(r.lastValues, query.internal === true) } : r.row,
    ),
    total: matching.length,
  };
}
