/**
 * The Alerts tab and the banner. The tab lists each selected run's alert episodes (firing first,
 * then newest first): rule, level, what it is about, when it started and ended, and the message.
 * The banner, above every tab, names the alerts firing now in the selected runs.
 */
import { alertEpisodes, alertSubject, type AlertEpisode } from "../alerts.js";
import { api, ApiError, type AlertEntry } from "../api.js";
import { clear, el, formatTime } from "../dom.js";
import { visibleName } from "../names.js";
import { hooks, state } from "../state.js";
import { viewBox } from "./common.js";

/** Alerts named in the banner before "and N more". */
const BANNER_MAX = 3;

function when(entry: AlertEntry): string {
  return `${entry.step === null ? "" : `step ${entry.step}, `}${formatTime(entry.at)}`;
}

function episodeRow(episode: AlertEpisode): HTMLTableRowElement {
  const { firing, resolved } = episode;
  const status =
    resolved === null
      ? el("span", { className: `alert-state firing level-${firing.level}` }, "firing")
      : el("span", { className: `alert-state ${resolved.state}` }, resolved.state); // resolved, or ended with the run
  return el(
    "tr",
    {
      className: resolved === null ? `alert-row firing level-${firing.level}` : "alert-row resolved",
      "data-alert-id": episode.id,
    },
    el("td", {}, status),
    el("td", {}, visibleName(firing.rule)),
    el("td", {}, firing.level),
    el("td", {}, visibleName(alertSubject(firing))),
    el("td", {}, when(firing)),
    el("td", {}, resolved === null ? "" : when(resolved)),
    el(
      "td",
      { className: "alert-message" },
      visibleName(firing.message),
      resolved === null ? null : el("div", { className: "muted" }, visibleName(resolved.message)),
    ),
  );
}

export async function renderAlerts(generation: number): Promise<void> {
  const view = viewBox();
  const byRun = await api.alertsOf(state.selected);
  if (generation !== state.generation) return;
  for (const run of state.selected) {
    const entries = byRun.get(run) ?? [];
    const section = el("section", { className: "run-section" }, el("h2", {}, visibleName(run)));
    const episodes = alertEpisodes(alertsIn(entries));
    if (entries instanceof ApiError)
      section.appendChild(el("p", { className: "error" }, `Alerts could not be read: ${visibleName(entries.message)}`));
    else if (episodes.length === 0) section.appendChild(el("p", { className: "muted" }, "No alerts in this run."));
    else {
      const head = el(
        "tr",
        {},
        ...["state", "rule", "level", "about", "started", "resolved", "message"].map((h) => el("th", {}, h)),
      );
      section.appendChild(
        el("table", { className: "alerts" }, el("thead", {}, head), el("tbody", {}, ...episodes.map(episodeRow))),
      );
    }
    view.appendChild(section);
  }
}

/** A run's alert events, none when they could not be read (the Alerts tab says why). */
function alertsIn(entries: AlertEntry[] | ApiError | undefined): AlertEntry[] {
  return entries === undefined || entries instanceof ApiError ? [] : entries;
}

/** Show the alerts firing now in the selected runs above the view (hidden when none). */
export async function renderAlertBanner(banner: HTMLElement): Promise<void> {
  const firing: { run: string; episode: AlertEpisode }[] = [];
  const byRun = await api.alertsOf(state.selected);
  for (const run of state.selected) {
    for (const episode of alertEpisodes(alertsIn(byRun.get(run))))
      if (episode.resolved === null) firing.push({ run, episode });
  }
  clear(banner);
  banner.classList.toggle("hidden", firing.length === 0);
  if (firing.length === 0) return;
  const worst = firing.some((f) => f.episode.firing.level === "error")
    ? "error"
    : firing.some((f) => f.episode.firing.level === "warning")
      ? "warning"
      : "info";
  banner.className = `alert-banner level-${worst}`;
  const several = state.selected.length > 1;
  // A rule's message names its key or rank; a user's alert is named by the rank that raised it.
  const items = firing.slice(0, BANNER_MAX).map(({ run, episode: { id, firing: f } }) => {
    const from = f.rule === "user" && f.rankName !== undefined ? ` from ${visibleName(f.rankName)}` : "";
    return el(
      "li",
      { "data-alert-id": id },
      el("strong", {}, visibleName(f.rule)),
      from,
      several ? ` (${visibleName(run)})` : "",
      `: ${visibleName(f.message)}`,
    );
  });
  const more =
    firing.length > BANNER_MAX ? el("li", { className: "muted" }, `and ${firing.length - BANNER_MAX} more`) : null;
  const open = el("button", { type: "button", className: "alert-open" }, "Alerts tab");
  open.addEventListener("click", () => hooks.switchTab("alerts"));
  banner.appendChild(
    el(
      "div",
      { className: "alert-banner-head" },
      el("span", {}, `${firing.length} alert${firing.length === 1 ? "" : "s"} firing`),
      open,
    ),
  );
  banner.appendChild(el("ul", {}, ...items, more));
}
