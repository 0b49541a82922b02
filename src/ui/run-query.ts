/**
 * Filtering and paging `/api/runs`: the query parameters, checked (a 400 saying what is valid for
 * a bad one), and the same query applied in memory (the local source) or translated to SQL (the
 * server's PostgreSQL source, `src/server/pg-source.ts`). Both sources give the same answer for
 * the same query, so the web app need not know which it talks to.
 *
 * Parameters (all optional; an empty query lists every run, newest first):
 * - `q=text`: runs whose id, experiment, trial, group or a tag contains `text` (case-insensitive).
 * - `tag=t` (repeatable): runs carrying every tag given.
 * - `group=g`: runs of that group.
 * - `status=s` (repeatable): runs in any of these statuses (`running`, `finished`, `failed`, `crashed`, `unknown`).
 * - `param=NAME OP VALUE` (repeatable, all must hold): a parameter compared with a value, `OP` one
 *   of `=`, `!=`, `<`, `<=`, `>`, `>=` (`lr<=0.001`, `model.act=gelu`). Numbers compare as
 *   numbers (a run whose parameter is not a number does not match `<`…`>=`), anything else as text.
 * - `sort`: `started` (default, newest first), `updated`, `name`; `-` before it reverses
 *   (`-name`). `offset` (default 0) and `limit` (1 to 1,000; default: every match).
 */
import type { RunStatus } from "../backends/store/read-types.js";
import { HttpError } from "./security.js";
import type { LabelledRun } from "./source.js";

/** How a parameter filter compares. */
export type ParamOp = "=" | "!=" | "<" | "<=" | ">" | ">=";

/** One `param=` filter. */
export interface ParamFilter {
  readonly name: string;
  readonly op: ParamOp;
  /** A number when the value reads as one, else the text. */
  readonly value: number | string;
}

/** The sort orders of `/api/runs`. */
export type RunSort = "started" | "updated" | "name";

/** A checked `/api/runs` query. */
export interface RunQuery {
  readonly text?: string;
  readonly tags?: readonly string[];
  readonly group?: string;
  readonly statuses?: readonly RunStatus[];
  readonly params?: readonly ParamFilter[];
  readonly sort?: RunSort;
  /** Reverse `sort`'s natural order (newest first for times, A→Z for names). */
  readonly reverse?: boolean;
  readonly offset?: number;
  readonly limit?: number;
}

/** Most runs one page may hold. */
export const MAX_RUNS_LIMIT = 1_000;
/** Longest text, tag, group or parameter filter accepted. */
export const MAX_FILTER_TEXT = 200;
/** Most `tag`, `status` and `param` filters of one request. */
export const MAX_FILTERS = 20;

const STATUSES: readonly RunStatus[] = ["running", "finished", "failed", "crashed", "unknown"];
const PARAM_RE = /^([^<>=!]+?)\s*(<=|>=|!=|=|<|>)\s*(.*)$/s;

function isStatus(s: string): s is RunStatus {
  return STATUSES.some((v) => v === s);
}

function isOp(s: string | undefined): s is ParamOp {
  return s === "=" || s === "!=" || s === "<" || s === "<=" || s === ">" || s === ">=";
}

function isSort(s: string): s is RunSort {
  return s === "started" || s === "updated" || s === "name";
}

function text(params: URLSearchParams, name: string): string | undefined {
  const raw = params.get(name);
  if (raw === null || raw === "") return undefined;
  if (raw.length > MAX_FILTER_TEXT) throw new HttpError(400, `${name} is longer than ${MAX_FILTER_TEXT} characters`);
  return raw;
}

function all(params: URLSearchParams, name: string): string[] {
  const values = params.getAll(name).filter((v) => v !== "");
  if (values.length > MAX_FILTERS) throw new HttpError(400, `at most ${MAX_FILTERS} ${name} filters per request, got ${values.length}`);
  for (const v of values) if (v.length > MAX_FILTER_TEXT) throw new HttpError(400, `a ${name} filter is longer than ${MAX_FILTER_TEXT} characters`);
  return values;
}

function integer(params: URLSearchParams, name: string, min: number, max: number): number | undefined {
  const raw = params.get(name);
  if (raw === null || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new HttpError(400, `${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw.slice(0, 40))}`);
  return n;
}

/** One `param=` filter, parsed; a 400 saying the form when it is not one. */
export function parseParamFilter(raw: string): ParamFilter {
  const m = PARAM_RE.exec(raw);
  const name = m?.[1]?.trim() ?? "";
  const op = m?.[2];
  if (m === null || name === "" || !isOp(op)) {
    throw new HttpError(400, `param filters are NAME OP VALUE with OP one of = != < <= > >= (e.g. param=lr<=0.001), got ${JSON.stringify(raw.slice(0, 80))}`);
  }
  const valueText = m[3] ?? "";
  const asNumber = Number(valueText);
  const value = valueText.trim() !== "" && Number.isFinite(asNumber) ? asNumber : valueText;
  if (typeof value === "string" && op !== "=" && op !== "!=") throw new HttpError(400, `param filter ${JSON.stringify(raw.slice(0, 80))}: ${op} compares numbers; the value is not one`);
  return { name, op, value };
}

/** The checked query of an `/api/runs` request. */
export function parseRunQuery(params: URLSearchParams): RunQuery {
  const statuses = all(params, "status");
  for (const s of statuses) if (!isStatus(s)) throw new HttpError(400, `status must be one of ${STATUSES.join(", ")}, got ${JSON.stringify(s.slice(0, 40))}`);
  const sortRaw = params.get("sort") ?? "";
  const reverse = sortRaw.startsWith("-");
  const sortName = reverse ? sortRaw.slice(1) : sortRaw;
  if (sortName !== "" && !isSort(sortName)) throw new HttpError(400, `sort must be started, updated or name (with - before it to reverse), got ${JSON.stringify(sortRaw.slice(0, 40))}`);
  const q = text(params, "q");
  const group = text(params, "group");
  const offset = integer(params, "offset", 0, Number.MAX_SAFE_INTEGER);
  const limit = integer(params, "limit", 1, MAX_RUNS_LIMIT);
  const tags = all(params, "tag");
  const paramFilters = all(params, "param").map(parseParamFilter);
  return {
    ...(q !== undefined ? { text: q } : {}),
    ...(tags.length > 0 ? { tags } : {}),
    ...(group !== undefined ? { group } : {}),
    ...(statuses.length > 0 ? { statuses: statuses.filter(isStatus) } : {}),
    ...(paramFilters.length > 0 ? { params: paramFilters } : {}),
    ...(sortName !== "" && isSort(sortName) ? { sort: sortName } : {}),
    ...(reverse ? { reverse } : {}),
    ...(offset !== undefined ? { offset } : {}),
    ...(limit !== undefined ? { limit } : {}),
  };
}

function compare(actual: string | number | boolean | null | undefined, filter: ParamFilter): boolean {
  const { op, value } = filter;
  if (typeof value === "number") {
    if (typeof actual !== "number") return op === "!=";
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
  const textValue = actual === undefined || actual === null ? undefined : String(actual);
  return op === "=" ? textValue === value : textValue !== value;
}

/** Whether a run passes the query's filters (not its paging). */
export function runMatches(run: LabelledRun, query: RunQuery): boolean {
  if (query.statuses !== undefined && !query.statuses.includes(run.status)) return false;
  if (query.group !== undefined && run.group !== query.group) return false;
  if (query.tags !== undefined && !query.tags.every((t) => run.tags.includes(t))) return false;
  if (query.text !== undefined) {
    const needle = query.text.toLowerCase();
    const hay = [run.id, run.experiment, run.trial, run.group ?? "", ...run.tags];
    if (!hay.some((h) => h.toLowerCase().includes(needle))) return false;
  }
  for (const p of query.params ?? []) if (!compare(run.params[p.name], p)) return false;
  return true;
}

/** The order of `query.sort`, as a comparison of two runs. */
export function runOrder(query: RunQuery): (a: LabelledRun, b: LabelledRun) => number {
  const sign = query.reverse === true ? -1 : 1;
  switch (query.sort ?? "started") {
    case "name":
      return (a, b) => sign * (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    case "updated":
      return (a, b) => sign * ((b.updatedAt ?? 0) - (a.updatedAt ?? 0)) || (a.id < b.id ? -1 : 1);
    case "started":
      return (a, b) => sign * ((b.startedAt ?? 0) - (a.startedAt ?? 0)) || (a.id < b.id ? -1 : 1);
  }
}

/** Filter, sort and page runs in memory (the local source). */
export function applyRunQuery(runs: readonly LabelledRun[], query: RunQuery): { runs: LabelledRun[]; total: number } {
  const matching = runs.filter((r) => runMatches(r, query)).sort(runOrder(query));
  const offset = query.offset ?? 0;
  return { runs: matching.slice(offset, query.limit === undefined ? undefined : offset + query.limit), total: matching.length };
}
