/**
 * The Ranks tab (docs/stragglers.md): which rank is slow. Over the first selected run's newest
 * flushes (`/api/ranks`): the newest flush's slow ranks — each with its host, the measures it stands
 * out on, the phase that made it slow and a chronic mark — then a rank × flush heatmap of step
 * time, lateness or wait. Past 64 ranks the rows are hosts (each cell the host's most straggling
 * rank's figure), so 1,024 ranks on 16 hosts are 16 rows; the table still names the rank.
 */
import { api, type RanksView } from "../api.js";
import { append, el } from "../dom.js";
import { visibleName } from "../names.js";
import { state } from "../state.js";
import { emptyNote, viewBox } from "./common.js";

/** What the heatmap shows; the measure is kept while the page lives. */
type Measure = "stepMs" | "latenessMs" | "waitMs";
const MEASURES: [Measure, string][] = [
  ["stepMs", "step time"],
  ["latenessMs", "lateness"],
  ["waitMs", "barrier wait (a straggler's is the lowest)"],
];
let measure: Measure = "stepMs";

const CELL_H = 14;
const LABEL_W = 180;
const MAX_W = 960;

const ms = (v: number | null): string => (v === null ? "—" : `${v.toFixed(v < 10 ? 2 : 1)} ms`);

/** The slow ranks of the newest flush, chronic ones marked, then chronic ranks not slow at it. */
function slowTable(view: RanksView): HTMLElement {
  const table = el("table", { id: "slow-ranks", className: "slow-ranks" });
  append(
    table,
    el(
      "tr",
      {},
      ...["rank", "host", "slow by", "step", "lateness", "others' wait", "phase", ""].map((h) => el("th", {}, h)),
    ),
  );
  for (const s of view.slowest) {
    const row = el("tr", {
      className: s.chronic ? "chronic" : "transient",
      "data-rank": s.rankName,
      "data-host": s.host,
    });
    const phase =
      s.phase === null ? "—" : `${visibleName(s.phase.name)} ${ms(s.phase.ms)} (median ${ms(s.phase.medianMs)})`;
    append(
      row,
      el("td", { className: "rank-name" }, `${visibleName(s.rankName)} (rank ${s.rank})`),
      el("td", { className: "rank-host" }, visibleName(s.host)),
      el("td", {}, s.by.join(", ")),
      el("td", {}, ms(s.stepMs)),
      el("td", {}, ms(s.latenessMs)),
      el("td", {}, ms(s.causedWaitMs)),
      el("td", {}, phase),
      el(
        "td",
        {},
        s.chronic
          ? el("span", { className: "chip chronic", title: "slow in at least half of the recent flushes" }, "chronic")
          : el("span", { className: "chip transient" }, "transient"),
      ),
    );
    table.appendChild(row);
  }
  const named = new Set(view.slowest.map((s) => s.rankName));
  for (const c of view.chronic.filter((c) => !named.has(c.rankName))) {
    append(
      table,
      el(
        "tr",
        { className: "chronic", "data-rank": c.rankName, "data-host": c.host },
        el("td", { className: "rank-name" }, `${visibleName(c.rankName)} (rank ${c.rank})`),
        el("td", { className: "rank-host" }, visibleName(c.host)),
        el(
          "td",
          { colSpan: 5, className: "muted" },
          `slow in ${c.slowFlushes} of the last ${c.window} flushes, not at the newest`,
        ),
        el("td", {}, el("span", { className: "chip chronic" }, "chronic")),
      ),
    );
  }
  return table;
}

/** The colour of a cell with no figure (a rank lost or late at that flush): grey, apart from every value's colour. */
export const MISSING_COLOUR = "#c8c8c8";
/** The value scale, low to high: yellow (fast, or a straggler's short wait), orange, red, dark red. Its low end is neither white nor the missing grey. */
const SCALE_STOPS: [number, number, number][] = [
  [255, 225, 110],
  [254, 178, 76],
  [253, 141, 60],
  [240, 59, 32],
  [189, 0, 38],
  [110, 0, 30],
];

/** The colour at `t` in [0, 1] along `SCALE_STOPS`. */
export function scaleColour(t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (SCALE_STOPS.length - 1);
  const i = Math.min(SCALE_STOPS.length - 2, Math.floor(x));
  const a = SCALE_STOPS[i] ?? [0, 0, 0];
  const b = SCALE_STOPS[i + 1] ?? a;
  const f = x - i;
  const mix = (k: 0 | 1 | 2): number => Math.round(a[k] + (b[k] - a[k]) * f);
  return `rgb(${mix(0)},${mix(1)},${mix(2)})`;
}

/** The matrix's scale: its 5th to 95th percentile (values beyond take the ends' colours), and each cell's colour. */
function colourScale(values: readonly (number | null)[]): {
  lo: number;
  hi: number;
  colour: (v: number | null) => string;
} {
  const finite = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
  const lo = finite[Math.floor(finite.length * 0.05)] ?? 0;
  const hi = finite[Math.floor(finite.length * 0.95)] ?? 1;
  const span = hi > lo ? hi - lo : 1;
  return { lo, hi, colour: (v) => (v === null ? MISSING_COLOUR : scaleColour((v - lo) / span)) };
}

/** What the heatmap's colours mean: the scale from its low to its high figure, and the grey of a flush with no figure. */
function legend(lo: number, hi: number): HTMLElement {
  const bar = el("span", { className: "legend-bar" });
  bar.style.background = `linear-gradient(to right,${Array.from({ length: 11 }, (_, i) => scaleColour(i / 10)).join(",")})`;
  const missing = el("span", { className: "legend-missing" });
  missing.style.background = MISSING_COLOUR;
  return el(
    "div",
    { id: "ranks-legend", className: "heatmap-legend" },
    el("span", { className: "legend-lo" }, `${MEASURES.find(([m]) => m === measure)?.[1] ?? measure}: ≤ ${ms(lo)}`),
    bar,
    el("span", { className: "legend-hi" }, `≥ ${ms(hi)}`),
    missing,
    el("span", {}, "no figure (rank not in that flush)"),
  );
}

/** The heatmap: a label per row (rank or host) and a canvas of rows × flushes. */
function heatmap(view: RanksView): HTMLElement {
  const values = view[measure];
  const cols = view.steps.length;
  const cellW = Math.max(2, Math.min(16, Math.floor(MAX_W / Math.max(1, cols))));
  const canvas = el("canvas", { id: "ranks-heatmap", width: cols * cellW, height: view.rows.length * CELL_H });
  canvas.dataset["measure"] = measure;
  canvas.dataset["rows"] = String(view.rows.length);
  canvas.dataset["cols"] = String(cols);
  const ctx = canvas.getContext("2d");
  const { lo, hi, colour } = colourScale(values);
  if (ctx !== null) {
    for (let r = 0; r < view.rows.length; r++) {
      for (let c = 0; c < cols; c++) {
        ctx.fillStyle = colour(values[r * cols + c] ?? null);
        ctx.fillRect(c * cellW, r * CELL_H, cellW, CELL_H - 1);
      }
    }
  }
  const slowNames = new Set(view.slowest.map((s) => (view.rowsAre === "host" ? s.host : s.rankName)));
  const labels = el("div", { className: "heatmap-labels", style: `width:${LABEL_W}px` });
  for (const row of view.rows) {
    const text =
      view.rowsAre === "host"
        ? `${visibleName(row.host)} (${row.ranks} ranks)`
        : `${visibleName(row.label)} · ${visibleName(row.host)}`;
    labels.appendChild(
      el(
        "div",
        {
          className: `heatmap-label${slowNames.has(row.label) ? " slow" : ""}`,
          style: `height:${CELL_H}px`,
          title: text,
        },
        text,
      ),
    );
  }
  canvas.addEventListener("mousemove", (e) => {
    const r = Math.floor(e.offsetY / CELL_H);
    const c = Math.floor(e.offsetX / cellW);
    const row = view.rows[r];
    canvas.title =
      row === undefined
        ? ""
        : `${row.label} · step ${view.steps[c] ?? "?"} · ${ms(values[r * cols + c] ?? null)} · ${view.flushRanks[c] ?? "?"} of ${view.totalRanks} ranks at that flush`;
  });
  const first = view.steps[0];
  const last = view.steps[cols - 1];
  return el(
    "div",
    { className: "heatmap" },
    legend(lo, hi),
    el("div", { className: "heatmap-body" }, labels, canvas),
    el("div", { className: "muted" }, cols === 0 ? "" : `flushes at steps ${first} … ${last} →`),
  );
}

export async function renderRanks(generation: number): Promise<void> {
  const view = viewBox();
  const run = state.selected[0];
  if (run === undefined) return;
  const ranks = await api.ranks(run);
  if (generation !== state.generation) return;
  if (!ranks.available) return emptyNote(`No per-rank timings here: ${ranks.reason ?? "this source keeps none"}.`);
  if (ranks.steps.length === 0)
    return emptyNote(
      "No per-rank timings in this run: ranks send them when they trace steps with a Tracer (tracer.start()/stop(), tracer.barrier(name) at a collective; see docs/stragglers.md).",
    );
  const picker = el("select", { id: "ranks-measure", "aria-label": "measure" });
  for (const [value, label] of MEASURES) picker.appendChild(el("option", { value }, label));
  picker.value = measure;
  const body = el("div", { id: "ranks-body" });
  const draw = (): void => {
    body.replaceChildren(heatmap(ranks));
    body.dataset["drawn"] = measure;
  };
  picker.addEventListener("change", () => {
    measure = picker.value === "latenessMs" || picker.value === "waitMs" ? picker.value : "stepMs";
    draw();
  });
  // The newest flush's count, as its report compared them; the window may have held more (a rank lost since).
  const counted = ranks.flushRanks[ranks.flushRanks.length - 1] ?? ranks.totalRanks;
  const more = counted < ranks.totalRanks ? ` (${ranks.totalRanks} over the heatmap's flushes)` : "";
  const rows =
    ranks.rowsAre === "host"
      ? `${counted} ranks on ${ranks.rows.length} hosts${more} (rows are hosts: each cell the host's most straggling rank)`
      : `${counted} ranks${more}`;
  const summary = el(
    "p",
    { id: "ranks-summary" },
    `${rows} · tracer ${visibleName(ranks.tracer ?? "—")} · median step ${ms(ranks.medianStepMs)} · skew (max / median) ${ranks.skew === null ? "—" : ranks.skew.toFixed(2)} · median barrier wait ${ms(ranks.medianWaitMs)}`,
  );
  const note =
    state.selected.length > 1
      ? el("span", { className: "muted" }, ` ${visibleName(run)} (the first run selected)`)
      : null;
  const slow =
    ranks.slowest.length + ranks.chronic.length === 0
      ? el("p", { className: "muted", id: "no-slow-ranks" }, "No rank stands out at the newest flush.")
      : slowTable(ranks);
  append(
    view,
    el(
      "div",
      { className: "ranks-tools" },
      el("h3", {}, `Slow ranks at step ${ranks.steps[ranks.steps.length - 1] ?? ""}`),
      note,
    ),
    summary,
    slow,
    el("div", { className: "ranks-tools" }, el("label", {}, "heatmap of ", picker)),
    body,
  );
  draw();
}
