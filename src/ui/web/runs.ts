/**
 * The runs list on the left: a colour per run (the same in every chart), experiment, trial,
 * group and tags, status, start and duration. Click or Enter selects a run; the checkbox (or
 * Space) adds it to the overlay. The filter matches names, groups and tags (regex or plain text).
 */
import { api, type RunInfo } from "./api.js";
import { clear, el, formatDuration, formatStart, formatTime } from "./dom.js";
import { searchMatcher, visibleName } from "./names.js";
import { hooks, isLive, runColour, state } from "./state.js";

/** A run's text for filters: id, group, tags. */
export function runText(run: RunInfo): string {
  return [run.id, run.status, run.group ?? "", ...(run.tags ?? [])].join(" ");
}

function tagChips(run: RunInfo): HTMLElement {
  const box = el("span", { className: "chips" });
  if (run.group !== undefined && run.group !== null && run.group !== "") box.appendChild(el("span", { className: "chip group", title: "group" }, visibleName(run.group)));
  for (const tag of run.tags ?? []) box.appendChild(el("span", { className: "chip tag", title: "tag" }, visibleName(tag)));
  return box;
}

/** `1 rank lost` under a run's status when it lost ranks (crashed, or silent over NATS); its title names them. */
function lostChip(run: RunInfo): HTMLElement | string {
  const lost = (run.lostRanks ?? []).filter((l) => l.backStep === null);
  if (lost.length === 0) return "";
  const names = lost.map((l) => `rank ${l.rank} (${visibleName(l.rankName)})${l.step === null ? "" : ` after step ${l.step}`}: ${visibleName(l.reason)}`).join("\n");
  return el("span", { className: "chip lost", title: names, "data-lost": String(lost.length) }, `${lost.length} rank${lost.length === 1 ? "" : "s"} lost`);
}

/** Select exactly this run, or toggle it in the overlay. */
export function selectRun(id: string, overlay: boolean): void {
  if (overlay) state.selected = state.selected.includes(id) ? state.selected.filter((r) => r !== id) : [...state.selected, id];
  else state.selected = [id];
  selectionChanged();
}

export function selectionChanged(): void {
  state.settings.zoom = null;
  hooks.renderRuns();
  hooks.writeUrl();
  void hooks.renderView();
}

export function renderRunsList(body: HTMLTableSectionElement, filterText: string): void {
  // Keep the keyboard focus on the same run across the re-render.
  const focused = document.activeElement instanceof HTMLElement && body.contains(document.activeElement) ? document.activeElement.closest("tr")?.getAttribute("data-run") : null;
  clear(body);
  const matcher = searchMatcher(filterText);
  const now = Date.now();
  for (const run of state.runs) {
    if (!matcher.test(runText(run))) continue;
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
    const end = run.endedAt ?? (isLive(run.id) ? now : run.updatedAt);
    const duration = run.startedAt !== null && end !== null ? formatDuration(end - run.startedAt) : "";
    const row = el(
      "tr",
      { className: selected ? "run selected" : "run", "data-run": run.id, tabindex: 0, "aria-selected": selected ? "true" : "false", title: shown },
      el("td", {}, box, swatch),
      el("td", { className: "name" }, visibleName(run.experiment)),
      el("td", { className: "name" }, visibleName(run.trial), tagChips(run)),
      el("td", { className: `status status-${run.status.toLowerCase().replace(/[^a-z]/g, "")}` }, run.status, lostChip(run)),
      el("td", { title: formatTime(run.startedAt) }, formatStart(run.startedAt)),
      el("td", {}, duration),
    );
    row.addEventListener("click", () => selectRun(run.id, false));
    row.addEventListener("keydown", (event) => {
      if (event.key === "Enter") selectRun(run.id, false);
      else if (event.key === " ") {
        event.preventDefault();
        selectRun(run.id, true);
      } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        const next = event.key === "ArrowDown" ? row.nextElementSibling : row.previousElementSibling;
        if (next instanceof HTMLElement) next.focus();
      }
    });
    body.appendChild(row);
    if (focused === run.id) row.focus();
  }
  if (state.runs.length === 0) body.appendChild(el("tr", {}, el("td", { colspan: 6, className: "muted" }, "No runs under this root yet.")));
}

/** Fetch the runs; keep the selection to runs that exist; select the newest when none is. */
export async function refreshRuns(): Promise<void> {
  const wasLive = new Set(state.runs.filter((r) => isLive(r.id)).map((r) => r.id));
  state.runs = await api.runs();
  // A run that just ended may have written its last points after our last poll: poll it once more.
  for (const id of wasLive) if (!isLive(id)) state.finalPoll.add(id);
  state.selected = state.selected.filter((id) => state.runs.some((r) => r.id === id));
  if (state.selected.length === 0 && state.runs.length > 0) {
    const latest = [...state.runs].sort((a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0))[0];
    if (latest !== undefined) state.selected = [latest.id];
  }
  hooks.renderRuns();
}
