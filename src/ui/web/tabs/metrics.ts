/**
 * The metrics tab: one chart per key, in collapsible sections by key prefix (`train/…`), the
 * combined charts of several keys first (combined.ts), then pinned charts, internal keys hidden unless asked for, a regex search over keys. Cards load and
 * draw only when they come on screen.
 *
 * Performance marks: `rankscope:charts-start` when the grid starts loading, `rankscope:charts-rendered`
 * once every chart on screen at load has drawn, and the measure `rankscope:first-render` from
 * navigation start to that point (body's `data-charts-rendered` says how many charts that was).
 */
import { GLOBAL_RANK } from "../../../store/read-types.js";
import { api, type GroupLine, type RunKeys, type SeriesData } from "../api.js";
import { ChartCard } from "../chart.js";
import { lineColour } from "../chart-series.js";
import type { Line } from "../chart-data.js";
import { append, el } from "../dom.js";
import { refineWindow, LazyGrid, type CardSpec } from "../fetching.js";
import { isInternalKey, searchMatcher, sectionOf, visibleName } from "../names.js";
import { hooks, state, type LineSource } from "../state.js";
import { combinedCards } from "./combined.js";
import { emptyNote, loadKeys, newLine, rankLabel, runLabel, settingsFor, viewBox } from "./common.js";

export function keySignature(keys: Map<string, RunKeys>): string {
  return [...keys.entries()]
    .map(
      ([run, k]) =>
        `${run}:${k.metrics.map((m) => `${m.key}/${m.ranks.join(",")}`).join(";")}|${k.streams.join(";")}|${k.system.join(";")}`,
    )
    .join("\n");
}

/** The current grid (to stop observing when the view changes). */
let currentGrid: LazyGrid | null = null;

export function disconnectGrid(): void {
  currentGrid?.disconnect();
  currentGrid = null;
}

export function setGrid(grid: LazyGrid): void {
  disconnectGrid();
  currentGrid = grid;
}

/** Say beside the *internal keys* box how many keys it hides. */
export function setInternalNote(hidden: number): void {
  const note = document.getElementById("internal-note");
  if (note !== null) note.textContent = state.showInternal || hidden === 0 ? "" : `(${hidden} hidden)`;
}

/** Every metric key of the selected runs (for the x-axis picker). */
export function allMetricKeys(): string[] {
  const keys = new Set<string>();
  for (const run of state.selected) for (const m of state.keysByRun.get(run)?.metrics ?? []) keys.add(m.key);
  return [...keys].sort();
}

/** The x-axis metric's points of each run, fetched once per view. */
const xMaps = new Map<string, Promise<{ steps: number[]; values: number[] }>>();

function xMapOf(run: string, key: string, generation: number): Promise<{ steps: number[]; values: number[] }> {
  const id = `${generation}\u0000${run}\u0000${key}`;
  let found = xMaps.get(id);
  if (found === undefined) {
    found = api
      .lines<SeriesData>(run, "scalar", [[key, null, null]], 2000)
      .then(([answer]) =>
        answer === undefined || "error" in answer
          ? { steps: [], values: [] }
          : { steps: answer.steps, values: answer.values },
      );
    xMaps.set(id, found);
  }
  return found;
}

function allDrawnCheck(generation: number, grid: LazyGrid): void {
  if (generation !== state.generation || state.firstGridMarked || grid.firstBatch === null) return;
  const cards = [...grid.firstBatch];
  // A card of the first load pushed off screen meanwhile (the grid's layout settling) draws only
  // when scrolled back: "every chart on screen" no longer includes it.
  if (cards.every((c) => c.root.dataset["drawn"] === "1" || !c.isOnScreen())) {
    state.firstGridMarked = true;
    performance.mark("rankscope:charts-rendered");
    performance.measure("rankscope:first-render", { start: 0, end: "rankscope:charts-rendered" });
    document.body.dataset["chartsRendered"] = String(cards.length);
  }
}

export function onZoom(range: [number, number] | null): void {
  state.settings.zoom = range;
  for (const card of state.cards) card.setZoom(range);
  hooks.writeUrl();
  if (range !== null)
    void refineWindow(
      state.generation,
      state.cards.filter((c) => c.isOnScreen()),
    );
}

function togglePin(key: string): void {
  state.pinned = state.pinned.includes(key) ? state.pinned.filter((k) => k !== key) : [...state.pinned, key];
  hooks.writeUrl();
  void hooks.renderView();
}

/**
 * A group's line: the mean across its runs, in the group's colour, with the band the view asks for
 * (± std or min–max) and the group's figures for the tooltip and the CSV.
 */
function groupLine(key: string, group: GroupLine, index: number): Line {
  const kind = state.band === "minmax" ? "minmax" : "std";
  const line: Line = {
    id: `group\u0000${key}\u0000${group.label}`,
    label: `${visibleName(group.label)} (${group.runs.length} run${group.runs.length === 1 ? "" : "s"})`,
    runStart: null,
    steps: group.steps,
    times: [],
    values: group.mean,
    colour: lineColour(index),
  };
  if (state.band !== "none") {
    const lo = kind === "std" ? group.mean.map((m, i) => m - (group.std[i] ?? NaN)) : group.min;
    const hi = kind === "std" ? group.mean.map((m, i) => m + (group.std[i] ?? NaN)) : group.max;
    line.band = { kind, lo, hi, std: group.std, min: group.min, max: group.max, count: group.count };
  }
  return line;
}

/** Draw a chart of groups: the selected runs grouped by the view's fields, a line per group (`/api/groups`). */
async function loadGroups(card: ChartCard, key: string, generation: number, maxPoints: number): Promise<void> {
  const answer = await api.groups(key, state.groupBy, state.selected, maxPoints);
  if (generation !== state.generation) return;
  card.setLines(answer.groups.map((group, i) => groupLine(key, group, i)));
}

export async function renderMetrics(generation: number): Promise<void> {
  if (!state.firstGridMarked) performance.mark("rankscope:charts-start");
  const view = viewBox();
  const keys = await loadKeys();
  if (generation !== state.generation) return;
  state.keySignature = keySignature(keys);
  hooks.renderRuns();
  const byKey = runsByKey(keys);
  const matcher = searchMatcher(state.search);
  document.getElementById("key-search")?.classList.toggle("invalid", matcher.error !== null);
  let internal = 0;
  const names = [...byKey.keys()].sort().filter((name) => {
    const hiddenInternal =
      !state.showInternal && (byKey.get(name) ?? []).every(({ info }) => isInternalKey(info.key, info.internal));
    if (hiddenInternal) internal++;
    return !hiddenInternal && matcher.test(name);
  });
  setInternalNote(internal);
  const grid = new LazyGrid(generation);
  setGrid(grid);
  const settings = settingsFor("metrics");
  const onSettled = (): void => allDrawnCheck(generation, grid);
  if (state.combined.length > 0) {
    const box = sectionBox(view, COMBINED, state.combined.length);
    for (const spec of combinedCards(box, keys, settings, { onSettled, onZoom })) grid.add(withXMap(spec, generation));
  }
  if (names.length === 0) {
    emptyNote(
      byKey.size === 0
        ? "This run has no metrics yet."
        : matcher.error !== null
          ? `No metric matches; the search is not a valid regular expression (${matcher.error}).`
          : "No metric matches the search.",
    );
    if (!state.firstGridMarked && state.combined.length === 0) {
      state.firstGridMarked = true;
      document.body.dataset["chartsRendered"] = "0";
    }
    return;
  }
  for (const [section, list] of sectionsOf(names)) {
    const g = sectionBox(view, section, list.length);
    for (const name of list) {
      const card = new ChartCard(
        name,
        settings,
        { onSettled, onZoom, onPin: togglePin },
        "",
        state.pinned.includes(name),
      );
      state.cards.push(card);
      g.appendChild(card.root);
      const spec: CardSpec = { card, lines: cardLines(card, name, byKey.get(name) ?? [], keys) };
      if (state.groupBy.length > 0) spec.load = (maxPoints) => loadGroups(card, name, generation, maxPoints);
      grid.add(withXMap(spec, generation));
    }
  }
}

/** `spec`, fetching the x-axis metric's points of its runs first when the view has a metric on the x-axis. */
function withXMap(spec: CardSpec, generation: number): CardSpec {
  const settings = state.settings;
  if (settings.xMode !== "metric" || settings.xKey === "") return spec;
  spec.prepare = async () => {
    await Promise.all(
      spec.lines.map(async (l) => {
        l.line.xMap = await xMapOf(l.run, settings.xKey, generation);
      }),
    );
  };
  return spec;
}

type KeyOfRun = { run: string; info: RunKeys["metrics"][number] };

/** Each metric key, with the runs (and their key info) that have it. */
function runsByKey(keys: Map<string, RunKeys>): Map<string, KeyOfRun[]> {
  const byKey = new Map<string, KeyOfRun[]>();
  for (const [run, k] of keys) {
    for (const info of k.metrics) {
      const list = byKey.get(info.key) ?? [];
      list.push({ run, info });
      byKey.set(info.key, list);
    }
  }
  return byKey;
}

const PINNED = "\u0000pinned";
const COMBINED = "\u0000combined";

/** The charts' sections in page order (pinned, then unsectioned, then by name), each with its metric names. */
function sectionsOf(names: readonly string[]): [string, string[]][] {
  const pinned = names.filter((n) => state.pinned.includes(n));
  const sections = new Map<string, string[]>();
  if (pinned.length > 0) sections.set(PINNED, pinned);
  for (const name of names) {
    if (state.pinned.includes(name)) continue;
    const section = sectionOf(name);
    sections.set(section, [...(sections.get(section) ?? []), name]);
  }
  const order = (s: string): string => (s === PINNED ? "0" : s === "" ? "1" : `2${s}`);
  return [...sections].sort(([a], [b]) => order(a).localeCompare(order(b)));
}

/** A collapsible section of `count` charts in `view` (its open state kept in the URL); returns the grid its cards go in. */
function sectionBox(view: HTMLElement, section: string, count: number): HTMLElement {
  const title =
    section === COMBINED
      ? "Combined"
      : section === PINNED
        ? "Pinned"
        : section === ""
          ? "Charts"
          : visibleName(section);
  const name = section === COMBINED ? "combined" : section === PINNED ? "pinned" : section;
  const details = el("details", { className: "section", "data-section": name });
  details.open = !state.collapsed.includes(section);
  details.addEventListener("toggle", () => {
    state.collapsed = details.open
      ? state.collapsed.filter((s) => s !== section)
      : [...state.collapsed.filter((s) => s !== section), section];
    hooks.writeUrl();
  });
  const g = el("div", { className: "grid" });
  append(details, el("summary", {}, title, el("span", { className: "muted count" }, ` ${count}`)), g);
  view.appendChild(details);
  return g;
}

/** A card's lines: per run, its global line and (per rank or when there is no global one) its ranks' lines. */
function cardLines(card: ChartCard, name: string, runs: readonly KeyOfRun[], keys: Map<string, RunKeys>): LineSource[] {
  const lines: LineSource[] = [];
  for (const { run, info } of runs) {
    const global = info.ranks.includes(GLOBAL_RANK);
    const ranks = info.ranks.filter((r) => r !== GLOBAL_RANK);
    const showRanks = state.perRank || !global;
    const add = (rank: number | undefined, line: Line): void => {
      lines.push({ kind: "series", run, key: name, rank, cursor: null, card, line });
    };
    if (global)
      add(
        undefined,
        newLine(
          `${run}\u0000${name}\u0000global`,
          runLabel(run, ranks.length > 0 && showRanks ? "all ranks" : undefined),
          run,
        ),
      );
    if (showRanks)
      for (const rank of ranks)
        add(
          rank,
          newLine(`${run}\u0000${name}\u0000${rank}`, runLabel(run, rankLabel(keys.get(run), rank, run)), run, rank),
        );
  }
  return lines;
}
