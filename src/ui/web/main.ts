/**
 * The dashboard app: a runs list on the left, tabs on the right (metrics, streams, system,
 * samples, config, traces). Charts are fetched once, then extended by asking only for points
 * after each line's cursor while the run is live.
 *
 * Performance marks (for the benchmark and the browser's profiler): `rankscope:charts-start`
 * when a metrics grid starts loading, `rankscope:charts-rendered` once every chart of the first
 * grid has drawn, and the measure `rankscope:first-render` from navigation start to that point.
 */
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { api, type KeyInfo, type LineAnswer, type RunKeys, type RunSummary, type SeriesData, type StreamData } from "./api.js";
import { HistogramCard } from "./histogram.js";
import { ChartCard, type Line, type ViewSettings, type XMode, type ZoomRequest } from "./chart.js";
import { append, clear, displayText, el, formatBytes, formatDuration, formatStart, formatTime } from "./dom.js";

type Tab = "metrics" | "streams" | "system" | "histograms" | "samples" | "config" | "traces";
const TABS: [Tab, string][] = [
  ["metrics", "Metrics"],
  ["streams", "Streams"],
  ["system", "System"],
  ["histograms", "Histograms"],
  ["samples", "Samples"],
  ["config", "Config"],
  ["traces", "Traces"],
];
const DONE_STATUSES = new Set(["finished", "failed", "crashed", "killed", "completed", "done"]);
const POLL_MS = 1000;
const RUNS_REFRESH_MS = 5000;
const FETCH_CONCURRENCY = 4;
/** Lines per request on a first load: small enough that the first charts draw early. */
const FIRST_LOAD_BATCH = 8;
/** Lines per request when polling a live run (the server takes at most 200). */
const POLL_BATCH = 100;

/** Where a drawn line's points come from, so polling can ask for what came after. */
interface LineSource {
  kind: "series" | "stream" | "system";
  run: string;
  key: string;
  rank: number | undefined;
  cursor: string | null;
  card: ChartCard;
}

const $ = <T extends HTMLElement>(id: string): T => {
  const node = document.getElementById(id);
  if (node === null) throw new Error(`the page has no #${id}`);
  return node as T;
};

const view = $<HTMLElement>("view");
const runsBody = $<HTMLTableElement>("runs").tBodies[0] as HTMLTableSectionElement;
const errorBox = $<HTMLElement>("error");
const liveBox = $<HTMLElement>("live");
const searchBox = $<HTMLInputElement>("key-search");
const runFilter = $<HTMLInputElement>("run-filter");
const xModeSelect = $<HTMLSelectElement>("x-mode");
const smoothingInput = $<HTMLInputElement>("smoothing");
const smoothingValue = $<HTMLElement>("smoothing-value");
const logScaleInput = $<HTMLInputElement>("log-scale");
const perRankInput = $<HTMLInputElement>("per-rank");

const state = {
  runs: [] as RunSummary[],
  selected: [] as string[],
  tab: "metrics" as Tab,
  settings: { xMode: "step", smoothing: 0.6, logScale: false } as ViewSettings,
  perRank: true,
  /** Bumped on every view change so late answers for an old view are dropped. */
  generation: 0,
  cards: [] as ChartCard[],
  histogramCards: [] as HistogramCard[],
  lineSources: new Map<string, LineSource>(),
  keySignature: "",
  firstGridMarked: false,
  /** Runs that ended since the last poll and get one more. */
  finalPoll: new Set<string>(),
};

performance.mark("rankscope:app-start");

function showError(error: unknown): void {
  errorBox.textContent = error instanceof Error ? error.message : String(error);
}

/** Run tasks with at most `limit` in flight. */
async function pool<T>(items: T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await task(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

function runById(id: string): RunSummary | undefined {
  return state.runs.find((r) => r.id === id);
}

function isLive(runId: string): boolean {
  const run = runById(runId);
  return run === undefined || !DONE_STATUSES.has(run.status.toLowerCase());
}

// ---- URL state --------------------------------------------------------------------------------

function readHash(): void {
  const params = new URLSearchParams(location.hash.slice(1));
  const tab = params.get("tab");
  if (tab !== null && TABS.some(([t]) => t === tab)) state.tab = tab as Tab;
  const runs = params.getAll("run");
  if (runs.length > 0) state.selected = runs;
  const x = params.get("x");
  if (x === "step" || x === "wall" || x === "relative") state.settings.xMode = x;
}

function writeHash(): void {
  const params = new URLSearchParams();
  params.set("tab", state.tab);
  for (const run of state.selected) params.append("run", run);
  params.set("x", state.settings.xMode);
  history.replaceState(null, "", `${location.pathname}#${params.toString()}`);
}

// ---- runs list --------------------------------------------------------------------------------

function renderRuns(): void {
  clear(runsBody);
  const filter = runFilter.value.trim().toLowerCase();
  const now = Date.now();
  for (const run of state.runs) {
    const text = `${run.experiment} ${run.trial} ${run.status}`.toLowerCase();
    if (filter !== "" && !text.includes(filter)) continue;
    const selected = state.selected.includes(run.id);
    const box = el("input", { type: "checkbox", "aria-label": `overlay ${run.id}` });
    box.checked = selected;
    box.addEventListener("click", (event) => {
      event.stopPropagation();
      state.selected = box.checked ? [...state.selected, run.id] : state.selected.filter((id) => id !== run.id);
      selectionChanged();
    });
    const end = run.endTime ?? (isLive(run.id) ? now : run.lastUpdate);
    const duration = run.startTime !== null && end !== null ? formatDuration(end - run.startTime) : "";
    const row = el(
      "tr",
      { className: selected ? "run selected" : "run", "data-run": run.id },
      el("td", {}, box),
      el("td", {}, run.experiment),
      el("td", {}, run.trial),
      el("td", { className: `status status-${run.status.toLowerCase().replace(/[^a-z]/g, "")}` }, run.status),
      el("td", { title: formatTime(run.startTime) }, formatStart(run.startTime)),
      el("td", {}, duration),
    );
    row.addEventListener("click", () => {
      state.selected = [run.id];
      selectionChanged();
    });
    runsBody.appendChild(row);
  }
  if (state.runs.length === 0) runsBody.appendChild(el("tr", {}, el("td", { colspan: 6, className: "muted" }, "No runs under this root yet.")));
}

async function refreshRuns(): Promise<void> {
  const wasLive = new Set(state.runs.filter((r) => isLive(r.id)).map((r) => r.id));
  state.runs = await api.runs();
  // A run that just ended may have written its last points after our last poll: poll it once more.
  for (const id of wasLive) if (!isLive(id)) state.finalPoll.add(id);
  state.selected = state.selected.filter((id) => state.runs.some((r) => r.id === id));
  if (state.selected.length === 0 && state.runs.length > 0) {
    const latest = [...state.runs].sort((a, b) => (b.startTime ?? 0) - (a.startTime ?? 0))[0];
    if (latest !== undefined) state.selected = [latest.id];
  }
  renderRuns();
}

function selectionChanged(): void {
  renderRuns();
  writeHash();
  void renderView();
}

// ---- tabs -------------------------------------------------------------------------------------

function renderTabs(): void {
  const nav = $<HTMLElement>("tabs");
  clear(nav);
  for (const [tab, label] of TABS) {
    const button = el("button", { type: "button", className: tab === state.tab ? "tab active" : "tab", "data-tab": tab }, label);
    button.addEventListener("click", () => {
      state.tab = tab;
      renderTabs();
      writeHash();
      void renderView();
    });
    nav.appendChild(button);
  }
}

function resetView(): number {
  for (const card of state.cards) card.destroy();
  state.cards = [];
  for (const card of state.histogramCards) card.destroy();
  state.histogramCards = [];
  state.lineSources.clear();
  clear(view);
  errorBox.textContent = "";
  return ++state.generation;
}

async function renderView(): Promise<void> {
  const generation = resetView();
  const toolbarCharts = state.tab === "metrics" || state.tab === "streams" || state.tab === "system";
  $<HTMLElement>("toolbar").classList.toggle("hidden", !toolbarCharts);
  // Raw stream values are shown as they are: smoothing them would invent a trend.
  $<HTMLElement>("smoothing-control").classList.toggle("hidden", state.tab === "streams");
  // Streams and system metrics have no step axis of their own (see settingsFor).
  const stepOption = xModeSelect.querySelector('option[value="step"]');
  if (stepOption !== null) stepOption.textContent = state.tab === "streams" || state.tab === "system" ? "step (drawn by relative time here)" : "step";
  if (state.selected.length === 0) {
    view.appendChild(el("p", { className: "muted" }, "Select a run on the left."));
    return;
  }
  try {
    if (state.tab === "metrics") await renderMetrics(generation);
    else if (state.tab === "streams") await renderStreams(generation);
    else if (state.tab === "system") await renderSystem(generation);
    else if (state.tab === "histograms") await renderHistograms(generation);
    else if (state.tab === "samples") await renderSamples(generation);
    else if (state.tab === "config") await renderConfig(generation);
    else await renderTraces(generation);
  } catch (error) {
    if (generation === state.generation) showError(error);
  }
}

/**
 * The view settings a tab's charts use. Streams and system metrics are drawn over time (a probe
 * records many values per step), so "step" shows them by relative time; raw stream values are
 * never smoothed.
 */
function settingsFor(tab: Tab): ViewSettings {
  const settings = { ...state.settings };
  if (tab === "streams" || tab === "system") {
    if (settings.xMode === "step") settings.xMode = "relative";
    if (tab === "streams") settings.smoothing = 0;
  }
  return settings;
}

function matchesSearch(key: string): boolean {
  const q = searchBox.value.trim().toLowerCase();
  return q === "" || key.toLowerCase().includes(q);
}

function runLabel(run: string, extra?: string): string {
  const base = state.selected.length > 1 ? run : "";
  return [base, extra].filter((s) => s !== undefined && s !== "").join(" · ") || "value";
}

/** `rank 1`, or `rank 1 (Trainer_0_r1)` when the rank's process registered a name. */
function rankLabel(keys: RunKeys | undefined, rank: number): string {
  const name = keys?.rankNames[String(rank)];
  return name === undefined || name === "" || name === `rank${rank}` ? `rank ${rank}` : `rank ${rank} (${name})`;
}

function newLine(id: string, label: string, run: string): Line {
  return { id, label, runStart: runById(run)?.startTime ?? null, steps: [], times: [], values: [] };
}

function emptyNote(text: string): void {
  view.appendChild(el("p", { className: "muted empty" }, text));
}

// ---- metrics ----------------------------------------------------------------------------------

async function loadKeys(): Promise<Map<string, RunKeys>> {
  const entries = await Promise.all(state.selected.map(async (run) => [run, await api.keys(run)] as const));
  return new Map(entries);
}

function keySignature(keys: Map<string, RunKeys>): string {
  return [...keys.entries()].map(([run, k]) => `${run}:${k.metrics.map((m) => `${m.key}/${m.ranks.join(",")}/${String(m.global)}`).join(";")}|${k.streams.join(";")}|${k.system.join(";")}`).join("\n");
}

function grid(): HTMLElement {
  const g = el("div", { className: "grid" });
  view.appendChild(g);
  return g;
}

/** Measure the grid's column width once and hand it to every card (one layout, not one per chart). */
function shareWidth(cards: ChartCard[]): number {
  const first = cards[0];
  if (first === undefined) return 0;
  const plot = first.root.querySelector(".plot");
  const width = plot instanceof HTMLElement ? plot.clientWidth : 0;
  for (const card of cards) card.setWidthHint(width);
  return width;
}

/**
 * Points to ask for per line: the server keeps min, max and last per bucket, so about one bucket
 * per two pixels already shows every spike; more points would only cost drawing time. Capped by
 * the server's default of 2,000.
 */
function pointsForWidth(width: number): number {
  return Math.max(300, Math.min(2000, Math.round(width * 1.5)));
}

const API_KIND = { series: "scalar", stream: "stream", system: "system" } as const;

/** Split items into groups by `keyOf`, each cut into chunks of at most `size`. */
function batches<T>(items: T[], keyOf: (item: T) => string, size: number): T[][] {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key) ?? [];
    group.push(item);
    groups.set(key, group);
  }
  const out: T[][] = [];
  for (const group of groups.values()) for (let i = 0; i < group.length; i += size) out.push(group.slice(i, i + size));
  return out;
}

/**
 * Fetch every line of the given cards, a few lines per request and a few requests at a time, and
 * draw each card as soon as it has all its lines.
 */
async function fillCards(generation: number, specs: { lines: (LineSource & { line: Line })[]; card: ChartCard }[]): Promise<void> {
  const maxPoints = pointsForWidth(shareWidth(specs.map((s) => s.card)));
  const jobs = specs.flatMap((spec) => spec.lines.map((l) => ({ spec, l })));
  const pending = new Map(specs.map((s) => [s, s.lines.length]));
  const groups = batches(jobs, (j) => `${j.l.run}\u0000${j.l.kind}`, FIRST_LOAD_BATCH);
  await pool(groups, FETCH_CONCURRENCY, async (group) => {
    const first = group[0];
    if (first === undefined) return;
    let answers: LineAnswer<SeriesData | StreamData>[] = [];
    try {
      answers = await api.lines(first.l.run, API_KIND[first.l.kind], group.map(({ l }) => [l.key, l.rank ?? null, null]), maxPoints);
    } catch (error) {
      if (generation === state.generation) showError(error);
    }
    if (generation !== state.generation) return;
    group.forEach(({ spec, l }, i) => {
      const answer = answers[i];
      if (answer !== undefined && "error" in answer) showError(answer.error);
      else if (answer !== undefined && l.kind === "stream") {
        const data = answer as StreamData;
        addStreamPoints(spec.card, l.run, l.key, data, false);
        state.lineSources.set(`${l.run}\u0000stream\u0000${l.key}`, { kind: "stream", run: l.run, key: l.key, rank: undefined, cursor: data.cursor, card: spec.card });
      } else if (answer !== undefined) {
        const data = answer as SeriesData;
        l.line.steps = data.steps;
        l.line.times = data.times;
        l.line.values = data.values;
        l.line.downsampled = data.downsampled;
        state.lineSources.set(l.line.id, { kind: l.kind, run: l.run, key: l.key, rank: l.rank, cursor: data.cursor, card: spec.card });
      }
      const left = (pending.get(spec) ?? 1) - 1;
      pending.set(spec, left);
      if (left > 0) return;
      if (l.kind !== "stream") spec.card.setLines(spec.lines.map((x) => x.line));
      else spec.card.setLines(spec.card.getLines());
    });
  });
  if (generation !== state.generation) return;
  for (const spec of specs) if (spec.lines.length === 0) spec.card.setLines([]);
}

/**
 * A drag-zoom over thinned lines: ask again for the points from the zoom's first step on, with a
 * budget that gives the zoomed range about as many points as the whole chart had, and splice them
 * in. The store has no upper bound on a range, so the budget covers the zoom to the line's end
 * (at most 2,000 points per line, the server's budget per request).
 */
async function refineZoom(generation: number, zoom: ZoomRequest): Promise<void> {
  const lines = zoom.card.getLines();
  const width = zoom.card.root.querySelector(".plot")?.clientWidth ?? 400;
  const wanted = lines
    .map((line, i) => ({ line, from: zoom.fromSteps[i] ?? null, fraction: zoom.fractions[i] ?? 1, source: state.lineSources.get(line.id) }))
    .filter((w): w is { line: Line; from: number; fraction: number; source: LineSource } => w.line.downsampled === true && w.from !== null && w.source !== undefined && w.source.kind === "series");
  await Promise.all(
    wanted.map(async ({ line, from, fraction, source }) => {
      const maxPoints = Math.min(2000, Math.max(300, Math.ceil(pointsForWidth(width) / fraction)));
      const [answer] = await api.lines<SeriesData>(source.run, "scalar", [[source.key, source.rank ?? null, String(from - 1)]], maxPoints);
      if (generation !== state.generation || answer === undefined || "error" in answer) return;
      const keep = line.steps.findIndex((step) => step >= from);
      const cut = keep === -1 ? line.steps.length : keep;
      line.steps = [...line.steps.slice(0, cut), ...answer.steps];
      line.times = [...line.times.slice(0, cut), ...answer.times];
      line.values = [...line.values.slice(0, cut), ...answer.values];
      line.downsampled = answer.downsampled;
      source.cursor = answer.cursor ?? source.cursor;
    }),
  );
  if (generation !== state.generation || wanted.length === 0) return;
  zoom.card.update(true);
  zoom.card.root.dataset["refined"] = String(Number(zoom.card.root.dataset["refined"] ?? "0") + 1);
}

async function renderMetrics(generation: number): Promise<void> {
  if (!state.firstGridMarked) performance.mark("rankscope:charts-start");
  const keys = await loadKeys();
  if (generation !== state.generation) return;
  state.keySignature = keySignature(keys);
  const byKey = new Map<string, { run: string; info: KeyInfo }[]>();
  for (const [run, k] of keys) {
    for (const info of k.metrics) {
      const list = byKey.get(info.key) ?? [];
      list.push({ run, info });
      byKey.set(info.key, list);
    }
  }
  const names = [...byKey.keys()].sort().filter(matchesSearch);
  if (names.length === 0) {
    emptyNote(byKey.size === 0 ? "This run has no metrics yet." : "No metric matches the search.");
    if (!state.firstGridMarked) {
      state.firstGridMarked = true;
      document.body.dataset["chartsRendered"] = "0";
    }
    return;
  }
  const g = grid();
  const specs = names.map((name) => {
    const card = new ChartCard(name, settingsFor("metrics"), () => checkAllDrawn(generation, names.length), "", (zoom) => void refineZoom(generation, zoom));
    state.cards.push(card);
    g.appendChild(card.root);
    const lines: (LineSource & { line: Line })[] = [];
    for (const { run, info } of byKey.get(name) ?? []) {
      const showRanks = state.perRank || !info.global;
      if (info.global) lines.push({ kind: "series", run, key: name, rank: undefined, cursor: null, card, line: newLine(`${run}\u0000${name}\u0000global`, runLabel(run, info.ranks.length > 0 && showRanks ? "all ranks" : undefined), run) });
      if (showRanks) {
        for (const rank of info.ranks) lines.push({ kind: "series", run, key: name, rank, cursor: null, card, line: newLine(`${run}\u0000${name}\u0000${rank}`, runLabel(run, rankLabel(keys.get(run), rank)), run) });
      }
    }
    return { lines, card };
  });
  await fillCards(generation, specs);
}

function checkAllDrawn(generation: number, total: number): void {
  if (generation !== state.generation || state.firstGridMarked || state.tab !== "metrics") return;
  const drawn = state.cards.filter((c) => c.root.dataset["drawn"] === "1").length;
  if (drawn >= total) {
    state.firstGridMarked = true;
    performance.mark("rankscope:charts-rendered");
    performance.measure("rankscope:first-render", { start: 0, end: "rankscope:charts-rendered" });
    document.body.dataset["chartsRendered"] = String(total);
  }
}

// ---- streams and system -----------------------------------------------------------------------

/** Rank names of each run, from its keys, for stream legends. */
const rankNamesByRun = new Map<string, RunKeys>();

function addStreamPoints(card: ChartCard, run: string, key: string, data: StreamData, redraw = true): boolean {
  if (data.values.length === 0) return false;
  const lines = card.getLines();
  const byRank = new Map<number, Line>();
  for (let i = 0; i < data.values.length; i++) {
    const rank = data.ranks[i] ?? 0;
    const id = `${run}\u0000${key}\u0000stream\u0000${rank}`;
    let line = byRank.get(rank) ?? lines.find((l) => l.id === id);
    if (line === undefined) {
      line = { ...newLine(id, runLabel(run, rankLabel(rankNamesByRun.get(run), rank)), run), scatter: true };
      lines.push(line);
    }
    byRank.set(rank, line);
    line.steps.push(data.steps[i] ?? 0);
    line.times.push(data.times[i] ?? 0);
    line.values.push(data.values[i] ?? NaN);
  }
  lines.sort((a, b) => a.id.localeCompare(b.id));
  if (redraw) card.setLines(lines);
  return true;
}

async function renderStreams(generation: number): Promise<void> {
  const keys = await loadKeys();
  if (generation !== state.generation) return;
  for (const [run, k] of keys) rankNamesByRun.set(run, k);
  const names = [...new Set([...keys.values()].flatMap((k) => k.streams))].sort().filter(matchesSearch);
  if (names.length === 0) return emptyNote("No raw stream values (per_rank_no_reduce) in the selected runs.");
  view.appendChild(el("p", { className: "muted" }, "Raw values as each rank recorded them, one dot per value, over time (pick wall or relative time on the x-axis)."));
  const g = grid();
  const specs = names.map((name) => {
    const card = new ChartCard(name, settingsFor("streams"));
    state.cards.push(card);
    g.appendChild(card.root);
    const lines = state.selected
      .filter((run) => keys.get(run)?.streams.includes(name) === true)
      .map((run) => ({ kind: "stream" as const, run, key: name, rank: undefined, cursor: null, card, line: newLine(`${run}\u0000${name}`, run, run) }));
    return { lines, card };
  });
  await fillCards(generation, specs);
}

async function renderSystem(generation: number): Promise<void> {
  const keys = await loadKeys();
  if (generation !== state.generation) return;
  const names = [...new Set([...keys.values()].flatMap((k) => k.system))].sort().filter(matchesSearch);
  if (names.length === 0) return emptyNote("No system metrics (GPU/CPU monitor) in the selected runs.");
  const g = grid();
  const specs = names.map((name) => {
    const card = new ChartCard(name, settingsFor("system"));
    state.cards.push(card);
    g.appendChild(card.root);
    const lines = state.selected
      .filter((run) => keys.get(run)?.system.includes(name) === true)
      .map((run) => ({ kind: "system" as const, run, key: name, rank: undefined, cursor: null, card, line: newLine(`${run}\u0000system\u0000${name}`, runLabel(run), run) }));
    return { lines, card };
  });
  await fillCards(generation, specs);
}

async function renderHistograms(generation: number): Promise<void> {
  for (const run of state.selected) {
    const keys = await api.keys(run);
    if (generation !== state.generation) return;
    const names = keys.histograms.filter(matchesSearch);
    const section = el("section", { className: "run-section" }, el("h2", {}, run));
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
      const rows = await api.histograms(run, name);
      if (generation !== state.generation) return;
      if (rows.length === 0) continue;
      const card = new HistogramCard(name, rows, width);
      state.histogramCards.push(card);
      g.appendChild(card.root);
      card.show();
    }
  }
}

// ---- samples, config, traces ------------------------------------------------------------------

async function renderSamples(generation: number): Promise<void> {
  for (const run of state.selected) {
    const rows = await api.samples(run);
    if (generation !== state.generation) return;
    const section = el("section", { className: "run-section" }, el("h2", {}, run));
    view.appendChild(section);
    const shown = rows.filter((r) => matchesSearch(r.key));
    if (shown.length === 0) {
      section.appendChild(el("p", { className: "muted" }, "No samples (Reduce.SAMPLE keys) in this run."));
      continue;
    }
    const byKey = new Map<string, typeof rows>();
    for (const row of shown) byKey.set(row.key, [...(byKey.get(row.key) ?? []), row]);
    for (const [key, list] of byKey) {
      const fields = [...new Set(list.flatMap((r) => (r.record !== null && typeof r.record === "object" && !Array.isArray(r.record) ? Object.keys(r.record) : ["value"])))];
      const table = el(
        "table",
        { className: "samples", "data-key": key },
        el("thead", {}, el("tr", {}, el("th", {}, "step"), el("th", {}, "rank"), ...fields.map((f) => el("th", {}, f)))),
      );
      const body = el("tbody");
      for (const row of list) {
        const record = row.record !== null && typeof row.record === "object" && !Array.isArray(row.record) ? (row.record as Record<string, unknown>) : { value: row.record };
        body.appendChild(el("tr", {}, el("td", {}, row.step), el("td", {}, row.rank === null ? "" : row.rank), ...fields.map((f) => el("td", {}, displayText(record[f])))));
      }
      table.appendChild(body);
      append(section, el("h3", {}, key), el("div", { className: "table-wrap" }, table));
    }
  }
}

function flatten(value: unknown, prefix: string, out: [string, string][]): void {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix === "" ? k : `${prefix}.${k}`, out);
  } else {
    out.push([prefix, displayText(value)]);
  }
}

async function renderConfig(generation: number): Promise<void> {
  const versionInfo = await api.version();
  if (generation !== state.generation) return;
  view.appendChild(el("p", { className: "muted" }, `Served by rankscope ${versionInfo.rankscope} on Node ${versionInfo.node}.`));
  for (const run of state.selected) {
    const config = await api.config(run);
    if (generation !== state.generation) return;
    const section = el("section", { className: "run-section" }, el("h2", {}, run));
    const rows: [string, string][] = [];
    flatten(config.params, "", rows);
    section.appendChild(el("h3", {}, "Hyperparameters"));
    if (rows.length === 0) section.appendChild(el("p", { className: "muted" }, "None logged."));
    else section.appendChild(el("table", { className: "params" }, el("tbody", {}, ...rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))))));
    section.appendChild(el("h3", {}, "config.yaml"));
    section.appendChild(config.configYaml === null ? el("p", { className: "muted" }, "No config.yaml in this run.") : el("pre", {}, config.configYaml));
    section.appendChild(el("h3", {}, "Version (version.json)"));
    section.appendChild(config.version === null ? el("p", { className: "muted" }, "No version.json in this run.") : el("pre", {}, JSON.stringify(config.version, null, 2)));
    view.appendChild(section);
  }
}

async function renderTraces(generation: number): Promise<void> {
  view.appendChild(
    el(
      "div",
      { className: "note" },
      el("strong", {}, "Opening a trace in Perfetto: "),
      "download a file below, go to ",
      el("a", { href: "https://ui.perfetto.dev", target: "_blank", rel: "noopener noreferrer" }, "ui.perfetto.dev"),
      ", choose “Open trace file” and pick it. The trace stays on your machine: Perfetto reads it in the browser. ",
      "Each per-rank file (rank-N.jsonl) opens on its own; for all ranks on one timeline run ",
      el("code", {}, "rankscope traces merge RUN_DIR"),
      ", which writes traces/trace.json to this list.",
    ),
  );
  for (const run of state.selected) {
    const files = await api.traces(run);
    if (generation !== state.generation) return;
    const section = el("section", { className: "run-section" }, el("h2", {}, run));
    if (files.length === 0) section.appendChild(el("p", { className: "muted" }, "No trace files (traces/) in this run."));
    else {
      const body = el("tbody");
      for (const file of files) {
        body.appendChild(el("tr", {}, el("td", {}, el("a", { href: api.traceUrl(run, file.name), download: file.name, className: "trace-link" }, file.name)), el("td", {}, formatBytes(file.size)), el("td", {}, formatTime(file.modified))));
      }
      section.appendChild(el("table", { className: "traces" }, el("thead", {}, el("tr", {}, el("th", {}, "file"), el("th", {}, "size"), el("th", {}, "modified"))), body));
    }
    view.appendChild(section);
  }
}

// ---- live updates -----------------------------------------------------------------------------

let polling = false;

/** Ask every live line for the points after its cursor (one request per run and kind) and append them. */
async function poll(): Promise<void> {
  if (polling || document.hidden) return;
  polling = true;
  const generation = state.generation;
  let grew = 0;
  try {
    const finalPoll = new Set(state.finalPoll);
    state.finalPoll.clear();
    const sources = [...state.lineSources.entries()].filter(([, s]) => isLive(s.run) || finalPoll.has(s.run));
    const changed = new Set<ChartCard>();
    const groups = batches(sources, ([, s]) => `${s.run}\u0000${s.kind}`, POLL_BATCH);
    await pool(groups, FETCH_CONCURRENCY, async (group) => {
      const first = group[0];
      if (first === undefined) return;
      const answers = await api.lines(first[1].run, API_KIND[first[1].kind], group.map(([, s]) => [s.key, s.rank ?? null, s.cursor]));
      if (generation !== state.generation) return;
      group.forEach(([id, source], i) => {
        const answer = answers[i];
        if (answer === undefined || "error" in answer || answer.values.length === 0) return;
        if (source.kind === "stream") {
          const data = answer as StreamData;
          if (data.cursor !== null) source.cursor = data.cursor;
          if (addStreamPoints(source.card, source.run, source.key, data)) grew += data.values.length;
          return;
        }
        const data = answer as SeriesData;
        source.cursor = data.cursor ?? source.cursor;
        const line = source.card.getLines().find((l) => l.id === id);
        if (line === undefined) return;
        line.steps.push(...data.steps);
        line.times.push(...data.times);
        line.values.push(...data.values);
        grew += data.values.length;
        changed.add(source.card);
      });
    });
    for (const card of changed) card.update();
    const live = state.selected.some(isLive);
    liveBox.textContent = live ? (grew > 0 ? `live · +${grew} points` : "live") : "";
  } catch (error) {
    showError(error);
  } finally {
    polling = false;
  }
}

async function refreshPeriodically(): Promise<void> {
  try {
    await refreshRuns();
    if (state.tab === "metrics" && state.selected.some(isLive) && state.keySignature !== "") {
      // New keys appear while a run goes on: rebuild the grid when the set of lines changed.
      const signature = keySignature(await loadKeys());
      if (signature !== state.keySignature) await renderView();
    }
  } catch (error) {
    showError(error);
  }
}

// ---- start ------------------------------------------------------------------------------------

function settingsChanged(): void {
  smoothingValue.textContent = state.settings.smoothing.toFixed(2);
  for (const card of state.cards) card.setSettings(settingsFor(state.tab));
  writeHash();
}

async function start(): Promise<void> {
  // The token, when there is one, is now a cookie; keep it out of the address bar and history.
  if (new URLSearchParams(location.search).has("token")) history.replaceState(null, "", `${location.pathname}${location.hash}`);
  readHash();
  xModeSelect.value = state.settings.xMode;
  smoothingInput.value = String(state.settings.smoothing);
  xModeSelect.addEventListener("change", () => {
    state.settings.xMode = xModeSelect.value as XMode;
    settingsChanged();
  });
  smoothingInput.addEventListener("input", () => {
    state.settings.smoothing = Number(smoothingInput.value);
    settingsChanged();
  });
  logScaleInput.addEventListener("change", () => {
    state.settings.logScale = logScaleInput.checked;
    settingsChanged();
  });
  perRankInput.addEventListener("change", () => {
    state.perRank = perRankInput.checked;
    void renderView();
  });
  let searchTimer: ReturnType<typeof setTimeout> | undefined;
  searchBox.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => void renderView(), 200);
  });
  runFilter.addEventListener("input", renderRuns);
  renderTabs();
  try {
    const version = await api.version();
    $<HTMLElement>("version").textContent = `v${version.rankscope}`;
    await refreshRuns();
  } catch (error) {
    showError(error);
  }
  writeHash();
  await renderView();
  setInterval(() => void poll(), POLL_MS);
  setInterval(() => void refreshPeriodically(), RUNS_REFRESH_MS);
}

void start();
