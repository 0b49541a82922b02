/** The histograms tab: each `Reduce.HISTOGRAM` key of each selected run, one line (global or a rank) over time (heatmap) or at a step. */
import { api, type HistogramEntry } from "../api.js";
import { el } from "../dom.js";
import { HistogramCard } from "../histogram.js";
import { searchMatcher, visibleName } from "../names.js";
import { state } from "../state.js";
import { rankLabel, viewBox } from "./common.js";

/** Histograms per key and line drawn over time, the newest this many steps. */
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
      // Which lines there are (one histogram is enough to learn it); then one line at a time: the
      // global line's histograms are never added to the ranks' (they hold the same values, reduced).
      const { histograms, ranks } = await api.histograms(run, name, 1);
      if (generation !== state.generation) return;
      if (histograms.length === 0 && ranks.length === 0) continue;
      const load = async (rank: number): Promise<HistogramEntry[]> =>
        (await api.histograms(run, name, HISTORY, rank)).histograms.filter((h) => h.rank === rank);
      const card = new HistogramCard(name, ranks, load, width, (rank) => rankLabel(keys, rank));
      state.histogramCards.push(card);
      g.appendChild(card.root);
      await card.show();
      if (generation !== state.generation) return;
    }
  }
}
