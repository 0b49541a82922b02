/** What the chart tabs share: labels, new lines, the view container, empty notes, keys. */
import { api, ApiError, type LostRank, type RunKeys } from "../api.js";
import type { Line, ViewSettings } from "../chart-data.js";
import { el } from "../dom.js";
import { lineDisplayLabel } from "../../../core/rank-identity.js";
import { visibleName } from "../names.js";
import { rankColour } from "../colours.js";
import { runById, runColour, state, type Tab } from "../state.js";

export function viewBox(): HTMLElement {
  const node = document.getElementById("view");
  if (node === null) throw new Error("the page has no #view");
  return node;
}

export function emptyNote(text: string): void {
  viewBox().appendChild(el("p", { className: "muted empty" }, text));
}

/** A legend label: the run's name when several are overlaid, and what else tells lines apart. */
export function runLabel(run: string, extra?: string): string {
  const base = state.selected.length > 1 ? visibleName(run) : "";
  return [base, extra].filter((s) => s !== undefined && s !== "").join(" · ") || "value";
}

/** The loss of `rank` in `run`, when the run lost it (the latest, if it was lost more than once). */
function lostRankOf(run: string, rank: number): LostRank | undefined {
  return runById(run)
    ?.lostRanks?.filter((l) => l.rank === rank)
    .at(-1);
}

/** How a lost rank's lines and notes say it: `lost after step 12`, `lost after step 12, back at step 20`. */
function lostText(lost: LostRank): string {
  return `lost${lost.step === null ? "" : ` after step ${lost.step}`}${lost.backStep === null ? "" : `, back at step ${lost.backStep}`}`;
}

/**
 * A line's label (docs/DESIGN.md, "Identity"): `rank 1`, `rank 1 (Trainer_0_r1)` when the rank's
 * process registered a name, `controller (Controller)`, `rank 1 · thread 7` for a worker's raw
 * values; with `run`, ` · lost after step 12` for a rank the run lost (a crash: the line ends there).
 */
export function rankLabel(keys: RunKeys | undefined, rank: number, run?: string): string {
  const name = keys?.rankNames[String(rank)];
  const label = lineDisplayLabel(rank, name === undefined ? undefined : visibleName(name));
  const lost = run === undefined ? undefined : lostRankOf(run, rank);
  return lost === undefined ? label : `${label} · ${lostText(lost)}`;
}

/**
 * A note over the view for each selected run that lost ranks: which, after which step, and why
 * (`lost rank 1 (Lossy_ab12_r1) after step 3: exited (killed by SIGKILL)`). Null when none did.
 */
export function lostRanksNote(): HTMLElement | null {
  const notes = state.selected.flatMap((run) => (runById(run)?.lostRanks ?? []).map((lost) => ({ run, lost })));
  if (notes.length === 0) return null;
  const box = el("div", { className: "lost-note", role: "note" });
  for (const { run, lost } of notes) {
    const who = `rank ${lost.rank} (${visibleName(lost.rankName)})`;
    box.appendChild(
      el(
        "p",
        { "data-run": run, "data-rank": String(lost.rank) },
        `⚠ ${state.selected.length > 1 ? `${visibleName(run)}: ` : ""}${who} ${lostText(lost)}: ${visibleName(lost.reason)}`,
      ),
    );
  }
  return box;
}

/** How a lost rank's line is drawn in a single run's charts. */
const LOST_DASH = [3, 3];

/** Dash patterns telling ranks apart when colours tell runs apart. */
const DASHES = [
  [6, 3],
  [2, 3],
  [10, 3, 2, 3],
  [4, 4],
  [1, 2],
  [12, 4],
];

/**
 * A new, empty line. Overlaying several runs, every line of a run has the run's colour (the same
 * in every chart and the runs list) and per-rank lines are dashed; one run alone has its global
 * line in its colour and each rank's in a rank colour (colours.ts).
 */
export function newLine(id: string, label: string, run: string, rank?: number): Line {
  const line: Line = { id, label, runStart: runById(run)?.startedAt ?? null, steps: [], times: [], values: [] };
  const colour = runColour(run);
  if (state.selected.length > 1) {
    line.colour = colour;
    if (rank !== undefined) line.dash = DASHES[slot(rank, DASHES.length)] ?? [];
  } else if (rank === undefined) {
    line.colour = colour;
  } else {
    // One run: its global line in the run's colour, each rank in a colour no run has; a rank the
    // run lost is dashed (its label says when).
    line.colour = rankColour(rank, colour);
    if (lostRankOf(run, rank) !== undefined) line.dash = LOST_DASH;
  }
  return line;
}

/** A line's place among `n` styles: ranks in order, the controller's (−2) and thread lines' (negative) too. */
function slot(line: number, n: number): number {
  return ((line % n) + n) % n;
}

/** Keys asked for before the runs list answered, and the selection they are of. */
let early: { readonly runs: string; readonly found: Promise<Map<string, RunKeys | ApiError>> } | null = null;

/**
 * Ask for the selected runs' keys now, for the first `loadKeys` of this same selection to take: a
 * page opened on a selection (its address names the runs) asks for their keys while the runs list
 * is still on its way, instead of after it. A prefetch the first view does not take is dropped.
 */
export function prefetchKeys(): void {
  if (state.selected.length === 0) return;
  const found = api.keysOf(state.selected);
  // Its failure is the view's to show, when the view takes it.
  found.catch(() => undefined);
  early = { runs: state.selected.join("\n"), found };
}

/**
 * The keys of every selected run (one request per 100 runs: a selection can hold hundreds). A
 * run whose keys cannot be read fails the view with its error, as asking for it alone does.
 */
export async function loadKeys(): Promise<Map<string, RunKeys>> {
  const prefetched = early?.runs === state.selected.join("\n") ? early.found : null;
  early = null;
  const found = await (prefetched ?? api.keysOf(state.selected));
  const entries = state.selected.flatMap((run) => {
    const keys = found.get(run);
    if (keys instanceof ApiError) throw keys;
    return keys === undefined ? [] : [[run, keys] as const];
  });
  for (const [run, keys] of entries) state.keysByRun.set(run, keys);
  return new Map(entries);
}

/**
 * The view settings a tab's charts use. Streams and system metrics are drawn over time (a probe
 * records many values per step), so step or metric x-axes show them by relative time; raw stream
 * values are never smoothed.
 */
export function settingsFor(tab: Tab): ViewSettings {
  const settings = { ...state.settings };
  if (tab === "streams" || tab === "system") {
    if (settings.xMode === "step" || settings.xMode === "metric") {
      settings.xMode = "relative";
      settings.logX = false;
      settings.zoom = null;
    }
    if (tab === "streams") settings.smoothing = 0;
  }
  return settings;
}
