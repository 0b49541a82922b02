/**
 * The runs list on the left: a colour per run (the same in every chart), experiment, trial,
 * group and tags, status, start and duration. Click or Enter selects a run; the checkbox (or
 * Space) adds it to the overlay; arrow keys move between runs.
 *
 * The list is the server's: filtered there (`run-filter.ts`: text, `tag:`, `group:`, `status:`,
 * parameter comparisons), fetched a page at a time as rows come into view (`run-pages.ts`), and
 * only the rows on screen are in the page (`virtual.ts`), so a root of ten thousand runs lists as
 * fast as one of ten. The periodic refresh asks again only for the pages in view, the selected
 * runs and the earliest runs (which decide the colours), each with the ETag of its last answer:
 * when nothing changed, each costs a 304.
 */
import { api, type RunInfo } from "./api.js";
import { clear, el, formatDuration, formatStart, formatTime } from "./dom.js";
import { visibleName } from "./names.js";
import { filterQuery } from "./run-filter.js";
import { RunPages } from "./run-pages.js";
import { hooks, isLive, knowRuns, runColour, state } from "./state.js";
import { VirtualRows } from "./virtual.js";

/** Height of a row of the runs list (the CSS holds rows to it). */
const RUN_ROW_HEIGHT = 26;
/** Runs *select all* ticks at most. */
const MAX_SELECT_ALL = 300;
const COLUMNS = 6;

function tagChips(run: RunInfo): HTMLElement {
  const box = el("span", { className: "chips" });
  if (run.group !== undefined && run.group !== null && run.group !== "")
    box.appendChild(el("span", { className: "chip group", title: "group" }, visibleName(run.group)));
  for (const tag of run.tags ?? [])
    box.appendChild(el("span", { className: "chip tag", title: "tag" }, visibleName(tag)));
  return box;
}

/** `1 rank lost` under a run's status when it lost ranks (crashed, or silent over NATS); its title names them. */
function lostChip(run: RunInfo): HTMLElement | string {
  const lost = (run.lostRanks ?? []).filter((l) => l.backStep === null);
  if (lost.length === 0) return "";
  const names = lost
    .map(
      (l) =>
        `rank ${l.rank} (${visibleName(l.rankName)})${l.step === null ? "" : ` after step ${l.step}`}: ${visibleName(l.reason)}`,
    )
    .join("\n");
  return el(
    "span",
    { className: "chip lost", title: names, "data-lost": String(lost.length) },
    `${lost.length} rank${lost.length === 1 ? "" : "s"} lost`,
  );
}

/** Select exactly this run, or toggle it in the overlay. */
export function selectRun(id: string, overlay: boolean): void {
  if (overlay)
    state.selected = state.selected.includes(id) ? state.selected.filter((r) => r !== id) : [...state.selected, id];
  else state.selected = [id];
  selectionChanged();
}

function selectionChanged(): void {
  state.settings.zoom = null;
  hooks.renderRuns();
  hooks.writeUrl();
  void hooks.renderView();
}

/** The list's parts, set up once by `setupRunsList`. */
interface RunsList {
  pages: RunPages;
  rows: VirtualRows;
  filter: HTMLInputElement;
  count: HTMLElement;
}

let list: RunsList | null = null;

function runRow(i: number): HTMLTableRowElement {
  const run = list?.pages.row(i);
  if (run === undefined)
    return el("tr", { className: "run loading" }, el("td", { colspan: COLUMNS, className: "muted" }, "…"));
  const selected = state.selected.includes(run.id);
  const shown = visibleName(run.id);
  const box = el("input", { type: "checkbox", "aria-label": `overlay ${shown}`, tabindex: -1 });
  box.checked = selected;
  box.addEventListener("click", (event) => {
    event.stopPropagation();
    selectRun(run.id, true);
  });
  const swatch = el("span", { className: "swatch run-swatch" });
  swatch.style.background = runColour(run.id);
  const end = run.endedAt ?? (isLive(run.id) ? Date.now() : run.updatedAt);
  const lost = lostChip(run);
  const duration = run.startedAt !== null && end !== null ? formatDuration(end - run.startedAt) : "";
  const row = el(
    "tr",
    {
      className: selected ? "run selected" : "run",
      "data-run": run.id,
      tabindex: 0,
      "aria-selected": selected ? "true" : "false",
      title: shown,
    },
    el("td", {}, box, swatch),
    el("td", { className: "name" }, visibleName(run.experiment)),
    el("td", { className: "name" }, visibleName(run.trial), tagChips(run)),
    el(
      "td",
      {
        className: `status status-${run.status.toLowerCase().replace(/[^a-z]/g, "")}${lost === "" ? "" : " has-lost"}`,
      },
      run.status,
      lost,
    ),
    el("td", { title: formatTime(run.startedAt) }, formatStart(run.startedAt)),
    el("td", {}, duration),
  );
  row.addEventListener("click", () => selectRun(run.id, false));
  return row;
}

/** Keys on a run row: Enter selects, Space overlays, arrows move (scrolling the list as needed). */
function onKey(event: KeyboardEvent): void {
  const row = event.target instanceof HTMLElement ? event.target.closest("tr.run") : null;
  const id = row?.getAttribute("data-run");
  if (!(row instanceof HTMLElement) || id === null || id === undefined || list === null) return;
  if (event.key === "Enter") selectRun(id, false);
  else if (event.key === " ") {
    event.preventDefault();
    selectRun(id, true);
  } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    event.preventDefault();
    const next = Number(row.dataset["index"]) + (event.key === "ArrowDown" ? 1 : -1);
    if (next < 0 || next >= (list.pages.total ?? 0)) return;
    list.rows.reveal(next)?.focus({ preventScroll: true });
  }
}

function renderCount(): void {
  if (list === null) return;
  const { pages, count, filter } = list;
  const total = pages.total ?? 0;
  const reading = pages.indexing;
  const matched =
    filter.value.trim() === ""
      ? `${total.toLocaleString("en-US")} runs`
      : `${total.toLocaleString("en-US")} runs match`;
  count.textContent =
    reading !== undefined
      ? `${matched} · reading runs: ${reading.runsRead.toLocaleString("en-US")} of ${reading.runsFound.toLocaleString("en-US")}…`
      : matched;
  count.dataset["total"] = String(total);
}

/** Render the rows in view again (the selection or the colours changed). */
export function renderRunsList(): void {
  if (list === null) return;
  const total = list.pages.total ?? 0;
  if (total === 0 && list.pages.total !== null) {
    clear(list.rows.body());
    const empty = list.filter.value.trim() === "" ? "No runs under this root yet." : "No run matches the filter.";
    list.rows.body().appendChild(el("tr", {}, el("td", { colspan: COLUMNS, className: "muted" }, empty)));
  } else list.rows.setCount(total);
  renderCount();
}

/** Wire the runs list: its table, the element that scrolls it, its filter box, its count and *select all*. */
export function setupRunsList(
  scroller: HTMLElement,
  table: HTMLTableElement,
  filter: HTMLInputElement,
  count: HTMLElement,
  selectAll: HTMLButtonElement,
): void {
  const body = table.tBodies[0] ?? table.createTBody();
  const pages = new RunPages(filterQuery(filter.value), (rows) => {
    knowRuns(rows);
    renderRunsList();
  });
  const rows = new VirtualRows({
    scroller,
    body,
    rowHeight: RUN_ROW_HEIGHT,
    columns: () => COLUMNS,
    row: runRow,
    range: (from, to) => {
      pages.ensure(from, to).catch((error: unknown) => hooks.showError(error));
    },
  });
  list = { pages, rows, filter, count };
  body.addEventListener("keydown", onKey);
  let timer: ReturnType<typeof setTimeout> | undefined;
  filter.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      pages.setQuery(filterQuery(filter.value));
      scroller.scrollTop = 0;
      pages.refresh(0, 0).catch((error: unknown) => hooks.showError(error));
    }, 200);
  });
  selectAll.title = `select every run the list shows (at most ${MAX_SELECT_ALL})`;
  selectAll.addEventListener("click", () => {
    void (async () => {
      const page = await api.runs({ ...filterQuery(filter.value), limit: MAX_SELECT_ALL });
      knowRuns(page.runs);
      state.selected = page.runs.map((r) => r.id);
      selectionChanged();
    })().catch((error: unknown) => hooks.showError(error));
  });
}

/**
 * Refresh what the app shows of the runs: the list's pages in view, the selected runs (kept to
 * those that exist; the newest run selected when none is), the earliest runs (colours).
 */
export async function refreshRuns(): Promise<void> {
  if (list === null) return;
  const { pages, rows } = list;
  const wasLive = state.selected.filter((id) => isLive(id));
  const [from, to] = rows.rendered();
  const [, selected, earliest] = await Promise.all([
    pages.refresh(from, Math.max(to, from + 1)),
    state.selected.length === 0 ? null : api.runs({ runs: state.selected, limit: 1000 }),
    api.runs({ sort: "-started", limit: 20 }),
  ]);
  if (earliest.runs !== state.earliestRuns) {
    knowRuns(earliest.runs);
    state.earliestRuns = earliest.runs;
  }
  if (selected !== null) {
    knowRuns(selected.runs);
    // While a large root is first read, a selected run may just not be read yet: keep it.
    if (selected.indexing === undefined)
      state.selected = state.selected.filter((id) => selected.runs.some((r) => r.id === id));
  }
  // A run that just ended may have written its last points after our last poll: poll it once more.
  for (const id of wasLive) if (!isLive(id)) state.finalPoll.add(id);
  const newest = pages.row(0);
  if (state.selected.length === 0 && newest !== undefined) state.selected = [newest.id];
  hooks.renderRuns();
}
