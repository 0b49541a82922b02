/**
 * The runs table: every run with its colour, group, tags, status, hyperparameters and the last
 * value of its metrics (summary), sortable by any column and filterable (`tag:x`, `group:x`,
 * `lr<0.01`, `loss<0.5`, `model.name=gpt`, or text over names, groups and tags) — both done by the
 * server (`/api/runs`), rows fetched a page at a time as they come into view and only the rows on
 * screen in the page, so it holds ten thousand runs. Ticking runs selects them for the charts.
 * Below it, parallel coordinates of the hyperparameters against a chosen summary metric across the
 * runs loaded (at most `MAX_COORDS_RUNS`; `parallel-coords.ts`). The *Columns* picker is
 * `column-chooser.ts`.
 */
import { api, type RunInfo, type RunsQuery } from "../api.js";
import { formatValue } from "../chart-axes.js";
import { append, clear, el, formatStart } from "../dom.js";
import { isInternalKey, searchMatcher, visibleName } from "../names.js";
import { filterQuery } from "../run-filter.js";
import { RunPages } from "../run-pages.js";
import { selectRun } from "../runs.js";
import { hooks, knowRuns, runColour, state } from "../state.js";
import { VirtualRows } from "../virtual.js";
import { viewBox } from "./common.js";
import { orderSummaryKeys, summaryColumns } from "../summary-columns.js";
import { columnChooser } from "./column-chooser.js";
import { parallelCoordinates } from "./parallel-coords.js";

type Cell = string | number | boolean | null;

/** Height of a row of the runs table (the CSS holds rows to it). */
const TABLE_ROW_HEIGHT = 26;
/** Runs drawn in the parallel coordinates at most (the loaded ones, in the table's order). */
const MAX_COORDS_RUNS = 500;

/** The server's sort for a column id of the table (`p:lr`, `-s:loss`, `start`, …); undefined for the default. */
export function serverSort(sort: string): string | undefined {
  const desc = sort.startsWith("-");
  const col = desc ? sort.slice(1) : sort;
  const by =
    col === "run"
      ? "name"
      : col === "status"
        ? "status"
        : col === "group"
          ? "group"
          : col.startsWith("p:")
            ? `param:${col.slice(2)}`
            : col.startsWith("s:")
              ? `metric:${col.slice(2)}`
              : col === "start"
                ? "started"
                : undefined;
  if (by === undefined) return undefined;
  // The table's ascending start is oldest first; the server's natural order of times is newest first.
  const reverse = by === "started" ? !desc : desc;
  return `${reverse ? "-" : ""}${by}`;
}

function cellText(v: Cell | undefined): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return formatValue(v);
  return visibleName(String(v));
}

function valueOf(run: RunInfo, c: string): Cell | undefined {
  if (c === "run") return run.id;
  if (c === "status") return run.status;
  if (c === "group") return run.group ?? null;
  if (c === "start") return run.startedAt;
  if (c.startsWith("p:")) return run.params?.[c.slice(2)];
  if (c.startsWith("s:")) return run.summary?.[c.slice(2)];
  return null;
}

/** The view's table: its pages and rows, and the columns they are drawn with. */
let current: { rows: VirtualRows; pages: RunPages } | null = null;

/** Stop following the old table's scrolling (the view is being replaced). */
export function detachRunsTable(): void {
  current?.rows.detach();
  current = null;
}

/** The hyperparameters whose values are not the same in every row loaded (a run without one counts as a value). */
function differingParams(rows: readonly RunInfo[], params: readonly string[]): Set<string> {
  return new Set(params.filter((k) => new Set(rows.map((r) => JSON.stringify(r.params?.[k] ?? null))).size > 1));
}

/** The keys the table knows of: hyperparameters and summary keys of the rows loaded. */
function keysOf(rows: readonly RunInfo[]): { params: string[]; summary: string[] } {
  const params = new Set<string>();
  const summary = new Set<string>();
  for (const run of rows) {
    for (const k of Object.keys(run.params ?? {})) params.add(k);
    for (const k of Object.keys(run.summary ?? {})) summary.add(k);
  }
  return { params: [...params].sort(), summary: [...summary].sort() };
}

export async function renderRunsTable(generation: number): Promise<void> {
  const view = viewBox();
  detachRunsTable();
  // One page of every run first: the hyperparameter and summary names a filter's comparisons refer to.
  const sample = await api.runs({ limit: 100, summary: true, internal: state.showInternal });
  if (generation !== state.generation) return;
  knowRuns(sample.runs);
  const table = new RunsTable(view, sample);
  current = { rows: table.rows, pages: table.pages };
  table.drawHead();
  table.listen();
  await table.pages.refresh(0, 0);
}

/** The runs table's parts in the page, and how each is drawn again as pages arrive and the user sorts, filters or picks. */
class RunsTable {
  /** The hyperparameter and summary names of the rows loaded. */
  private known: { params: string[]; summary: string[] };
  /** The hyperparameters that differ between the rows loaded: their columns are highlighted. */
  private differing = new Set<string>();
  private readonly filterBox = el("input", {
    type: "search",
    id: "table-filter",
    placeholder: "Filter: text, tag:x, group:x, status:x, lr<0.01, loss<0.5, name=value",
    "aria-label": "Filter runs table",
    value: state.filter,
  });
  private readonly metricPicker = el("select", { id: "pc-metric", "aria-label": "metric for parallel coordinates" });
  private readonly tableBox = el("div", { className: "table-wrap runs-table-wrap" });
  private readonly head = el("thead");
  private readonly body = el("tbody");
  private readonly table = el("table", { className: "runs-table" }, this.head, this.body);
  private readonly coords = el("div", { className: "parcoords-box" });
  private readonly count = el("span", { className: "muted", id: "table-count" });
  private readonly chooser: HTMLElement;
  private columns: [string, string][] = [];
  private summaryKeys: string[] = [];
  readonly pages: RunPages;
  readonly rows: VirtualRows;

  constructor(
    view: HTMLElement,
    private readonly sample: Awaited<ReturnType<typeof api.runs>>,
  ) {
    this.known = keysOf(sample.runs);
    this.differing = differingParams(sample.runs, this.known.params);
    this.tableBox.appendChild(this.table);
    this.chooser = columnChooser(
      () => orderSummaryKeys(this.loadedSummaries(), this.candidates()),
      () => this.summaryKeys,
      () => {
        this.drawHead();
        this.rows.render(true);
      },
    );
    append(
      view,
      el("div", { className: "table-tools" }, this.filterBox, this.chooser, this.count),
      this.tableBox,
      el("h3", {}, "Parallel coordinates: hyperparameters → ", el("label", {}, this.metricPicker)),
      this.coords,
    );
    this.pages = new RunPages(this.query(), (arrived) => this.arrived(arrived));
    this.rows = new VirtualRows({
      scroller: this.tableBox,
      body: this.body,
      rowHeight: TABLE_ROW_HEIGHT,
      columns: () => this.columns.length + 1,
      row: (i) => this.rowOf(i),
      range: (from, to) => {
        this.pages.ensure(from, to).catch((error: unknown) => hooks.showError(error));
      },
    });
  }

  /** The server's query for the table's filter and sort now. */
  private query(): RunsQuery {
    const sort = serverSort(state.sort);
    const filter = filterQuery(state.filter, new Set(this.known.summary), new Set(this.known.params));
    return { ...filter, ...(sort !== undefined ? { sort } : {}), summary: true, internal: state.showInternal };
  }

  private loadedSummaries(): Record<string, number>[] {
    return [...this.sample.runs, ...this.pages.loaded()].map((r) => r.summary ?? {});
  }

  private candidates(): string[] {
    return this.known.summary.filter(
      (k) => (state.showInternal || !isInternalKey(k)) && searchMatcher(state.search).test(k),
    );
  }

  /** A page of rows arrived: new names redraw the head; the count, the rows and the coordinates follow. */
  private arrived(arrived: readonly RunInfo[]): void {
    knowRuns(arrived);
    const rows = [...this.sample.runs, ...this.pages.loaded()];
    const more = keysOf(rows);
    const loaded = this.pages.loaded();
    const differing = differingParams(loaded.length > 0 ? loaded : this.sample.runs, more.params);
    const grew =
      more.params.length !== this.known.params.length ||
      more.summary.length !== this.known.summary.length ||
      [...differing].join("\u0000") !== [...this.differing].join("\u0000");
    this.known = more;
    this.differing = differing;
    if (grew) this.drawHead();
    const total = this.pages.total ?? 0;
    this.table.dataset["rows"] = String(total);
    this.count.textContent = `${total.toLocaleString("en-US")} of ${this.sample.total.toLocaleString("en-US")} runs`;
    this.rows.setCount(total);
    this.drawCoords();
  }

  /** The head's sortable columns (fixed, hyperparameters, chosen summaries) and the metric picker's choices. */
  drawHead(): void {
    this.summaryKeys = summaryColumns(this.loadedSummaries(), this.candidates(), state.summaryColumns);
    const params = this.known.params.map((k): [string, string] => [`p:${k}`, k]);
    const summaries = this.summaryKeys.map((k): [string, string] => [`s:${k}`, k]);
    this.columns = [
      ["run", "run"],
      ["status", "status"],
      ["group", "group"],
      ["tags", "tags"],
      ["start", "start"],
      ...params,
      ...summaries,
    ];
    const desc = state.sort.startsWith("-");
    const col = desc ? state.sort.slice(1) : state.sort;
    const tr = el("tr", {}, el("th", {}, ""));
    for (const [id, label] of this.columns) {
      const button = el(
        "button",
        { type: "button", className: "sort", "data-col": id },
        visibleName(label),
        col === id ? (desc ? " ▼" : " ▲") : "",
      );
      button.addEventListener("click", () => {
        // The sort now (not when the head was drawn): a second click on a column reverses it.
        const [nowCol, nowDesc] = state.sort.startsWith("-") ? [state.sort.slice(1), true] : [state.sort, false];
        state.sort = nowCol === id && !nowDesc ? `-${id}` : id;
        hooks.writeUrl();
        this.drawHead();
        this.reload();
      });
      tr.appendChild(
        el(
          "th",
          {
            "aria-sort": col === id ? (desc ? "descending" : "ascending") : "none",
            className: id.startsWith("p:")
              ? `param${this.differing.has(id.slice(2)) ? " differs" : ""}`
              : id.startsWith("s:")
                ? "summary"
                : "",
            ...(id.startsWith("p:") && this.differing.has(id.slice(2)) ? { title: "differs between these runs" } : {}),
          },
          button,
        ),
      );
    }
    clear(this.head);
    this.head.appendChild(tr);
    this.chooser.dispatchEvent(new Event("columns"));
    this.drawMetricPicker();
  }

  /** The summary metrics the coordinates can be drawn against, a loss first when none is chosen. */
  private drawMetricPicker(): void {
    const all = this.known.summary.filter((k) => state.showInternal || !isInternalKey(k));
    clear(this.metricPicker);
    for (const key of all) this.metricPicker.appendChild(el("option", { value: key }, visibleName(key)));
    if (state.metric === "" || !all.includes(state.metric))
      state.metric = all.find((k) => /loss/i.test(k)) ?? all[0] ?? "";
    this.metricPicker.value = state.metric;
  }

  /** Row `i` of the table: a placeholder until its page arrived. */
  private rowOf(i: number): HTMLTableRowElement {
    const run = this.pages.row(i);
    if (run === undefined)
      return el(
        "tr",
        { className: "loading" },
        el("td", { colspan: this.columns.length + 1, className: "muted" }, "…"),
      );
    const box = el("input", { type: "checkbox", "aria-label": `select ${visibleName(run.id)}` });
    box.checked = state.selected.includes(run.id);
    box.addEventListener("change", () => selectRun(run.id, true));
    const swatch = el("span", { className: "swatch run-swatch" });
    swatch.style.background = runColour(run.id);
    const cells = this.columns.map(([id]) => {
      if (id === "tags")
        return el("td", {}, ...(run.tags ?? []).map((t) => el("span", { className: "chip tag" }, visibleName(t))));
      if (id === "start") return el("td", {}, formatStart(run.startedAt));
      return el(
        "td",
        {
          className:
            id.startsWith("s:") || id.startsWith("p:")
              ? `num${id.startsWith("p:") && this.differing.has(id.slice(2)) ? " differs" : ""}`
              : "",
        },
        cellText(valueOf(run, id)),
      );
    });
    return el(
      "tr",
      { "data-run": run.id, className: state.selected.includes(run.id) ? "selected" : "" },
      el("td", {}, box, swatch),
      ...cells,
    );
  }

  private drawCoords(): void {
    const loaded = this.pages.loaded().slice(0, MAX_COORDS_RUNS);
    clear(this.coords);
    this.coords.appendChild(
      parallelCoordinates(loaded, this.known.params, state.metric, Math.max(400, this.tableBox.clientWidth || 800)),
    );
  }

  /** The rows again from the first page, for the filter or sort now. */
  private reload(): void {
    this.pages.setQuery(this.query());
    this.tableBox.scrollTop = 0;
    this.pages.refresh(0, 0).catch((error: unknown) => hooks.showError(error));
  }

  /** The filter box (debounced) and the metric picker. */
  listen(): void {
    let timer: ReturnType<typeof setTimeout> | undefined;
    this.filterBox.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        state.filter = this.filterBox.value;
        hooks.writeUrl();
        this.reload();
      }, 150);
    });
    this.metricPicker.addEventListener("change", () => {
      state.metric = this.metricPicker.value;
      hooks.writeUrl();
      this.drawCoords();
    });
  }
}

/** The shown table's rows again (the selection changed), and its pages asked for again (the periodic refresh). */
export async function refreshRunsTable(): Promise<void> {
  if (current === null) return;
  const [from, to] = current.rows.rendered();
  if (!(await current.pages.refresh(from, Math.max(to, from + 1)))) current.rows.render(true);
}
