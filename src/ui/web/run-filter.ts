/**
 * The runs list's and the runs table's filter box, as a server query: terms separated by spaces,
 * all of which must hold —
 * - `tag:x` (the run carries tag x), `group:x`, `status:x` (`running`, `finished`, …);
 * - `NAME OP VALUE` with `OP` one of `= != < <= > >=`: a hyperparameter (`lr<0.01`,
 *   `optimizer=adam`), or a metric's last value when NAME is a summary key and no hyperparameter
 *   (`loss<0.5`);
 * - anything else: text the run's id, group or a tag contains (case-insensitive).
 * The server does the filtering (`/api/runs`), so it works over any number of runs.
 */
import type { RunsQuery } from "./api.js";

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
