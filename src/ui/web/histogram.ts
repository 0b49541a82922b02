/**
 * A histogram card: the buckets of one `Reduce.HISTOGRAM` key over time as a heatmap (x: step,
 * y: value, shade: the share of that step's values in the cell, as TensorBoard's and W&B's
 * histogram panels), or at one chosen step as a filled step line (bucket i spans
 * (limit[i-1], limit[i]]).
 */
import uPlot from "uplot";
import type { HistogramData } from "../../core/reduce.js";
import { GLOBAL_RANK, type HistogramEntry } from "../../backends/store/read-types.js";
import { formatTicks } from "./chart-axes.js";
import { append, clear, el } from "./dom.js";
import { visibleName } from "./names.js";

/** x (bucket edges) and y (counts) for a stepped path; the first edge is the histogram's min. */
export function histogramSteps(h: Pick<HistogramData, "min" | "max" | "bucketLimits" | "bucketCounts">): [number[], number[]] {
  const xs: number[] = [];
  const ys: number[] = [];
  const first = h.bucketLimits[0];
  const low = Number.isFinite(h.min) ? Math.min(h.min, first ?? h.min) : (first ?? 0);
  xs.push(low);
  ys.push(0);
  h.bucketLimits.forEach((limit, i) => {
    // An open-ended last bucket (+∞) ends at the largest value seen.
    const edge = Number.isFinite(limit) ? limit : Number.isFinite(h.max) ? h.max : (xs[xs.length - 1] ?? 0) + 1;
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
 * Re-bin histograms onto `bins` equal cells between the smallest and largest edge of all of them,
 * spreading each bucket's count evenly over the cells it overlaps. Rows of the same `step` (one
 * per rank) add up into one column; each column is normalised to its largest cell (1.0). Returns
 * the value range, the grid (one column per step, in the rows' order) and each column's step.
 */
export function heatmapGrid(rows: (Pick<HistogramData, "min" | "max" | "bucketLimits" | "bucketCounts"> & { step?: number })[], bins: number): { low: number; high: number; columns: number[][]; steps: (number | undefined)[] } {
  const edges = rows.map((r) => histogramSteps(r)[0]);
  const low = Math.min(...edges.map((e) => e[0] ?? Infinity));
  const high = Math.max(...edges.map((e) => e[e.length - 1] ?? -Infinity));
  const span = high > low ? high - low : 1;
  const byColumn = new Map<string, { step: number | undefined; cells: number[] }>();
  rows.forEach((row, r) => {
    const id = row.step === undefined ? `row${r}` : `step${row.step}`;
    let column = byColumn.get(id);
    if (column === undefined) {
      column = { step: row.step, cells: new Array<number>(bins).fill(0) };
      byColumn.set(id, column);
    }
    const [xs, ys] = histogramSteps(row);
    for (let b = 1; b < xs.length; b++) {
      const a = xs[b - 1] ?? 0;
      const z = xs[b] ?? 0;
      const count = ys[b] ?? 0;
      if (count === 0) continue;
      const c0 = Math.min(bins - 1, Math.max(0, Math.floor(((a - low) / span) * bins)));
      const c1 = Math.min(bins - 1, Math.max(0, Math.ceil(((z - low) / span) * bins) - 1));
      const share = count / (c1 - c0 + 1);
      for (let c = c0; c <= c1; c++) column.cells[c] = (column.cells[c] ?? 0) + share;
    }
  });
  const columns = [...byColumn.values()].map(({ cells }) => {
    const top = Math.max(...cells);
    return top > 0 ? cells.map((v) => v / top) : cells;
  });
  return { low, high, columns, steps: [...byColumn.values()].map((c) => c.step) };
}

const HEAT_BINS = 48;

/** One key's histograms: over time, or at a picked step. */
export class HistogramCard {
  readonly root: HTMLElement;
  private readonly plotBox: HTMLElement;
  private readonly picker: HTMLSelectElement;
  private readonly summary: HTMLElement;
  private plot: uPlot | null = null;

  constructor(
    readonly key: string,
    private readonly rows: HistogramEntry[],
    private readonly width: number,
  ) {
    this.plotBox = el("div", { className: "plot" });
    this.picker = el("select", { "aria-label": `step of ${visibleName(key)}` });
    this.picker.appendChild(el("option", { value: "time" }, "over time (heatmap)"));
    rows.forEach((row, i) => {
      const label = row.rank === GLOBAL_RANK ? `step ${row.step}` : `step ${row.step} · rank ${row.rank}`;
      this.picker.appendChild(el("option", { value: String(i) }, label));
    });
    this.picker.value = "time";
    this.picker.addEventListener("change", () => (this.picker.value === "time" ? this.drawHeatmap() : this.draw(Number(this.picker.value))));
    this.summary = el("span", { className: "muted" });
    const shown = visibleName(key);
    this.root = el("div", { className: "chart", "data-key": key }, el("h3", { className: "chart-title", title: shown }, shown), this.plotBox, el("div", { className: "legend" }, this.picker, this.summary));
  }

  /** Draw the histograms over time. */
  show(): void {
    this.drawHeatmap();
  }

  destroy(): void {
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
    const { low, high, columns, steps } = heatmapGrid(rows.map((r) => ({ ...r.histogram, step: r.step })), HEAT_BINS);
    const dpr = devicePixelRatio;
    const width = Math.max(200, this.width);
    const height = 190;
    const axisLeft = 56;
    const axisBottom = 22;
    const canvas = el("canvas", { className: "heatmap", width: Math.round(width * dpr), height: Math.round(height * dpr), "aria-label": `histograms of ${visibleName(this.key)} over ${rows.length} steps` });
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    this.plotBox.appendChild(canvas);
    const ctx = canvas.getContext("2d");
    if (ctx !== null) {
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
      ticks.map((v) => String(Number(v.toPrecision(4)))).forEach((label, i) => ctx.fillText(label, axisLeft - 4, 6 + plotH - (i / 2) * plotH + (i === 0 ? 0 : i === 2 ? 9 : 4)));
      ctx.textAlign = "left";
      ctx.fillText(`step ${steps[0] ?? ""}`, axisLeft, height - 6);
      ctx.textAlign = "right";
      ctx.fillText(`step ${steps[steps.length - 1] ?? ""}`, width - 6, height - 6);
    }
    this.root.dataset["mode"] = "heatmap";
    this.root.dataset["columns"] = String(columns.length);
    delete this.root.dataset["step"];
    clear(this.summary);
    append(this.summary, ` ${columns.length} steps${rows.length > columns.length ? ` (${rows.length} histograms, ranks added up)` : ""} · values ${low.toPrecision(4)} … ${high.toPrecision(4)}`);
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
        series: [{}, { label: "count", stroke: "#2563eb", fill: "#2563eb33", width: 1.5, paths: uPlot.paths.stepped?.({ align: 1 }), points: { show: false } }],
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
