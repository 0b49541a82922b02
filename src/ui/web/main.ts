/**
 * The dashboard app: a runs list on the left, tabs on the right (metrics, runs table, streams,
 * system, histograms, samples, logs, config, traces). This module wires the page together; the state
 * is in state.ts, the URL in url.ts, fetching in fetching.ts, live updates in polling.ts, the
 * runs list in runs.ts and each tab in tabs/.
 */
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { api } from "./api.js";
import { clear, el } from "./dom.js";
import { visibleName } from "./names.js";
import { poll } from "./polling.js";
import { refreshRuns, renderRunsList, setupRunsList } from "./runs.js";
import { TABS, hooks, isLive, state, type Band } from "./state.js";
import { loadKeys, lostRanksNote, prefetchKeys, settingsFor } from "./tabs/common.js";
import { renderAlertBanner, renderAlerts } from "./tabs/alerts.js";
import { addCombined } from "./tabs/combined.js";
import { renderConfig } from "./tabs/config.js";
import { renderHistograms } from "./tabs/histograms.js";
import { renderInference, selectedRunsHaveInference } from "./tabs/inference.js";
import { renderLogs, stopFollowing } from "./tabs/logs.js";
import { renderRanks } from "./tabs/ranks.js";
import { allMetricKeys, disconnectGrid, keySignature, renderMetrics } from "./tabs/metrics.js";
import { detachRunsTable, refreshRunsTable, renderRunsTable } from "./tabs/runs-table.js";
import { renderSamples } from "./tabs/samples.js";
import { renderStreams, renderSystem } from "./tabs/streams.js";
import { renderTraces } from "./tabs/traces.js";
import { parseCombined, readHash, writeHash } from "./url.js";
import { reportData } from "./frozen.js";
import { setupExport } from "./export-report.js";

const POLL_MS = 1000;
const BANDS: readonly Band[] = ["std", "minmax", "none"];
const RUNS_REFRESH_MS = 5000;

/** The page's element `#id`, checked to be a `type` (HTMLElement, HTMLSelectElement, …). */
const $ = <T extends HTMLElement>(id: string, type: abstract new () => T): T => {
  const node = document.getElementById(id);
  if (!(node instanceof type)) throw new Error(`the page has no #${id} (${type.name})`);
  return node;
};

const view = $("view", HTMLElement);
const runsTable = $("runs", HTMLTableElement);
const errorBox = $("error", HTMLElement);
const liveBox = $("live", HTMLElement);
const searchBox = $("key-search", HTMLInputElement);
const runFilter = $("run-filter", HTMLInputElement);
const xModeSelect = $("x-mode", HTMLSelectElement);
const smoothingInput = $("smoothing", HTMLInputElement);
const smoothingValue = $("smoothing-value", HTMLElement);
const logScaleInput = $("log-scale", HTMLInputElement);
const logXInput = $("log-x", HTMLInputElement);
const perRankInput = $("per-rank", HTMLInputElement);
const internalInput = $("show-internal", HTMLInputElement);
const themeButton = $("theme", HTMLButtonElement);
const resetZoom = $("reset-zoom", HTMLButtonElement);
const alertBanner = $("alert-banner", HTMLElement);
const groupByInput = $("group-by", HTMLInputElement);
const combineInput = $("combine", HTMLInputElement);
const bandSelect = $("band", HTMLSelectElement);

performance.mark("rankscope:app-start");

hooks.showError = (error: unknown): void => {
  errorBox.textContent = visibleName(error instanceof Error ? error.message : String(error));
};
hooks.renderRuns = renderRunsList;
hooks.writeUrl = (): void => {
  writeHash();
  resetZoom.classList.toggle("hidden", state.settings.zoom === null);
};
hooks.renderView = renderView;
hooks.switchTab = (tab): void => switchTab(tab);

/** The banner of alerts firing in the selected runs (a failure to read them is shown like any other). */
function refreshBanner(): void {
  renderAlertBanner(alertBanner).catch((error: unknown) => hooks.showError(error));
}

/** The tabs offered: Inference only when a selected run has inference keys (or it is the tab open). */
function shownTabs(): typeof TABS {
  return TABS.filter(([tab]) => tab !== "inference" || state.hasInference || state.tab === "inference");
}

/** Show or hide the Inference tab as the selected runs have inference keys or not (a failure leaves it as it is). */
async function refreshInferenceTab(generation: number): Promise<void> {
  try {
    const has = await selectedRunsHaveInference();
    if (generation !== state.generation || has === state.hasInference) return;
    state.hasInference = has;
    renderTabs();
  } catch {
    // The view shows the error of reading the runs' keys when it needs them.
  }
}

function renderTabs(): void {
  const nav = $("tabs", HTMLElement);
  clear(nav);
  const tabs = shownTabs();
  for (const [tab, label] of tabs) {
    const active = tab === state.tab;
    const button = el(
      "button",
      {
        type: "button",
        role: "tab",
        id: `tab-${tab}`,
        "aria-selected": active ? "true" : "false",
        "aria-controls": "view",
        tabindex: active ? 0 : -1,
        className: active ? "tab active" : "tab",
        "data-tab": tab,
      },
      label,
    );
    button.addEventListener("click", () => switchTab(tab));
    button.addEventListener("keydown", (event) => {
      if (event.key !== "ArrowRight" && event.key !== "ArrowLeft") return;
      const i = tabs.findIndex(([t]) => t === tab);
      const next = tabs[(i + (event.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length]?.[0];
      if (next !== undefined) {
        switchTab(next);
        document.getElementById(`tab-${next}`)?.focus();
      }
    });
    nav.appendChild(button);
  }
}

function switchTab(tab: (typeof TABS)[number][0]): void {
  state.tab = tab;
  renderTabs();
  hooks.writeUrl();
  void renderView();
}

function resetView(): number {
  disconnectGrid();
  detachRunsTable();
  stopFollowing();
  for (const card of state.cards) card.destroy();
  state.cards = [];
  for (const card of state.histogramCards) card.destroy();
  state.histogramCards = [];
  state.lineSources.clear();
  clear(view);
  errorBox.textContent = "";
  return ++state.generation;
}

/**
 * The x-axis picker: step, wall and relative time, then every metric key of the selected runs.
 * Streams and system metrics are drawn over time only, so there it offers the time axes and shows
 * the one the charts use.
 */
function fillXOptions(): void {
  const streamsLike = state.tab === "streams" || state.tab === "system";
  const drawn = streamsLike ? settingsFor(state.tab) : state.settings;
  const byMetric = state.tab === "inference" ? "step" : `metric:${drawn.xKey}`;
  const current = drawn.xMode === "metric" ? byMetric : drawn.xMode;
  clear(xModeSelect);
  if (!streamsLike) xModeSelect.appendChild(el("option", { value: "step" }, "step"));
  xModeSelect.appendChild(el("option", { value: "wall" }, "wall time"));
  xModeSelect.appendChild(el("option", { value: "relative" }, "relative time"));
  const keys = allMetricKeys();
  if (state.settings.xMode === "metric" && !keys.includes(state.settings.xKey)) keys.push(state.settings.xKey);
  // The inference charts are over steps or time (tabs/inference.ts draws a metric x-axis by step).
  if (!streamsLike && state.tab !== "inference" && keys.length > 0) {
    const group = el("optgroup", { label: "a metric (joined by step)" });
    for (const key of keys) group.appendChild(el("option", { value: `metric:${key}` }, visibleName(key)));
    xModeSelect.appendChild(group);
  }
  xModeSelect.value = current;
}

async function renderView(): Promise<void> {
  const generation = resetView();
  refreshBanner();
  const chartsTab =
    state.tab === "metrics" || state.tab === "inference" || state.tab === "streams" || state.tab === "system";
  $("toolbar", HTMLElement).classList.toggle(
    "hidden",
    !chartsTab && state.tab !== "runs" && state.tab !== "histograms" && state.tab !== "samples",
  );
  for (const id of ["x-control", "log-control", "smoothing-control", "rank-control"])
    $(id, HTMLElement).classList.toggle("hidden", !chartsTab);
  $("group-control", HTMLElement).classList.toggle("hidden", state.tab !== "metrics");
  $("combine-control", HTMLElement).classList.toggle("hidden", state.tab !== "metrics");
  // The inference charts are of the reduced (global) lines only, and of no internal key.
  if (state.tab === "inference") $("rank-control", HTMLElement).classList.add("hidden");
  $("internal-control", HTMLElement).classList.toggle("hidden", state.tab === "inference");
  // Raw stream values are shown as they are: smoothing them would invent a trend.
  if (state.tab === "streams") $("smoothing-control", HTMLElement).classList.add("hidden");
  searchBox.placeholder =
    state.tab === "runs"
      ? "Summary columns (regex)"
      : state.tab === "inference"
        ? "Search models (regex)"
        : "Search metrics (regex)";
  if (state.selected.length === 0 && state.tab !== "runs") {
    view.appendChild(el("p", { className: "muted" }, "Select a run on the left."));
    void refreshInferenceTab(generation);
    return;
  }
  // Ranks a selected run lost are named over every view (their lines are marked in the charts).
  const lostNote = lostRanksNote();
  if (lostNote !== null) view.appendChild(lostNote);
  try {
    if (state.tab === "metrics") await renderMetrics(generation);
    else if (state.tab === "inference") await renderInference(generation);
    else if (state.tab === "runs") await renderRunsTable(generation);
    else if (state.tab === "streams") await renderStreams(generation);
    else if (state.tab === "system") await renderSystem(generation);
    else if (state.tab === "histograms") await renderHistograms(generation);
    else if (state.tab === "samples") await renderSamples(generation);
    else if (state.tab === "logs") await renderLogs(generation);
    else if (state.tab === "ranks") await renderRanks(generation);
    else if (state.tab === "alerts") await renderAlerts(generation);
    else if (state.tab === "config") await renderConfig(generation);
    else await renderTraces(generation);
    if (generation === state.generation) fillXOptions();
    void refreshInferenceTab(generation);
  } catch (error) {
    if (generation === state.generation) hooks.showError(error);
  }
}

async function refreshPeriodically(): Promise<void> {
  try {
    await refreshRuns();
    if (state.selected.some(isLive)) refreshBanner();
    if (state.tab === "runs") await refreshRunsTable();
    if (state.tab === "metrics" && state.selected.some(isLive) && state.keySignature !== "") {
      // New keys appear while a run goes on: rebuild the grid when the set of lines changed.
      const signature = keySignature(await loadKeys());
      if (signature !== state.keySignature) await renderView();
    }
  } catch (error) {
    hooks.showError(error);
  }
}

function applyTheme(): void {
  document.documentElement.dataset["theme"] = state.theme;
  themeButton.textContent = state.theme === "dark" ? "☀ light" : "☾ dark";
  themeButton.setAttribute("aria-pressed", state.theme === "dark" ? "true" : "false");
}

function settingsChanged(rerender = false): void {
  smoothingValue.textContent = state.settings.smoothing.toFixed(2);
  hooks.writeUrl();
  if (rerender) {
    void renderView();
    return;
  }
  for (const card of state.cards) {
    const tabSettings = {
      ...card.getSettings(),
      smoothing: state.tab === "streams" ? 0 : state.settings.smoothing,
      logScale: state.settings.logScale,
    };
    card.setSettings(tabSettings);
  }
}

function controlsFromState(): void {
  smoothingInput.value = String(state.settings.smoothing);
  smoothingValue.textContent = state.settings.smoothing.toFixed(2);
  logScaleInput.checked = state.settings.logScale;
  logXInput.checked = state.settings.logX;
  perRankInput.checked = state.perRank;
  internalInput.checked = state.showInternal;
  searchBox.value = state.search;
  groupByInput.value = state.groupBy.join(" ");
  bandSelect.value = state.band;
  applyTheme();
}

/** The view controls' changes: each sets the state, writes the URL and redraws what it affects. */
function listenToControls(): void {
  xModeSelect.addEventListener("change", () => {
    const value = xModeSelect.value;
    if (value.startsWith("metric:")) {
      state.settings.xMode = "metric";
      state.settings.xKey = value.slice(7);
    } else if (value === "step" || value === "wall" || value === "relative") state.settings.xMode = value;
    if (state.settings.xMode === "wall" || state.settings.xMode === "relative") state.settings.logX = false;
    logXInput.checked = state.settings.logX;
    state.settings.zoom = null;
    // A metric on the x-axis needs that metric's points: rebuild; the others only redraw.
    settingsChanged(true);
  });
  smoothingInput.addEventListener("input", () => {
    state.settings.smoothing = Number(smoothingInput.value);
    settingsChanged();
  });
  logScaleInput.addEventListener("change", () => {
    state.settings.logScale = logScaleInput.checked;
    settingsChanged();
  });
  logXInput.addEventListener("change", () => {
    state.settings.logX = logXInput.checked;
    state.settings.zoom = null;
    settingsChanged(true);
  });
  perRankInput.addEventListener("change", () => {
    state.perRank = perRankInput.checked;
    settingsChanged(true);
  });
  internalInput.addEventListener("change", () => {
    state.showInternal = internalInput.checked;
    settingsChanged(true);
  });
  themeButton.addEventListener("click", () => {
    state.theme = state.theme === "dark" ? "light" : "dark";
    applyTheme();
    settingsChanged(true);
  });
  resetZoom.addEventListener("click", () => {
    state.settings.zoom = null;
    settingsChanged(true);
  });
  let searchTimer: ReturnType<typeof setTimeout> | undefined;
  searchBox.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      state.search = searchBox.value;
      hooks.writeUrl();
      void renderView();
    }, 200);
  });
  groupByInput.addEventListener("change", () => {
    state.groupBy = groupByInput.value.split(/[\s,]+/).filter((f) => f !== "");
    settingsChanged(true);
  });
  combineInput.addEventListener("change", () => {
    addCombined(parseCombined(combineInput.value));
    combineInput.value = "";
  });
  bandSelect.addEventListener("change", () => {
    const band = BANDS.find((b) => b === bandSelect.value);
    if (band !== undefined) state.band = band;
    settingsChanged(true);
  });
}

async function start(): Promise<void> {
  // The token, when there is one, is now a cookie; keep it out of the address bar and history.
  if (new URLSearchParams(location.search).has("token"))
    history.replaceState(null, "", `${location.pathname}${location.hash}`);
  // A report opens on the view it was written for, unless its address names another.
  const report = await reportData();
  readHash(location.hash === "" && report !== null ? report.hash : location.hash);
  setupExport($("export", HTMLButtonElement), report !== null);
  if (!location.hash.includes("theme=") && matchMedia("(prefers-color-scheme: dark)").matches) state.theme = "dark";
  controlsFromState();
  listenToControls();
  setupRunsList(
    $("sidebar", HTMLElement),
    runsTable,
    runFilter,
    $("runs-count", HTMLElement),
    $("select-all", HTMLButtonElement),
  );
  window.addEventListener("hashchange", () => {
    readHash();
    controlsFromState();
    renderTabs();
    hooks.renderRuns();
    void renderView();
  });
  renderTabs();
  // A page opened on runs (named in its address) asks for what its first view needs at once: the
  // version, the runs list and, for a tab of charts by key, the runs' keys, none waiting on another.
  if (state.tab === "metrics" || state.tab === "streams" || state.tab === "system") prefetchKeys();
  try {
    const [version] = await Promise.all([api.version(), refreshRuns()]);
    $("version", HTMLElement).textContent = `v${version.rankscope}${report !== null ? " · report" : ""}`;
  } catch (error) {
    hooks.showError(error);
  }
  hooks.writeUrl();
  await renderView();
  // A report is frozen: nothing to poll.
  if (report !== null) return;
  setInterval(() => void poll(liveBox), POLL_MS);
  setInterval(() => void refreshPeriodically(), RUNS_REFRESH_MS);
}

void start();
