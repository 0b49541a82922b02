/** What the chart tabs share: labels, new lines, the view container, empty notes, keys. */
import { api, type RunKeys } from "../api.js";
import type { Line, ViewSettings } from "../chart-data.js";
import { el } from "../dom.js";
import { visibleName } from "../names.js";
import { rankColour } from "../colours.js";
import { FETCH_CONCURRENCY, pool } from "../fetching.js";
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

/** `rank 1`, or `rank 1 (Trainer_0_r1)` when the rank's process registered a name. */
export function rankLabel(keys: RunKeys | undefined, rank: number): string {
  const name = keys?.rankNames[String(rank)];
  return name === undefined || name === "" || name === `rank${rank}` ? `rank ${rank}` : `rank ${rank} (${visibleName(name)})`;
}

/** Dash patterns telling ranks apart when colours tell runs apart. */
const DASHES = [[6, 3], [2, 3], [10, 3, 2, 3], [4, 4], [1, 2], [12, 4]];

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
    if (rank !== undefined) line.dash = DASHES[rank % DASHES.length] ?? [];
  } else if (rank === undefined) {
    line.colour = colour;
  } else {
    // One run: its global line in the run's colour, each rank in a colour no run has.
    line.colour = rankColour(rank, colour);
  }
  return line;
}

/** The keys of every selected run (a few requests at a time: a selection can hold hundreds). */
export async function loadKeys(): Promise<Map<string, RunKeys>> {
  const found = new Map<string, RunKeys>();
  await pool([...state.selected], FETCH_CONCURRENCY * 2, async (run) => {
    found.set(run, await api.keys(run));
  });
  const entries = state.selected.flatMap((run) => {
    const keys = found.get(run);
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
