/**
 * The metrics tab's combined charts (docs/dashboard.md, "Combined charts"): one card of several
 * keys, a line per key × run, kept in the URL (`combine=train/loss,val/loss`). The card and its
 * fetching are the ones every chart uses (as the Inference tab's percentile cards): only the
 * choice of lines is this file's. Each key has its palette colour; overlaying runs, each run a dash.
 */
import { GLOBAL_RANK } from "../../../store/read-types.js";
import type { RunKeys } from "../api.js";
import { ChartCard } from "../chart.js";
import { lineColour } from "../chart-series.js";
import type { Line, ViewSettings } from "../chart-data.js";
import type { CardSpec } from "../fetching.js";
import { visibleName } from "../names.js";
import { hooks, runById, state, type LineSource } from "../state.js";
import { rankLabel } from "./common.js";

/** Dashes telling runs apart on a combined card (the first run solid). */
const RUN_DASHES = [[], [6, 3], [2, 3], [10, 3, 2, 3], [4, 4], [1, 2], [12, 4]];

/** A combined card's title: its keys, ` + ` between them. */
export function combinedTitle(keys: readonly string[]): string {
  return keys.join(" + ");
}

/** Take the combined chart at `index` off the view. */
function removeCombined(index: number): void {
  state.combined = state.combined.filter((_, i) => i !== index);
  hooks.writeUrl();
  void hooks.renderView();
}

/** Add combined charts (each a list of keys), leaving out any the view has already. */
export function addCombined(charts: readonly (readonly string[])[]): void {
  const fresh = charts.filter((keys) => !state.combined.some((c) => c.join(",") === keys.join(",")));
  if (fresh.length === 0) return;
  state.combined = [...state.combined, ...fresh.map((keys) => [...keys])];
  hooks.writeUrl();
  void hooks.renderView();
}

/** A line of `key` in `run` (its global line, or rank `rank`): the key's colour, the run's dash. */
function combinedLine(card: number, k: number, run: string, key: string, rank: number | undefined): Line {
  const several = state.selected.length > 1;
  const parts = [
    visibleName(key),
    several ? visibleName(run) : "",
    rank === undefined ? "" : rankLabel(state.keysByRun.get(run), rank, run),
  ];
  const line: Line = {
    id: `combine\u0000${card}\u0000${run}\u0000${key}\u0000${rank ?? "global"}`,
    label: parts.filter((p) => p !== "").join(" · "),
    runStart: runById(run)?.startedAt ?? null,
    steps: [],
    times: [],
    values: [],
    colour: lineColour(k),
  };
  const r = Math.max(0, state.selected.indexOf(run));
  if (several) line.dash = RUN_DASHES[r % RUN_DASHES.length] ?? [];
  return line;
}

/** The lines of one combined card: per key, per run that has it, its global line (or its ranks' when it has none). */
function combinedLines(
  card: ChartCard,
  index: number,
  keys: readonly string[],
  byRun: Map<string, RunKeys>,
): LineSource[] {
  const lines: LineSource[] = [];
  for (const [k, key] of keys.entries())
    for (const [run, runKeys] of byRun) {
      const info = runKeys.metrics.find((m) => m.key === key);
      if (info === undefined) continue;
      const ranks = info.ranks.includes(GLOBAL_RANK) ? [undefined] : info.ranks;
      for (const rank of ranks)
        lines.push({
          kind: "series",
          run,
          key,
          rank,
          cursor: null,
          card,
          line: combinedLine(index, k, run, key, rank),
        });
    }
  return lines;
}

/** The combined cards of the view, each appended to `box`, with their lines for the grid to fetch. */
export function combinedCards(
  box: HTMLElement,
  byRun: Map<string, RunKeys>,
  settings: ViewSettings,
  events: { onSettled: () => void; onZoom: (range: [number, number] | null) => void },
): CardSpec[] {
  return state.combined.map((keys, index) => {
    const card = new ChartCard(combinedTitle(keys), settings, { ...events, onRemove: () => removeCombined(index) });
    card.root.dataset["combined"] = keys.join(",");
    state.cards.push(card);
    box.appendChild(card.root);
    return { card, lines: combinedLines(card, index, keys, byRun) };
  });
}
