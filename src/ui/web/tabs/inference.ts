/**
 * The inference tab (docs/inference.md): per model — each set of the GenAI attributes, whatever
 * its `error.type` — one chart per latency instrument with its p50, p90 and p99 together (three
 * keys, three lines), tokens per second, requests and errors per second (the `Reduce.RATE`
 * `…/per_s` outputs) and the error rate (errors / requests per flush, from the `…/total` outputs).
 * The cards, their fetching and their colours are the metrics tab's: only the choice of lines is
 * this tab's.
 */
import { splitAttributedKey } from "../../../core/attributes.js";
import { GLOBAL_RANK } from "../../../store/read-types.js";
import { api, type RunKeys, type SeriesData } from "../api.js";
import { ChartCard } from "../chart.js";
import { lineColour } from "../chart-series.js";
import type { Line } from "../chart-data.js";
import { append, el } from "../dom.js";
import { LazyGrid, type CardSpec } from "../fetching.js";
import { searchMatcher, visibleName } from "../names.js";
import { runColour, state, type LineSource } from "../state.js";
import { emptyNote, loadKeys, runLabel, settingsFor, viewBox } from "./common.js";
import { modelAt, pickStep, stepBar } from "./inference-at.js";
import { onZoom, setGrid } from "./metrics.js";

/** The latency instruments charted, in card order: the conventions' name and what the card says. */
export const LATENCY_INSTRUMENTS: readonly (readonly [string, string])[] = [
  ["gen_ai.server.time_to_first_token", "time to first token"],
  ["gen_ai.server.time_per_output_token", "time per output token"],
  ["gen_ai.server.request.duration", "request duration"],
  ["gen_ai.client.operation.time_to_first_chunk", "time to first chunk (client)"],
  ["gen_ai.client.operation.time_per_output_chunk", "time per output chunk (client)"],
  ["gen_ai.client.operation.duration", "operation duration (client)"],
];
export const PERCENTILES = ["p50", "p90", "p99"] as const;
const ERROR_TYPE = "error.type";
const MODEL = "gen_ai.request.model";

/** Whether a key is one the tab draws (an instrument's or rankscope's inference counts). */
export function isInferenceKey(key: string): boolean {
  const { name } = splitAttributedKey(key);
  return name.startsWith("gen_ai.") || name.startsWith("inference/");
}

/** One model: its attributes but `error.type`, and per run the keys of each of its charts' lines. */
interface ModelGroup {
  readonly id: string;
  readonly attributes: Readonly<Record<string, string>>;
  /** `name` (`gen_ai.server.time_to_first_token/p99`, `inference/errors/per_s`) → run → keys (several for errors: one per error type). */
  readonly keys: Map<string, Map<string, string[]>>;
}

/** The models of the runs' keys, in the order of their labels. */
export function modelGroups(keys: Map<string, RunKeys>): ModelGroup[] {
  const groups = new Map<string, ModelGroup>();
  for (const [run, k] of keys) {
    for (const info of k.metrics) {
      if (!info.ranks.includes(GLOBAL_RANK) || !isInferenceKey(info.key)) continue;
      const { name, attributes } = splitAttributedKey(info.key);
      const own = Object.fromEntries(Object.entries(attributes).filter(([a]) => a !== ERROR_TYPE));
      // A failed request's duration is apart (error.type): the latency charts are of successes.
      if (name.startsWith("gen_ai.") && attributes[ERROR_TYPE] !== undefined) continue;
      const id = JSON.stringify(Object.entries(own).sort(([a], [b]) => a.localeCompare(b)));
      let group = groups.get(id);
      if (group === undefined) {
        group = { id, attributes: own, keys: new Map() };
        groups.set(id, group);
      }
      const byRun = group.keys.get(name) ?? new Map<string, string[]>();
      byRun.set(run, [...(byRun.get(run) ?? []), info.key]);
      group.keys.set(name, byRun);
    }
  }
  return [...groups.values()].sort((a, b) => modelLabel(a, []).localeCompare(modelLabel(b, [])));
}

/** A model's heading: its model name, and the attributes that tell it from another group of the same model. */
export function modelLabel(group: ModelGroup, all: readonly ModelGroup[]): string {
  const model = group.attributes[MODEL] ?? "(no model)";
  const twins = all.filter((g) => g !== group && (g.attributes[MODEL] ?? "(no model)") === model);
  const differing = Object.entries(group.attributes).filter(
    ([a, v]) => a !== MODEL && twins.some((t) => t.attributes[a] !== v),
  );
  return differing.length === 0 ? model : `${model} (${differing.map(([a, v]) => `${a}=${v}`).join(", ")})`;
}

/** A card's line of `run` for `key`: in a single run each measure has its palette colour; overlaying runs, the run's colour and a dash per measure. */
function lineOf(run: string, key: string, label: string, index: number): Line {
  const line: Line = {
    id: `${run}\u0000${key}\u0000global`,
    label: runLabel(run, label),
    runStart: null,
    steps: [],
    times: [],
    values: [],
  };
  if (state.selected.length > 1) {
    line.colour = runColour(run);
    if (index > 0) line.dash = index === 1 ? [6, 3] : [2, 3];
  } else line.colour = lineColour(index);
  return line;
}

/** One measure of a card: the key name in the group (per run, its keys) and its legend label. */
type Measure = readonly [name: string, label: string];

function addCard(
  grid: LazyGrid,
  box: HTMLElement,
  group: ModelGroup,
  label: string,
  what: string,
  unit: string,
  measures: readonly Measure[],
): void {
  const present = measures.filter(([name]) => group.keys.has(name));
  if (present.length === 0) return;
  const card = new ChartCard(`${what} · ${label}`, chartSettings(), { onZoom, onPick: pickStep }, unit);
  card.root.dataset["model"] = group.attributes[MODEL] ?? "";
  card.root.dataset["measure"] = what;
  state.cards.push(card);
  box.appendChild(card.root);
  const lines: LineSource[] = [];
  for (const [i, [name, measure]] of measures.entries())
    for (const [run, keys] of group.keys.get(name) ?? [])
      for (const key of keys) {
        const error = splitAttributedKey(key).attributes[ERROR_TYPE];
        const shown = error === undefined ? measure : `${measure} (${error})`;
        lines.push({ kind: "series", run, key, rank: undefined, cursor: null, card, line: lineOf(run, key, shown, i) });
      }
  grid.add({ card, lines });
}

/** The charts' settings: the metrics tab's, by step when those ask for a metric on the x-axis (the tab has no such join). */
function chartSettings(): ReturnType<typeof settingsFor> {
  const settings = settingsFor("inference");
  if (settings.xMode === "metric") settings.xMode = "step";
  return settings;
}

/** A line's points as the server answers them. */
type Points = Pick<SeriesData, "steps" | "times" | "values">;

/** The sum at each step of the answers' points, in step order. */
function sumByStep(answers: readonly Points[]): Map<number, { time: number; value: number }> {
  const sums = new Map<number, { time: number; value: number }>();
  for (const answer of answers)
    for (const [i, step] of answer.steps.entries()) {
      const value = answer.values[i] ?? NaN;
      const was = sums.get(step);
      sums.set(step, { time: was?.time ?? answer.times[i] ?? 0, value: (was?.value ?? 0) + value });
    }
  return sums;
}

/** Errors / requests of one run at each flush with requests (a flush with no error key: 0). */
export function errorRate(requests: Points, errors: readonly Points[]): Points {
  const failed = sumByStep(errors);
  const steps: number[] = [];
  const times: number[] = [];
  const values: number[] = [];
  for (const [i, step] of requests.steps.entries()) {
    const total = requests.values[i] ?? NaN;
    if (!(total > 0)) continue;
    steps.push(step);
    times.push(requests.times[i] ?? 0);
    values.push((failed.get(step)?.value ?? 0) / total);
  }
  return { steps, times, values };
}

/** The error rate card: fetched itself (two keys give one line per run). */
function addErrorRateCard(
  grid: LazyGrid,
  box: HTMLElement,
  group: ModelGroup,
  label: string,
  generation: number,
): void {
  const requests = group.keys.get("inference/requests/total");
  if (requests === undefined) return;
  const errors = group.keys.get("inference/errors/total") ?? new Map<string, string[]>();
  const card = new ChartCard(
    `error rate · ${label}`,
    chartSettings(),
    { onZoom, onPick: pickStep },
    "errors / requests",
  );
  card.root.dataset["model"] = group.attributes[MODEL] ?? "";
  card.root.dataset["measure"] = "error rate";
  state.cards.push(card);
  box.appendChild(card.root);
  const runs = [...requests].flatMap(([run, keys]) => keys.map((key) => [run, key] as const));
  const load = async (maxPoints: number): Promise<void> => {
    const lines = await Promise.all(
      runs.map(async ([run, key]) => {
        const wanted = [key, ...(errors.get(run) ?? [])];
        const answers = await api.runLines<SeriesData>(
          "scalar",
          wanted.map((k) => [run, k, null, null]),
          maxPoints,
        );
        const data = answers.map((a): Points => ("error" in a ? { steps: [], times: [], values: [] } : a));
        const [total, ...failed] = data;
        const line = lineOf(run, `${key}\u0000rate`, "errors / requests", 0);
        if (total !== undefined) Object.assign(line, errorRate(total, failed));
        return line;
      }),
    );
    if (generation === state.generation) card.setLines(lines);
  };
  const spec: CardSpec = { card, lines: [], load };
  grid.add(spec);
}

export async function renderInference(generation: number): Promise<void> {
  const view = viewBox();
  const keys = await loadKeys();
  if (generation !== state.generation) return;
  const all = modelGroups(keys);
  const matcher = searchMatcher(state.search);
  document.getElementById("key-search")?.classList.toggle("invalid", matcher.error !== null);
  const groups = all.filter((g) => matcher.test(modelLabel(g, all)));
  if (groups.length === 0) {
    emptyNote(
      all.length === 0
        ? "No inference metrics (gen_ai.* or inference/* keys, see docs/inference.md) in the selected runs."
        : "No model matches the search.",
    );
    return;
  }
  const grid = new LazyGrid(generation);
  setGrid(grid);
  view.appendChild(stepBar());
  for (const group of groups) {
    const label = modelLabel(group, all);
    const box = el("div", { className: "grid" });
    view.appendChild(
      el(
        "section",
        { className: "run-section inference-model", "data-model": group.attributes[MODEL] ?? "" },
        el("h2", {}, visibleName(label)),
        box,
      ),
    );
    for (const [instrument, what] of LATENCY_INSTRUMENTS)
      addCard(
        grid,
        box,
        group,
        label,
        what,
        "s",
        PERCENTILES.map((p) => [`${instrument}/${p}`, p]),
      );
    addCard(grid, box, group, label, "tokens/s", "tokens/s", [
      ["inference/output_tokens/per_s", "output tokens/s"],
      ["inference/input_tokens/per_s", "input tokens/s"],
    ]);
    addCard(grid, box, group, label, "requests/s", "requests/s", [
      ["inference/requests/per_s", "requests/s"],
      ["inference/errors/per_s", "errors/s"],
    ]);
    addErrorRateCard(grid, box, group, label, generation);
    // At the picked flush: the slowest replicas and the TTFT and TPOT distributions, per run.
    for (const run of group.keys.get(`${LATENCY_INSTRUMENTS[0]?.[0] ?? ""}/p50`)?.keys() ?? []) {
      const runKeys = keys.get(run);
      if (runKeys !== undefined)
        append(box, ...modelAt(run, runKeys, group.attributes, label, group.attributes[MODEL] ?? ""));
    }
  }
}

/** Whether any selected run has inference keys (asking for the keys of runs the page has none of yet). */
export async function selectedRunsHaveInference(): Promise<boolean> {
  const missing = state.selected.filter((run) => !state.keysByRun.has(run));
  if (missing.length > 0)
    for (const [run, keys] of await api.keysOf(missing)) if (!(keys instanceof Error)) state.keysByRun.set(run, keys);
  return state.selected.some((run) => state.keysByRun.get(run)?.metrics.some((m) => isInferenceKey(m.key)) === true);
}
