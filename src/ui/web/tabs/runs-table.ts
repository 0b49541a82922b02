/**
 * The runs table: every run with its colour, group, tags, status, hyperparameters and the last
 * value of its metrics (summary), sortable by any column and filterable (`tag:x`, `group:x`,
 * `lr<0.01`, `model.name=gpt`, or text/regex over names, groups and tags). Ticking runs selects
 * them for the charts. Below it, parallel coordinates of the hyperparameters against a chosen
 * summary metric across the shown runs.
 */
import { api, type ParamValue, type RunInfo } from "../api.js";
import { formatValue } from "../chart-axes.js";
import { append, clear, el, formatStart } from "../dom.js";
import { isInternalKey, searchMatcher, visibleName } from "../names.js";
import { runText, selectRun } from "../runs.js";
import { hooks, runColour, state } from "../state.js";
import { flatten } from "./config.js";
import { FETCH_CONCURRENCY, pool } from "../fetching.js";
import { viewBox } from "./common.js";
import { orderSummaryKeys, saveChosenColumns, summaryColumns } from "../summary-columns.js";

type Cell = string | number | boolean | null;

/** Hyperparameters of a run: from `/api/runs`, or (older servers) its config. */
const paramsCache = new Map<string, Record<string, ParamValue>>();

async function paramsOf(run: RunInfo): Promise<Record<string, ParamValue>> {
  if (run.params !== undefined) return run.params;
  const cached = paramsCache.get(run.id);
  if (cached !== undefined) return cached;
  const rows: [string, string][] = [];
  flatten((await api.config(run.id)).params, "", rows);
  const out: Record<string, ParamValue> = {};
  for (const [k, v] of rows) out[k] = v !== "" && Number.isFinite(Number(v)) ? Number(v) : v;
  paramsCache.set(run.id, out);
  return out;
}

/** Does a run pass one filter term? */
export function termMatches(term: string, run: RunInfo, params: Record<string, Cell>, summary: Record<string, number>): boolean {
  const lower = term.toLowerCase();
  if (lower.startsWith("tag:")) return (run.tags ?? []).some((t) => t.toLowerCase() === lower.slice(4));
  if (lower.startsWith("group:")) return (run.group ?? "").toLowerCase() === lower.slice(6);
  const cmp = /^([^<>=!]+)(<=|>=|!=|=|<|>)(.*)$/.exec(term);
  if (cmp !== null) {
    const [, name = "", op = "=", raw = ""] = cmp;
    const value: Cell | undefined = name in params ? params[name] : name in summary ? (summary[name] ?? null) : undefined;
    if (value === undefined) return false;
    const n = Number(raw);
    if (typeof value === "number" && raw !== "" && Number.isFinite(n)) {
      return op === "<" ? value < n : op === ">" ? value > n : op === "<=" ? value <= n : op === ">=" ? value >= n : op === "!=" ? value !== n : value === n;
    }
    const text = String(value);
    return op === "!=" ? text !== raw : op === "=" ? text === raw : false;
  }
  return searchMatcher(term).test(runText(run));
}

function compare(a: Cell | undefined, b: Cell | undefined): number {
  if (a === b) return 0;
  if (a === null || a === undefined || (typeof a === "number" && Number.isNaN(a))) return 1;
  if (b === null || b === undefined || (typeof b === "number" && Number.isNaN(b))) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

function cellText(v: Cell | undefined): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return formatValue(v);
  return visibleName(String(v));
}

export async function renderRunsTable(generation: number): Promise<void> {
  const view = viewBox();
  const runs = state.runs;
  const params = new Map<string, Record<string, ParamValue>>();
  await pool(runs, FETCH_CONCURRENCY, async (run) => {
    params.set(run.id, await paramsOf(run));
    // A server that lists no params with its runs predates /api/summary: don't ask it.
    if (run.params !== undefined) state.summaries.set(run.id, await api.summary(run.id, { internal: state.showInternal }));
  });
  if (generation !== state.generation) return;
  const paramKeys = [...new Set([...params.values()].flatMap((p) => Object.keys(p)))].sort();
  const columnMatcher = searchMatcher(state.search);
  const summaries = runs.map((run) => state.summaries.get(run.id) ?? {});
  const candidates = [...new Set(summaries.flatMap((s) => Object.keys(s)))].filter((k) => (state.showInternal || !isInternalKey(k)) && columnMatcher.test(k));
  const summaryKeys = (): string[] => summaryColumns(summaries, candidates, state.summaryColumns);

  const filterBox = el("input", { type: "search", id: "table-filter", placeholder: "Filter: text or regex, tag:x, group:x, lr<0.01, name=value", "aria-label": "Filter runs table", value: state.filter });
  const metricPicker = el("select", { id: "pc-metric", "aria-label": "metric for parallel coordinates" });
  const allSummary = [...new Set([...state.summaries.values()].flatMap((s) => Object.keys(s)))].filter((k) => state.showInternal || !isInternalKey(k)).sort();
  for (const key of allSummary) metricPicker.appendChild(el("option", { value: key }, visibleName(key)));
  if (state.metric === "" || !allSummary.includes(state.metric)) state.metric = allSummary.find((k) => /loss/i.test(k)) ?? allSummary[0] ?? "";
  metricPicker.value = state.metric;
  const tableBox = el("div", { className: "table-wrap runs-table-wrap" });
  const coords = el("div", { className: "parcoords-box" });
  const chooser = columnChooser(orderSummaryKeys(summaries, candidates), summaryKeys, () => draw());
  append(
    view,
    el("div", { className: "table-tools" }, filterBox, chooser, el("span", { className: "muted", id: "table-count" })),
    tableBox,
    el("h3", {}, "Parallel coordinates: hyperparameters → ", el("label", {}, metricPicker)),
    coords,
  );
  if (candidates.length === 0 && allSummary.length === 0) tableBox.before(el("p", { className: "muted" }, "No summary values: this server does not serve /api/summary, or the runs logged no metrics."));

  const draw = (): void => {
    const terms = state.filter.split(/\s+/).filter((t) => t !== "");
    const shown = runs.filter((run) => terms.every((t) => termMatches(t, run, params.get(run.id) ?? {}, state.summaries.get(run.id) ?? {})));
    const desc = state.sort.startsWith("-");
    const col = desc ? state.sort.slice(1) : state.sort;
    const valueOf = (run: RunInfo, c: string): Cell | undefined => {
      if (c === "run") return run.id;
      if (c === "status") return run.status;
      if (c === "group") return run.group ?? null;
      if (c === "start") return run.startedAt;
      if (c.startsWith("p:")) return params.get(run.id)?.[c.slice(2)];
      if (c.startsWith("s:")) return state.summaries.get(run.id)?.[c.slice(2)];
      return null;
    };
    if (col !== "") shown.sort((a, b) => (desc ? -1 : 1) * compare(valueOf(a, col), valueOf(b, col)));
    const columns: [string, string][] = [
      ["run", "run"],
      ["status", "status"],
      ["group", "group"],
      ["tags", "tags"],
      ["start", "start"],
      ...paramKeys.map((k): [string, string] => [`p:${k}`, k]),
      ...summaryKeys().map((k): [string, string] => [`s:${k}`, k]),
    ];
    const head = el("tr", {}, el("th", {}, ""));
    for (const [id, label] of columns) {
      const sorted = col === id ? (desc ? "descending" : "ascending") : "none";
      const button = el("button", { type: "button", className: "sort", "data-col": id }, visibleName(label), col === id ? (desc ? " ▼" : " ▲") : "");
      button.addEventListener("click", () => {
        state.sort = col === id && !desc ? `-${id}` : id;
        hooks.writeUrl();
        draw();
      });
      head.appendChild(el("th", { "aria-sort": sorted, className: id.startsWith("p:") ? "param" : id.startsWith("s:") ? "summary" : "" }, button));
    }
    const body = el("tbody");
    for (const run of shown) {
      const box = el("input", { type: "checkbox", "aria-label": `select ${visibleName(run.id)}` });
      box.checked = state.selected.includes(run.id);
      box.addEventListener("change", () => {
        selectRun(run.id, true);
      });
      const swatch = el("span", { className: "swatch run-swatch" });
      swatch.style.background = runColour(run.id);
      const cells = columns.map(([id]) => {
        if (id === "tags") return el("td", {}, ...(run.tags ?? []).map((t) => el("span", { className: "chip tag" }, visibleName(t))));
        if (id === "start") return el("td", {}, formatStart(run.startedAt));
        return el("td", { className: id.startsWith("s:") || id.startsWith("p:") ? "num" : "" }, cellText(valueOf(run, id)));
      });
      body.appendChild(el("tr", { "data-run": run.id, className: state.selected.includes(run.id) ? "selected" : "" }, el("td", {}, box, swatch), ...cells));
    }
    clear(tableBox);
    tableBox.appendChild(el("table", { className: "runs-table", "data-rows": shown.length }, el("thead", {}, head), body));
    const count = document.getElementById("table-count");
    if (count !== null) count.textContent = `${shown.length} of ${runs.length} runs`;
    chooser.dispatchEvent(new Event("columns"));
    clear(coords);
    coords.appendChild(parallelCoordinates(shown, paramKeys, params, state.metric, Math.max(400, tableBox.clientWidth || 800)));
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  filterBox.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.filter = filterBox.value;
      hooks.writeUrl();
      draw();
    }, 150);
  });
  metricPicker.addEventListener("change", () => {
    state.metric = metricPicker.value;
    hooks.writeUrl();
    draw();
  });
  draw();
}

/**
 * The *Columns* picker: a box per summary key (in the rule's order), ticked for the columns shown.
 * Ticking or unticking makes the shown set the user's choice (remembered, see summary-columns.ts);
 * *default* goes back to the rule. The picker redraws its boxes on a `columns` event.
 */
function columnChooser(keys: readonly string[], shown: () => string[], redraw: () => void): HTMLElement {
  const title = el("summary", {});
  const list = el("div", { className: "column-list" });
  const reset = el("button", { type: "button", className: "reset-columns" }, "default");
  const chooser = el("details", { id: "summary-columns", className: "column-chooser" }, title, el("div", { className: "column-panel" }, list, reset));
  const choose = (columns: string[] | null): void => {
    state.summaryColumns = columns;
    saveChosenColumns(columns);
    hooks.writeUrl();
    redraw();
  };
  reset.addEventListener("click", () => choose(null));
  chooser.addEventListener("columns", () => {
    const current = new Set(shown());
    title.textContent = `Columns (${current.size} of ${keys.length}${state.summaryColumns === null ? ", default" : ""})`;
    clear(list);
    for (const key of keys) {
      const box = el("input", { type: "checkbox", value: key });
      box.checked = current.has(key);
      box.addEventListener("change", () => choose(box.checked ? [...current, key] : [...current].filter((k) => k !== key)));
      list.appendChild(el("label", {}, box, ` ${visibleName(key)}`));
    }
  });
  return chooser;
}

const SVG = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** One axis of the plot: where a value sits on it (0 bottom … 1 top), and its end labels. */
interface Axis {
  name: string;
  pos: (v: Cell | undefined) => number | null;
  low: string;
  high: string;
}

function axisFor(name: string, values: (Cell | undefined)[]): Axis | null {
  const present = values.filter((v): v is string | number | boolean => v !== null && v !== undefined && !(typeof v === "number" && !Number.isFinite(v)));
  if (present.length === 0) return null;
  const nums = present.filter((v) => typeof v === "number");
  if (nums.length === present.length) {
    const lo = Math.min(...nums);
    const hi = Math.max(...nums);
    return { name, pos: (v) => (typeof v === "number" && Number.isFinite(v) ? (hi > lo ? (v - lo) / (hi - lo) : 0.5) : null), low: formatValue(lo), high: formatValue(hi) };
  }
  const levels = [...new Set(present.map(String))].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  if (levels.length > 24) return null;
  return {
    name,
    pos: (v) => (v === null || v === undefined ? null : levels.length > 1 ? levels.indexOf(String(v)) / (levels.length - 1) : 0.5),
    low: visibleName(levels[0] ?? ""),
    high: visibleName(levels[levels.length - 1] ?? ""),
  };
}

/** Parallel coordinates: an axis per hyperparameter that varies, then the metric; a line per run in its colour. */
export function parallelCoordinates(runs: RunInfo[], paramKeys: string[], params: Map<string, Record<string, ParamValue>>, metric: string, width: number): Element {
  const axes: Axis[] = [];
  for (const key of paramKeys) {
    const values = runs.map((r) => params.get(r.id)?.[key]);
    if (new Set(values.map((v) => String(v))).size < 2 && runs.length > 1) continue;
    const axis = axisFor(key, values);
    if (axis !== null) axes.push(axis);
  }
  const metricAxis = metric === "" ? null : axisFor(metric, runs.map((r) => state.summaries.get(r.id)?.[metric]));
  if (metricAxis !== null) axes.push(metricAxis);
  if (axes.length < 2 || runs.length === 0) return el("p", { className: "muted", id: "parcoords-empty" }, "Parallel coordinates need runs with at least one hyperparameter that varies and a summary metric.");
  const height = 260;
  const top = 34;
  const bottom = 26;
  const left = 50;
  const right = 60;
  const plotH = height - top - bottom;
  const gap = (width - left - right) / (axes.length - 1);
  const root = svg("svg", { class: "parcoords", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `parallel coordinates of ${axes.length - 1} hyperparameters and ${visibleName(metric)}`, "data-axes": axes.length, "data-runs": runs.length });
  axes.forEach((axis, i) => {
    const x = left + i * gap;
    root.appendChild(svg("line", { x1: x, x2: x, y1: top, y2: top + plotH, class: "pc-axis" }));
    root.appendChild(svg("text", { x, y: top - 18, "text-anchor": "middle", class: i === axes.length - 1 && metricAxis !== null ? "pc-label pc-metric" : "pc-label" }, visibleName(axis.name)));
    root.appendChild(svg("text", { x, y: top - 5, "text-anchor": "middle", class: "pc-tick" }, axis.high));
    root.appendChild(svg("text", { x, y: top + plotH + 14, "text-anchor": "middle", class: "pc-tick" }, axis.low));
  });
  for (const run of runs) {
    const points: string[] = [];
    axes.forEach((axis, i) => {
      const value = i === axes.length - 1 && metricAxis !== null ? state.summaries.get(run.id)?.[metric] : params.get(run.id)?.[axis.name];
      const p = axis.pos(value);
      if (p !== null) points.push(`${(left + i * gap).toFixed(1)},${(top + plotH - p * plotH).toFixed(1)}`);
    });
    if (points.length < 2) continue;
    const path = svg("polyline", { points: points.join(" "), fill: "none", stroke: runColour(run.id), "stroke-width": state.selected.includes(run.id) ? 2.5 : 1.2, "data-run": run.id, class: "pc-line" });
    path.appendChild(svg("title", {}, visibleName(run.id)));
    root.appendChild(path);
  }
  return root;
}
