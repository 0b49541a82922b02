/**
 * The runs list's and the runs table's filter box, as a server query: terms separated by spaces,
 * all of which must hold —
 * - `tag:x` (the run carries tag x), `group:x`, `status:x` (`running`, `finished`, …);
 * - `NAME OP VALUE` with `OP` one of `= != < <= > >=`: a hyperparameter (`lr<0.01`,
 *   `optimizer=adam`), or a metric's last value when NAME is a summary key and no hyperparameter
 *   (`loss<0.5`);
 * - anything else: text the run's id, group or a tag contains (case-insensitive).
 * The server does the filtering (`/api/runs`), so it works over any number of runs. Shared by the
 * app (runs list, runs table) and `rankscope report --filter`, with the runs query and its query string.
 */

/** What `/api/runs` is asked: its filters, sort and page (see the server's run-query.ts). */
export interface RunsQuery {
  /** Texts each run must contain (id, group or a tag). */
  q?: string[];
  tags?: string[];
  group?: string;
  statuses?: string[];
  /** `NAME OP VALUE` each. */
  params?: string[];
  /** `KEY OP NUMBER` each. */
  metrics?: string[];
  runs?: string[];
  /** `started`, `name`, `param:lr`, `-metric:loss`, … */
  sort?: string;
  offset?: number;
  limit?: number;
  summary?: boolean;
  internal?: boolean;
}

/** The query string of a runs query (repeated parameters for lists). */
export function runsSearch(query: RunsQuery): URLSearchParams {
  const search = new URLSearchParams();
  const one = (name: string, value: string | number | undefined): void => {
    if (value !== undefined && value !== "") search.append(name, String(value));
  };
  for (const q of query.q ?? []) one("q", q);
  for (const t of query.tags ?? []) one("tag", t);
  one("group", query.group);
  for (const s of query.statuses ?? []) one("status", s);
  for (const p of query.params ?? []) one("param", p);
  for (const m of query.metrics ?? []) one("metric", m);
  for (const r of query.runs ?? []) one("run", r);
  one("sort", query.sort);
  one("offset", query.offset);
  one("limit", query.limit);
  if (query.summary === true) one("summary", 1);
  if (query.internal === true) one("internal", 1);
  return search;
}

const COMPARISON = /^([^<>=!]+)(<=|>=|!=|=|<|>)(.*)$/;

/** What the box says, as the part of a runs query it filters (no sort or page). */
export function filterQuery(
  text: string,
  summaryKeys: ReadonlySet<string> = new Set(),
  paramKeys: ReadonlySet<string> = new Set(),
): RunsQuery {
  const tags: string[] = [];
  const statuses: string[] = [];
  const params: string[] = [];
  const metrics: string[] = [];
  const words: string[] = [];
  let group: string | undefined;
  for (const term of text.split(/\s+/).filter((t) => t !== "")) {
    const lower = term.toLowerCase();
    if (lower.startsWith("tag:") && term.length > 4) tags.push(term.slice(4));
    else if (lower.startsWith("group:") && term.length > 6) group = term.slice(6);
    else if (lower.startsWith("status:") && term.length > 7) statuses.push(lower.slice(7));
    else {
      const m = COMPARISON.exec(term);
      const name = m?.[1] ?? "";
      const value = m?.[3] ?? "";
      if (m === null || value === "") words.push(term);
      else if (summaryKeys.has(name) && !paramKeys.has(name) && Number.isFinite(Number(value))) metrics.push(term);
      else params.push(term);
    }
  }
  return {
    ...(words.length > 0 ? { q: words } : {}),
    ...(tags.length > 0 ? { tags } : {}),
    ...(group !== undefined ? { group } : {}),
    ...(statuses.length > 0 ? { statuses } : {}),
    ...(params.length > 0 ? { params } : {}),
    ...(metrics.length > 0 ? { metrics } : {}),
  };
}
