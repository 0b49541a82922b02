/**
 * A histogram card: the buckets of one `Reduce.HISTOGRAM` key over time as a heatmap (x: step,
 * y: value, shade: the share of that step's values in the cell, as TensorBoard's and W&B's
 * histogram panels), or at one chosen step as a filled step line (bucket i spans
 * (limit[i-1], limit[i]]).
 */
import uPlot from "uplot";
import type { HistogramData } from "../../core/reduce.js";
import { GLOBAL_RANK, type HistogramEntry } from "../../store/read-types.js";
import { formatTicks } from "./chart-axes.js";
import { append, clear, el } from "./dom.js";
import { visibleName } from "./names.js";

/** x (bucket edges) and y (counts) for a stepped path; the first edge is the histogram's min. */
export function histogramSteps(
  h: Pick<HistogramData, "min" | "max" | "bucketLimits" | "bucketCounts">,
): [number[], number[]] {
  const xs: number[] = [];
  const ys: number[] = [];
  const first = h.bucketLimits[0];
  const low = Number.isFinite(h.min) ? Math.min(h.min, first ?? h.min) : (first ?? 0);
  xs.push(low);
  ys.push(0);
  h.bucketLimits.forEach((limit, i) => {
    // An open-ended last bucket (+∞, or Number.MAX_VALUE as `Reduce.buckets` writes it) ends at the largest value seen.
    const open = !Number.isFinite(limit) || limit >= Number.MAX_VALUE;
    const edge = !open ? limit : Number.isFinite(h.max) ? h.max : (xs[xs.length - 1] ?? 0) + 1;
    if (edge <= (xs[xs.length - 1] ?? -Infinity)) {
      ys[ys.length - 1] = (ys[ys.length - 1] ?? 0) + (h.bucketCounts[i] ?? 0);
      return;
    }
    xs.push(edge);
    ys.push(h.bucketCounts[i] ?? 0);
  });
  return [xs, ys];
}

/**
 * Re-bin one line's histograms onto `bins` equal cells between the smallest and largest edge of
 * all of them, spreading each bucket's count evenly over the cells it overlaps; each column is
 * normalised to its largest cell (1.0). One column per step, in step order: a step given twice (a
 * resumed run wrote it again) shows its last histogram, never the sum — histograms of different
 * lines (the global one and the ranks') must not be passed together. Returns the value range, the
 * grid and each column's step.
 */
export function heatmapGrid(
  rows: (Pick<HistogramData, "min" | "max" | "bucketLimits" | "bucketCounts"> & { step?: number })[],
  bins: number,
): { low: number; high: number; columns: number[][]; steps: (number | undefined)[] } {
  const byColumn = new Map<string, (typeof rows)[number]>();
  rows.forEach((row, r) => byColumn.set(row.step === undefined ? `row${r}` : `step${row.step}`, row));
  const shown = [...byColumn.values()].sort((a, b) => (a.step ?? Infinity) - (b.step ?? Infinity));
  const edges = shown.map((r) => histogramSteps(r)[0]);
  const low = Math.min(...edges.map((e) => e[0] ?? Infinity));
  const high = Math.max(...edges.map((e) => e[e.length - 1] ?? -Infinity));
  const span = high > low ? high - low : 1;
  const columns = shown.map((row) => {
    const cells = new Array<number>(bins).fill(0);
    const [xs, ys] = histogramSteps(row);
    for (let b = 1; b < xs.length; b++) {
      const a = xs[b - 1] ?? 0;
      const z = xs[b] ?? 0;
      const count = ys[b] ?? 0;
      if (count === 0) continue;
      const c0 = Math.min(bins - 1, Math.max(0, Math.floor(((a - low) / span) * bins)));
      const c1 = Math.min(bins - 1, Math.max(0, Math.ceil(((z - low) / span) * bins) - 1));
      const share = count / (c1 - c0 + 1);
      for (let c = c0; c <= c1; c++) cells[c] = (cells[c] ?? 0) + share;
    }
    const top = Math.max(...cells);
    return top > 0 ? cells.map((v) => v / top) : cells;
  });
  return { low, high, columns, steps: shown.map((r) => r.step) };
}

const HEAT_BINS = 48;

/** Where a card's histograms come from: one line of a key, newest first by the caller's limit. */
type HistogramLoader = (rank: number) => Promise<HistogramEntry[]>;

/**
 * One key's histograms, one line at a time (the global line by default, or a rank's from the
 * rank chooser): over time as a heatmap, or at a picked step.
 */
export class HistogramCard {
  readonly root: HTMLElement;
  private readonly plotBox: HTMLElement;
  private readonly rankPicker: HTMLSelectElement;
  private readonly picker: HTMLSelectElement;
  private readonly summary: HTMLElement;
  private plot: uPlot | null = null;
  private rows: HistogramEntry[] = [];
  /** Bumped on every load, so a late answer for another rank is dropped. */
  private loads = 0;

  constructor(
    readonly key: string,
    private readonly ranks: readonly number[],
    private readonly load: HistogramLoader,
    private readonly width: number,
    rankName: (rank: number) => string,
  ) {
    this.plotBox = el("div", { className: "plot" });
    const shown = visibleName(key);
    this.rankPicker = el("select", { className: "hist-rank", "aria-label": `line of ${shown}` });
    for (const rank of ranks)
      this.rankPicker.appendChild(
        el("option", { value: String(rank) }, rank === GLOBAL_RANK ? "all ranks (global)" : rankName(rank)),
      );
    this.rankPicker.addEventListener("change", () => void this.showRank(Number(this.rankPicker.value)));
    this.picker = el("select", { className: "hist-step", "aria-label": `step of ${shown}` });
    this.picker.addEventListener("change", () =>
      this.picker.value === "time" ? this.drawHeatmap() : this.draw(Number(this.picker.value)),
    );
    this.summary = el("span", { className: "muted" });
    this.root = el(
      "div",
      { className: "chart", "data-key": key },
      el("h3", { className: "chart-title", title: shown }, shown),
      this.plotBox,
      el("div", { className: "legend" }, this.rankPicker, this.picker, this.summary),
    );
  }

  /** Draw the global line's histograms over time (else the lowest rank's). */
  async show(): Promise<void> {
    await this.showRank(this.ranks.includes(GLOBAL_RANK) ? GLOBAL_RANK : (this.ranks[0] ?? GLOBAL_RANK));
  }

  /** Load one line's histograms and draw them over time; the step list is that line's steps, newest first. */
  async showRank(rank: number): Promise<void> {
    const load = ++this.loads;
    const rows = await this.load(rank);
    if (load !== this.loads) return;
    this.rows = [...rows].sort((a, b) => a.step - b.step || a.seq - b.seq);
    this.rankPicker.value = String(rank);
    this.root.dataset["rank"] = String(rank);
    clear(this.picker);
    this.picker.appendChild(el("option", { value: "time" }, "over time (heatmap)"));
    // One entry per step (a step written twice shows its last histogram), newest first.
    const lastOfStep = new Map<number, number>();
    this.rows.forEach((row, i) => lastOfStep.set(row.step, i));
    for (const [step, i] of [...lastOfStep].sort((a, b) => b[0] - a[0]))
      this.picker.appendChild(el("option", { value: String(i) }, `step ${step}`));
    this.picker.value = "time";
    this.drawHeatmap();
  }

  destroy(): void {
    this.loads++;
    this.plot?.destroy();
    this.root.remove();
  }

  private reset(): void {
    this.plot?.destroy();
    this.plot = null;
    clear(this.plotBox);
  }

  /** Steps left to right, values bottom to top, darker where more of a step's values fell. */
  drawHeatmap(): void {
    this.reset();
    const rows = this.rows;
    const { low, high, columns, steps } = heatmapGrid(
      rows.map((r) => ({ ...r.histogram, step: r.step })),
      HEAT_BINS,
    );
    const dpr = devicePixelRatio;
    const width = Math.max(200, this.width);
    const height = 190;
    const axisLeft = 56;
    const axisBottom = 22;
    const canvas = el("canvas", {
      className: "heatmap",
      width: Math.round(width * dpr),
      height: Math.round(height * dpr),
      "aria-label": `histograms of ${visibleName(this.key)} over ${columns.length} steps`,
    });
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    this.plotBox.appendChild(canvas);
    const ctx = canvas.getContext("2d");
    if (ctx !== null && columns.length > 0) {
      ctx.scale(dpr, dpr);
      const plotW = width - axisLeft - 6;
      const plotH = height - axisBottom - 6;
      const colW = plotW / Math.max(1, columns.length);
      const cellH = plotH / HEAT_BINS;
      columns.forEach((cells, c) => {
        cells.forEach((v, b) => {
          if (v <= 0) return;
          ctx.fillStyle = `rgba(37, 99, 235, ${(0.08 + 0.92 * v).toFixed(3)})`;
          ctx.fillRect(axisLeft + c * colW, 6 + plotH - (b + 1) * cellH, Math.ceil(colW), Math.ceil(cellH));
        });
      });
      const style = getComputedStyle(document.documentElement);
      ctx.fillStyle = style.getPropertyValue("--muted").trim() || "#555";
      ctx.font = "11px sans-serif";
      ctx.textAlign = "right";
      const ticks = [low, (low + high) / 2, high];
      ticks
        .map((v) => String(Number(v.toPrecision(4))))
        .forEach((label, i) =>
          ctx.fillText(label, axisLeft - 4, 6 + plotH - (i / 2) * plotH + (i === 0 ? 0 : i === 2 ? 9 : 4)),
        );
      ctx.textAlign = "left";
      ctx.fillText(`step ${steps[0] ?? ""}`, axisLeft, height - 6);
      ctx.textAlign = "right";
      ctx.fillText(`step ${steps[steps.length - 1] ?? ""}`, width - 6, height - 6);
    }
    const data = this.root.dataset;
    data["mode"] = "heatmap";
    data["columns"] = String(columns.length);
    data["firstStep"] = String(steps[0] ?? "");
    data["lastStep"] = String(steps[steps.length - 1] ?? "");
    data["low"] = String(low);
    data["high"] = String(high);
    delete data["step"];
    clear(this.summary);
    append(
      this.summary,
      columns.length === 0
        ? " no histograms on this line"
        : ` ${columns.length} steps · values ${low.toPrecision(4)} … ${high.toPrecision(4)}`,
    );
  }

  private draw(index: number): void {
    const row = this.rows[index];
    if (row === undefined) return;
    const [xs, ys] = histogramSteps(row.histogram);
    this.reset();
    this.plot = new uPlot(
      {
        width: Math.max(200, this.width),
        height: 190,
        legend: { show: false },
        series: [
          {},
          {
            label: "count",
            stroke: "#2563eb",
            fill: "#2563eb33",
            width: 1.5,
            paths: uPlot.paths.stepped?.({ align: 1 }),
            points: { show: false },
          },
        ],
        scales: { x: { time: false } },
        axes: [{ values: (_u, splits) => formatTicks(splits) }, { size: 56 }],
      },
      [xs, ys],
      this.plotBox,
    );
    this.root.dataset["mode"] = "step";
    this.root.dataset["step"] = String(row.step);
    const { count, min, max, bucketCounts } = row.histogram;
    this.root.dataset["buckets"] = String(bucketCounts.length);
    clear(this.summary);
    append(this.summary, ` n=${count} · min ${min.toPrecision(4)} · max ${max.toPrecision(4)}`);
  }
}
