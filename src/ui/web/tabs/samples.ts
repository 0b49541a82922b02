/** The samples tab: `Reduce.SAMPLE` records of each selected run as tables, one per key. */
import { isRecord } from "../../../core/json.js";
import { api } from "../api.js";
import { append, displayText, el } from "../dom.js";
import { searchMatcher, visibleName } from "../names.js";
import { state } from "../state.js";
import { viewBox } from "./common.js";

export async function renderSamples(generation: number): Promise<void> {
  const view = viewBox();
  const matcher = searchMatcher(state.search);
  for (const run of state.selected) {
    const rows = await api.samples(run);
    if (generation !== state.generation) return;
    const section = el("section", { className: "run-section" }, el("h2", {}, visibleName(run)));
    view.appendChild(section);
    const shown = rows.filter((r) => matcher.test(r.key));
    if (shown.length === 0) {
      section.appendChild(el("p", { className: "muted" }, "No samples (Reduce.SAMPLE keys) in this run."));
      continue;
    }
    const byKey = new Map<string, typeof rows>();
    for (const row of shown) byKey.set(row.key, [...(byKey.get(row.key) ?? []), row]);
    for (const [key, list] of byKey) {
      const fields = [...new Set(list.flatMap((r) => (r.record !== null && typeof r.record === "object" && !Array.isArray(r.record) ? Object.keys(r.record) : ["value"])))];
      const table = el("table", { className: "samples", "data-key": key }, el("thead", {}, el("tr", {}, el("th", {}, "step"), el("th", {}, "rank"), ...fields.map((f) => el("th", {}, visibleName(f))))));
      const body = el("tbody");
      for (const row of list) {
        const record = isRecord(row.record) ? row.record : { value: row.record };
        body.appendChild(el("tr", {}, el("td", {}, row.step), el("td", {}, row.rank === null ? "" : row.rank), ...fields.map((f) => el("td", {}, displayText(record[f])))));
      }
      table.appendChild(body);
      append(section, el("h3", {}, visibleName(key)), el("div", { className: "table-wrap" }, table));
    }
  }
}
