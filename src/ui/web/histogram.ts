/**
 * A histogram card: the buckets of one `Reduce.HISTOGRAM` key at a chosen step, drawn as a filled
 * step line (bucket i spans (limit[i-1], limit[i]]), with a step picker over the newest ones.
 */
import uPlot from "uplot";
import type { HistogramRow } from "../source.js";
import { append, clear, el } from "./dom.js";
import { formatTicks } from "./chart.js";

/** x (bucket edges) and y (counts) for a stepped path; the first edge is the histogram's min. */
export function histogramSteps(h: Pick<HistogramRow, "min" | "max" | "bucketLimits" | "bucketCounts">): [number[], number[]] {
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

/** One key's histograms with a step picker. */
export class HistogramCard {
  readonly root: HTMLElement;
  private readonly plotBox: HTMLElement;
  private readonly picker: HTMLSelectElement;
  private readonly summary: HTMLElement;
  private plot: uPlot | null = null;

  constructor(
    readonly key: string,
    private readonly rows: HistogramRow[],
    private readonly width: number,
  ) {
    this.plotBox = el("div", { className: "plot" });
    this.picker = el("select", { "aria-label": `step of ${key}` });
    rows.forEach((row, i) => {
      const label = row.rank === null ? `step ${row.step}` : `step ${row.step} · rank ${row.rank}`;
      this.picker.appendChild(el("option", { value: String(i) }, label));
    });
    this.picker.value = String(rows.length - 1);
    this.picker.addEventListener("change", () => this.draw(Number(this.picker.value)));
    this.summary = el("span", { className: "muted" });
    this.root = el("div", { className: "chart", "data-key": key }, el("h3", { className: "chart-title", title: key }, key), this.plotBox, el("div", { className: "legend" }, this.picker, this.summary));
  }

  /** Draw the newest histogram. */
  show(): void {
    this.draw(this.rows.length - 1);
  }

  destroy(): void {
    this.plot?.destroy();
    this.root.remove();
  }

  private draw(index: number): void {
    const row = this.rows[index];
    if (row === undefined) return;
    const [xs, ys] = histogramSteps(row);
    this.plot?.destroy();
    clear(this.plotBox);
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
    this.root.dataset["step"] = String(row.step);
    this.root.dataset["buckets"] = String(row.bucketCounts.length);
    clear(this.summary);
    append(this.summary, ` n=${row.count} · min ${row.min.toPrecision(4)} · max ${row.max.toPrecision(4)}`);
  }
}
