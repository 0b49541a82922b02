/** The histograms tab: each `Reduce.HISTOGRAM` key of each selected run over time (heatmap) or at a step. */
import { api } from "../api.js";
import { el } from "../dom.js";
import { HistogramCard } from "../histogram.js";
import { searchMatcher, visibleName } from "../names.js";
import { state } from "../state.js";
import { viewBox } from "./common.js";

/** Histograms per key drawn over time, the newest this many steps. */
const HISTORY = 200;

export async function renderHistograms(generation: number): Promise<void> {
  const view = viewBox();
  const matcher = searchMatcher(state.search);
  for (const run of state.selected) {
    const keys = await api.keys(run);
    if (generation !== state.generation) return;
    const names = keys.histograms.filter((n) => matcher.test(n));
    const section = el("section", { className: "run-section" }, el("h2", {}, visibleName(run)));
    view.appendChild(section);
    if (names.length === 0) {
      section.appendChild(el("p", { className: "muted" }, "No histograms (Reduce.HISTOGRAM keys) in this run."));
      continue;
    }
    const g = el("div", { className: "grid" });
    section.appendChild(g);
    const probe = el("div", { className: "chart" });
    g.appendChild(probe);
    const width = probe.clientWidth - 16;
    probe.remove();
    for (const name of names) {
      const rows = await api.histograms(run, name, HISTORY);
      if (generation !== state.generation) return;
      if (rows.length === 0) continue;
      const card = new HistogramCard(name, rows, width);
      state.histogramCards.push(card);
      g.appendChild(card.root);
      card.show();
    }
  }
}
