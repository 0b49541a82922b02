/**
 * The view in the URL's fragment, so a link opens the same view: runs, tab, search, smoothing, log
 * scales, x-axis, zoom, pinned charts, combined charts, collapsed sections, internal keys, theme, and the runs
 * table's sort, filter, metric and summary columns, the metrics' grouping (fields and band), the Logs tab's file, filters and follow mode, and the Inference tab's picked flush. Run names are encoded by URLSearchParams (any UTF-8 survives).
 */
import { TABS, state } from "./state.js";
import { loadChosenColumns } from "./summary-columns.js";

/** Read the fragment into the state (what it does not say keeps its default). */
export function readHash(hash = location.hash): void {
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  const tab = params.get("tab");
  const known = TABS.find(([t]) => t === tab);
  if (known !== undefined) state.tab = known[0];
  const runs = params.getAll("run");
  if (runs.length > 0) state.selected = runs;
  const x = params.get("x");
  if (x === "step" || x === "wall" || x === "relative") state.settings.xMode = x;
  else if (x !== null && x.startsWith("metric:") && x.length > 7) {
    state.settings.xMode = "metric";
    state.settings.xKey = x.slice(7);
  }
  const smoothing = Number(params.get("smooth"));
  if (params.has("smooth") && Number.isFinite(smoothing) && smoothing >= 0 && smoothing < 1)
    state.settings.smoothing = smoothing;
  state.settings.logScale = params.get("logy") === "1";
  state.settings.logX = params.get("logx") === "1";
  const [z0, z1, ...extra] = (params.get("zoom") ?? "").split(",").map(Number);
  state.settings.zoom =
    z0 !== undefined && z1 !== undefined && extra.length === 0 && Number.isFinite(z0) && Number.isFinite(z1) && z0 < z1
      ? [z0, z1]
      : null;
  state.search = params.get("q") ?? "";
  state.perRank = params.get("ranks") !== "0";
  state.showInternal = params.get("internal") === "1";
  state.pinned = params.getAll("pin");
  state.combined = params.getAll("combine").flatMap(parseCombined);
  state.collapsed = params.getAll("fold");
  const theme = params.get("theme");
  if (theme === "dark" || theme === "light") state.theme = theme;
  state.sort = params.get("sort") ?? "";
  state.filter = params.get("filter") ?? "";
  state.metric = params.get("metric") ?? "";
  // The runs table's columns: the address's, else the browser's remembered choice.
  const columns = params.getAll("col");
  state.summaryColumns = columns.length > 0 ? columns : loadChosenColumns();
  state.groupBy = params.getAll("groupby").filter((g) => g !== "");
  const band = params.get("band");
  state.band = band === "minmax" || band === "none" ? band : "std";
  state.logs = {
    file: params.get("logfile") ?? "",
    level: params.get("level") ?? "",
    component: params.get("component") ?? "",
    follow: params.get("follow") === "1",
  };
  const step = params.get("step") ?? "";
  state.inferenceStep = /^\d+$/.test(step) && Number.isSafeInteger(Number(step)) ? Number(step) : null;
}

/** A `combine` parameter's charts: `;` between charts, `,` between a chart's keys (blanks trimmed, empty ones dropped). */
export function parseCombined(text: string): string[][] {
  return text
    .split(";")
    .map((chart) => [...new Set(chart.split(",").map((k) => k.trim()))].filter((k) => k !== ""))
    .filter((keys) => keys.length > 0);
}

/** The fragment for the current state. */
function hashOf(): string {
  const params = new URLSearchParams();
  params.set("tab", state.tab);
  for (const run of state.selected) params.append("run", run);
  const s = state.settings;
  params.set("x", s.xMode === "metric" ? `metric:${s.xKey}` : s.xMode);
  params.set("smooth", String(s.smoothing));
  if (s.logScale) params.set("logy", "1");
  if (s.logX) params.set("logx", "1");
  if (s.zoom !== null) params.set("zoom", `${s.zoom[0]},${s.zoom[1]}`);
  if (state.search !== "") params.set("q", state.search);
  if (!state.perRank) params.set("ranks", "0");
  if (state.showInternal) params.set("internal", "1");
  for (const key of state.pinned) params.append("pin", key);
  for (const keys of state.combined) params.append("combine", keys.join(","));
  for (const section of state.collapsed) params.append("fold", section);
  if (state.theme === "dark") params.set("theme", "dark");
  if (state.sort !== "") params.set("sort", state.sort);
  if (state.filter !== "") params.set("filter", state.filter);
  if (state.metric !== "") params.set("metric", state.metric);
  for (const column of state.summaryColumns ?? []) params.append("col", column);
  for (const field of state.groupBy) params.append("groupby", field);
  if (state.band !== "std") params.set("band", state.band);
  if (state.logs.file !== "") params.set("logfile", state.logs.file);
  if (state.logs.level !== "") params.set("level", state.logs.level);
  if (state.logs.component !== "") params.set("component", state.logs.component);
  if (state.logs.follow) params.set("follow", "1");
  if (state.inferenceStep !== null) params.set("step", String(state.inferenceStep));
  return params.toString();
}

export function writeHash(): void {
  history.replaceState(null, "", `${location.pathname}#${hashOf()}`);
}
