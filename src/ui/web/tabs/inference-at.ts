/**
 * The Inference tab at one flush (docs/inference.md, docs/dashboard.md): per model and run, the
 * **slowest replicas** — each replica's own TTFT (its p50 and p99 at that flush, the lines a
 * `per_rank_reduce` store writes per rank), judged against the median replica with the straggler
 * attribution's rule (`core/stands-out.ts`) — and the **distribution** of TTFT and TPOT at that
 * flush (the `Reduce.buckets` histogram of the reduced line, the conventions' buckets).
 *
 * The flush is picked for the whole view: the step chooser over the models, or a click on any of
 * the tab's charts; by default the newest flush. The picked one is kept in the address (`step=`,
 * `state.inferenceStep`), so a link or a reload shows the same flush.
 */
import uPlot from "uplot";
import { attributedKey, withSuffix } from "../../../core/attributes.js";
import { STANDS_OUT_DEFAULTS } from "../../../core/stands-out.js";
import type { HistogramData } from "../../../core/reduce.js";
import { GLOBAL_RANK } from "../../../store/read-types.js";
import { api, type HistogramEntry, type LineAnswer, type RunKeys, type SeriesData } from "../api.js";
import type { RunLineRequest } from "../api-types.js";
import { append, clear, el } from "../dom.js";
import { hooks, state } from "../state.js";
import { rankLabel, runLabel } from "./common.js";
import { judgeReplicas, ms, replicaTable, signedMs, type Replica, type ReplicaRow } from "./inference-replicas.js";

const TTFT = "gen_ai.server.time_to_first_token";
const TPOT = "gen_ai.server.time_per_output_token";
/** Flushes a replica's "slow in k of the last n" counts over (the straggler attribution's chronic window). */
const WINDOW = 10;
/** Histograms of a key loaded, the newest. */
const HISTORY = 200;

/** Who draws at the picked flush (`state.inferenceStep`, null: the newest). */
const picked: { panels: ModelAt[]; chooser: HTMLSelectElement | null } = {
  panels: [],
  chooser: null,
};

/** Pick the flush every model's panels show (a step chooser's change, a click on a chart), and keep it in the address. */
export function pickStep(step: number | null): void {
  state.inferenceStep = step;
  showPicked();
  for (const panel of picked.panels) panel.draw();
  hooks.writeUrl();
}

/** The chooser at the picked flush (an option added for it when no model offered it yet). */
function showPicked(): void {
  const chooser = picked.chooser;
  if (chooser === null) return;
  const value = state.inferenceStep === null ? "" : String(state.inferenceStep);
  if (![...chooser.options].some((o) => o.value === value))
    chooser.appendChild(el("option", { value }, `step ${value}`));
  chooser.value = value;
}

/** The bar over the view: the step chooser. Starts a new view (its panels are added by `modelAt`). */
export function stepBar(): HTMLElement {
  picked.panels = [];
  const chooser = el("select", { id: "inference-step", "aria-label": "flush shown" });
  chooser.appendChild(el("option", { value: "" }, "the newest flush"));
  chooser.addEventListener("change", () => pickStep(chooser.value === "" ? null : Number(chooser.value)));
  picked.chooser = chooser;
  showPicked();
  return el(
    "div",
    { className: "inference-at muted" },
    "Slowest replicas and distributions at ",
    chooser,
    " — or click a point of any chart.",
  );
}

/** Add the steps a panel found to the chooser (newest first). */
function offerSteps(steps: Iterable<number>): void {
  const chooser = picked.chooser;
  if (chooser === null) return;
  const have = new Set([...chooser.options].map((o) => o.value));
  const all = [...new Set([...[...have].filter((v) => v !== "").map(Number), ...steps])].sort((a, b) => b - a);
  if (all.length === have.size - 1) return;
  const value = chooser.value;
  clear(chooser);
  chooser.appendChild(el("option", { value: "" }, "the newest flush"));
  for (const step of all) chooser.appendChild(el("option", { value: String(step) }, `step ${step}`));
  chooser.value = value;
}

/** A bucket's bound as the bars label it: ms below a second, else s. */
function bound(seconds: number): string {
  return seconds < 1 ? `${Number((seconds * 1000).toPrecision(3))} ms` : `${Number(seconds.toPrecision(3))} s`;
}

/**
 * The buckets from the first holding a value to the last, as bars of equal width: each labelled
 * by its upper bound (`≤ 100 ms`; the open last bucket `> 10 s`), as Prometheus' and Grafana's
 * bucket panels show the conventions' exponential buckets.
 */
export function bucketBars(h: Pick<HistogramData, "bucketLimits" | "bucketCounts">): {
  labels: string[];
  counts: number[];
} {
  const counts = h.bucketCounts;
  const first = counts.findIndex((c) => c > 0);
  if (first < 0) return { labels: [], counts: [] };
  let last = counts.length - 1;
  while (last > first && (counts[last] ?? 0) === 0) last--;
  const labels: string[] = [];
  for (let i = first; i <= last; i++) {
    const upper = h.bucketLimits[i] ?? Infinity;
    const open = !Number.isFinite(upper) || upper >= Number.MAX_VALUE;
    labels.push(open ? `> ${bound(h.bucketLimits[i - 1] ?? 0)}` : `≤ ${bound(upper)}`);
  }
  return { labels, counts: counts.slice(first, last + 1) };
}

/** A model's panels of one run: its slowest replicas and its TTFT and TPOT distributions at the picked flush. */
class ModelAt {
  readonly replicasCard: HTMLElement;
  private readonly distributions: Array<{ card: HTMLElement; key: string; rows: HistogramEntry[]; plot: uPlot | null }>;
  private replicas: Replica[] = [];
  private loaded = false;

  constructor(
    private readonly run: string,
    private readonly keys: RunKeys,
    private readonly attributes: Readonly<Record<string, string>>,
    private readonly label: string,
    private readonly model: string,
  ) {
    this.replicasCard = this.card("slowest replicas", "slowest replicas (TTFT)");
    this.distributions = [
      [TTFT, "TTFT distribution"],
      [TPOT, "TPOT distribution"],
    ].map(([name = "", what = ""]) => ({
      card: this.card(what, what),
      key: attributedKey(name, attributes),
      rows: [],
      plot: null,
    }));
  }

  get cards(): HTMLElement[] {
    return [this.replicasCard, ...this.distributions.map((d) => d.card)];
  }

  private card(measure: string, title: string): HTMLElement {
    const heading = `${title} · ${runLabel(this.run, this.label)}`;
    return el(
      "div",
      { className: "chart inference-at-card", "data-model": this.model, "data-measure": measure, "data-run": this.run },
      el("div", { className: "chart-head" }, el("h3", { className: "chart-title", title: heading }, heading)),
      el("div", { className: "at-body" }, el("p", { className: "muted" }, "loading…")),
    );
  }

  /** Load the replicas' lines and the histograms, then draw. */
  async load(): Promise<void> {
    const key = (suffix: string): string => withSuffix(attributedKey(TTFT, this.attributes), suffix);
    const ranks =
      this.keys.metrics.find((m) => m.key === key("p50"))?.ranks.filter((r) => r >= 0 && r !== GLOBAL_RANK) ?? [];
    const wanted = ranks.flatMap((rank): RunLineRequest[] => [
      [this.run, key("p50"), rank, null],
      [this.run, key("p99"), rank, null],
    ]);
    const noLines: LineAnswer<SeriesData>[] = [];
    const [lines, ...histograms] = await Promise.all([
      wanted.length === 0
        ? Promise.resolve(noLines)
        : api.runLines<SeriesData>("scalar", wanted, 2000).catch(() => noLines),
      ...this.distributions.map((d) =>
        api
          .histograms(this.run, d.key, HISTORY, GLOBAL_RANK)
          .then((h) => h.histograms.filter((e) => e.rank === GLOBAL_RANK))
          .catch(() => []),
      ),
    ]);
    const byStep = (answer: LineAnswer<SeriesData> | undefined): Map<number, number> =>
      answer === undefined || "error" in answer
        ? new Map()
        : new Map(answer.steps.map((s, i) => [s, answer.values[i] ?? NaN]));
    this.replicas = ranks.map((rank, i) => ({
      rank,
      name: this.keys.rankNames[String(rank)] ?? rankLabel(this.keys, rank),
      p50: byStep(lines[2 * i]),
      p99: byStep(lines[2 * i + 1]),
    }));
    this.distributions.forEach((d, i) => (d.rows = [...(histograms[i] ?? [])].sort((a, b) => a.step - b.step)));
    offerSteps(this.distributions.flatMap((d) => d.rows.map((r) => r.step)));
    offerSteps(this.replicas.flatMap((r) => [...r.p50.keys()]));
    this.loaded = true;
    this.draw();
  }

  /** The flush shown: the picked one, else the newest this model has. */
  private step(): number | null {
    if (state.inferenceStep !== null) return state.inferenceStep;
    const steps = [
      ...this.distributions.flatMap((d) => d.rows.map((r) => r.step)),
      ...this.replicas.flatMap((r) => [...r.p50.keys()]),
    ];
    return steps.length === 0 ? null : Math.max(...steps);
  }

  draw(): void {
    if (!this.loaded) return;
    const step = this.step();
    this.drawReplicas(step);
    for (const d of this.distributions) this.drawDistribution(d, step);
  }

  private body(card: HTMLElement): HTMLElement {
    const body = card.querySelector<HTMLElement>(".at-body") ?? card;
    clear(body);
    return body;
  }

  private drawReplicas(step: number | null): void {
    const card = this.replicasCard;
    const body = this.body(card);
    card.dataset["step"] = step === null ? "" : String(step);
    card.dataset["replicas"] = String(this.replicas.length);
    if (this.replicas.length === 0) {
      body.appendChild(
        el(
          "p",
          { className: "muted" },
          "No per-replica values: add a per_rank_reduce store (each replica writes its own TTFT, docs/inference.md).",
        ),
      );
      return;
    }
    if (step === null) return;
    const { median, bar, n, standings } = judgeReplicas(this.replicas, step);
    card.dataset["median"] = String(median);
    const slowFlushes = this.slowFlushes(step);
    const rows = this.replicas
      .map((replica, i) => ({ replica, standing: standings[i], slow: slowFlushes[i] ?? 0 }))
      .filter((r): r is ReplicaRow => Number.isFinite(r.standing?.value))
      .sort((a, b) => b.standing.value - a.standing.value)
      .slice(0, STANDS_OUT_DEFAULTS.topK);
    const window = Math.min(WINDOW, this.stepsUpTo(step).length);
    append(
      body,
      el(
        "p",
        { className: "muted at-summary" },
        `step ${step} · median replica's p50 TTFT ${ms(median)} (${n} replicas) · stands out past ${signedMs(bar)}`,
      ),
      el("div", { className: "table-wrap" }, replicaTable(rows, { step, median, window })),
    );
  }

  /** The replicas' steps up to `step`, the newest `WINDOW`. */
  private stepsUpTo(step: number): number[] {
    const steps = new Set(this.replicas.flatMap((r) => [...r.p50.keys()]).filter((s) => s <= step));
    return [...steps].sort((a, b) => a - b).slice(-WINDOW);
  }

  /** Per replica: at how many of the last `WINDOW` flushes up to `step` it stood out. */
  private slowFlushes(step: number): number[] {
    const counts = new Array<number>(this.replicas.length).fill(0);
    for (const s of this.stepsUpTo(step))
      judgeReplicas(this.replicas, s).standings.forEach((st, i) => {
        if (st.standsOut) counts[i] = (counts[i] ?? 0) + 1;
      });
    return counts;
  }

  private drawDistribution(d: ModelAt["distributions"][number], step: number | null): void {
    d.plot?.destroy();
    d.plot = null;
    const body = this.body(d.card);
    const row = [...d.rows].reverse().find((r) => r.step === step);
    d.card.dataset["step"] = step === null ? "" : String(step);
    if (row === undefined) {
      delete d.card.dataset["counts"];
      body.appendChild(
        el("p", { className: "muted" }, step === null ? "No histograms." : `No histogram at step ${step}.`),
      );
      return;
    }
    const h = row.histogram;
    d.card.dataset["counts"] = JSON.stringify(h.bucketCounts);
    d.card.dataset["count"] = String(h.count);
    const { labels, counts } = bucketBars(h);
    const xs = labels.map((_, i) => i);
    const width = Math.max(200, (d.card.clientWidth || 400) - 16);
    d.plot = new uPlot(
      {
        width,
        height: 170,
        legend: { show: false },
        series: [
          {},
          {
            label: "requests",
            stroke: "#2563eb",
            fill: "#2563eb55",
            width: 1,
            paths: uPlot.paths.bars?.({ size: [0.85, 80] }),
            points: { show: false },
          },
        ],
        scales: {
          x: { time: false, range: [-0.5, Math.max(0.5, labels.length - 0.5)] },
          y: { range: (_u, _min, max) => [0, max] },
        },
        axes: [
          {
            splits: () => xs,
            values: (_u, splits) => splits.map((i) => labels[i] ?? ""),
            size: 30,
            font: "10px sans-serif",
          },
          { size: 40, label: "requests" },
        ],
      },
      [xs, counts],
      body,
    );
    const mean = h.count > 0 ? h.sum / h.count : NaN;
    body.appendChild(
      el(
        "p",
        { className: "muted" },
        `step ${row.step}: ${h.count} requests · min ${ms(h.min)} · mean ${ms(mean)} · max ${ms(h.max)}`,
      ),
    );
  }
}

/** A model's panels for `run`, loading; their cards go into the model's grid. */
export function modelAt(
  run: string,
  keys: RunKeys,
  attributes: Readonly<Record<string, string>>,
  label: string,
  model: string,
): HTMLElement[] {
  const panel = new ModelAt(run, keys, attributes, label, model);
  picked.panels.push(panel);
  void panel.load();
  return panel.cards;
}
