/** The streams tab (raw per-rank values as a scatter over time) and the system tab (monitor metrics). */
import type { StreamData } from "../api.js";
import { ChartCard } from "../chart.js";
import type { Line } from "../chart-data.js";
import { el } from "../dom.js";
import { LazyGrid, streamHooks, type CardSpec } from "../fetching.js";
import { isInternalKey, searchMatcher } from "../names.js";
import { state, type LineSource } from "../state.js";
import { emptyNote, loadKeys, newLine, rankLabel, runLabel, settingsFor, viewBox } from "./common.js";
import { setGrid, setInternalNote } from "./metrics.js";

/** Add a stream answer's values to the card's per-rank scatter lines (made on first sight of a rank). */
function addStreamPoints(card: ChartCard, source: LineSource, data: StreamData): boolean {
  if (data.values.length === 0) return false;
  const lines = card.getLines();
  const byRank = new Map<number, Line>();
  for (let i = 0; i < data.values.length; i++) {
    const rank = data.ranks[i] ?? 0;
    const id = `${source.run}\u0000${source.key}\u0000stream\u0000${rank}`;
    let line = byRank.get(rank) ?? lines.find((l) => l.id === id);
    if (line === undefined) {
      line = {
        ...newLine(
          id,
          runLabel(source.run, rankLabel(state.keysByRun.get(source.run), rank, source.run)),
          source.run,
          rank,
        ),
        scatter: true,
      };
      lines.push(line);
    }
    byRank.set(rank, line);
    line.steps.push(data.steps[i] ?? 0);
    line.times.push(data.times[i] ?? 0);
    line.values.push(data.values[i] ?? NaN);
  }
  lines.sort((a, b) => a.id.localeCompare(b.id));
  return true;
}
streamHooks.addStreamPoints = addStreamPoints;

async function renderSeriesGrid(generation: number, tab: "streams" | "system"): Promise<void> {
  const keys = await loadKeys();
  if (generation !== state.generation) return;
  const matcher = searchMatcher(state.search);
  const all = [...new Set([...keys.values()].flatMap((k) => (tab === "streams" ? k.streams : k.system)))].sort();
  // Keys rankscope writes for itself (a stream's `…__count`) stay hidden unless asked for, as on the metrics tab.
  const shown = state.showInternal ? all : all.filter((n) => !isInternalKey(n));
  setInternalNote(all.length - shown.length);
  const names = shown.filter((n) => matcher.test(n));
  if (names.length === 0)
    return emptyNote(
      tab === "streams"
        ? "No raw stream values (per_rank_no_reduce keys) in the selected runs; streamValues probes go to the stream file streams/rank-N.jsonl only."
        : "No system metrics (GPU/CPU monitor) in the selected runs.",
    );
  const view = viewBox();
  if (tab === "streams")
    view.appendChild(
      el(
        "p",
        { className: "muted" },
        "Raw values as each rank recorded them, one dot per value, over time (pick wall or relative time on the x-axis).",
      ),
    );
  const g = el("div", { className: "grid" });
  view.appendChild(g);
  const grid = new LazyGrid(generation);
  setGrid(grid);
  for (const name of names) {
    const card = new ChartCard(name, settingsFor(tab));
    state.cards.push(card);
    g.appendChild(card.root);
    const lines: LineSource[] = state.selected
      .filter((run) => (tab === "streams" ? keys.get(run)?.streams : keys.get(run)?.system)?.includes(name) === true)
      .map((run) => ({
        kind: tab === "streams" ? ("stream" as const) : ("system" as const),
        run,
        key: name,
        rank: undefined,
        cursor: null,
        card,
        line: newLine(`${run}\u0000${tab}\u0000${name}`, runLabel(run), run),
      }));
    const spec: CardSpec = { card, lines };
    grid.add(spec);
  }
}

export const renderStreams = (generation: number): Promise<void> => renderSeriesGrid(generation, "streams");
export const renderSystem = (generation: number): Promise<void> => renderSeriesGrid(generation, "system");
