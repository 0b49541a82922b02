/**
 * One chart card: a title, a uPlot canvas and a legend of its lines.
 *
 * A line keeps its points as the server sent them (step, wall time, value); what is drawn is
 * derived from them and the view settings (x-axis, smoothing, log scale), so changing a setting
 * redraws without asking the server again. With smoothing on, each line is drawn twice: the raw
 * values faint behind, the smoothed ones on top.
 */
import uPlot from "uplot";
import { append, clear, el } from "./dom.js";
import { smoothDebiasedEma } from "./smooth.js";

export type XMode = "step" | "wall" | "relative";

export interface ViewSettings {
  xMode: XMode;
  smoothing: number;
  logScale: boolean;
}

/** One line (or scatter) of a chart. */
export interface Line {
  readonly id: string;
  label: string;
  /** The run's start, for relative time (ms since the epoch); else the line's first point. */
  runStart: number | null;
  steps: number[];
  times: number[];
  values: number[];
  /** Scatter for raw stream values. */
  scatter?: boolean;
  /** The server thinned these points; zooming in asks for finer ones. */
  downsampled?: boolean;
}

/** A zoom the user made by dragging: the step range of the points inside it, per line. */
export interface ZoomRequest {
  readonly card: ChartCard;
  /** For each line (same order as `getLines()`): the first step inside the zoom, or null when none is. */
  readonly fromSteps: (number | null)[];
  /** The zoom's share of each line's x range from `fromSteps` to its end (0..1]. */
  readonly fractions: number[];
}

/** Tick spacings for a step axis: 1, 2, 5 × powers of ten. */
const STEP_INCREMENTS = Array.from({ length: 13 }, (_, e) => [1, 2, 5].map((m) => m * 10 ** e)).flat();

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

/** The colour of the i-th line. */
export function lineColour(i: number): string {
  return PALETTE[i % PALETTE.length] ?? "#333";
}

function faint(colour: string): string {
  return `${colour}40`;
}

function xOf(line: Line, mode: XMode, i: number): number {
  if (mode === "step") return line.steps[i] ?? 0;
  const t = line.times[i] ?? 0;
  if (mode === "wall") return t / 1000;
  const start = line.runStart ?? line.times[0] ?? 0;
  return (t - start) / 1000;
}

/** A line's points in x order, as [xs, raw, smoothed] with nulls where nothing can be drawn. */
function lineTable(line: Line, settings: ViewSettings): [number[], (number | null)[], (number | null)[]] {
  const n = line.values.length;
  const order = Array.from({ length: n }, (_, i) => i);
  const xs = order.map((i) => xOf(line, settings.xMode, i));
  let sorted = true;
  for (let i = 1; i < n; i++) if ((xs[i] ?? 0) < (xs[i - 1] ?? 0)) sorted = false;
  if (!sorted) order.sort((a, b) => (xs[a] ?? 0) - (xs[b] ?? 0) || a - b);
  const x: number[] = [];
  const y: (number | null)[] = [];
  for (const i of order) {
    const xi = xs[i] ?? 0;
    const v = line.values[i] ?? NaN;
    const drawable = Number.isFinite(v) && (!settings.logScale || v > 0);
    // uPlot needs strictly increasing x within a line: keep the last value of a repeated x.
    if (x.length > 0 && x[x.length - 1] === xi) {
      y[y.length - 1] = drawable ? v : null;
      continue;
    }
    x.push(xi);
    y.push(drawable ? v : null);
  }
  return [x, y, line.scatter === true ? y : smoothDebiasedEma(y, settings.smoothing)];
}

/** Tick labels with as many decimals as the tick spacing needs (uPlot's default rounds 0.0005 to 0.001). */
export function formatTicks(splits: number[]): string[] {
  const step = splits.length > 1 ? Math.abs((splits[1] ?? 0) - (splits[0] ?? 0)) : Math.abs(splits[0] ?? 1);
  const largest = Math.max(...splits.map((v) => Math.abs(v)));
  if (largest !== 0 && (largest >= 1e6 || (step > 0 && step < 1e-4))) return splits.map((v) => (v === 0 ? "0" : v.toExponential(1)));
  const decimals = step > 0 ? Math.min(6, Math.max(0, -Math.floor(Math.log10(step) + 1e-9))) : 0;
  return splits.map((v) => v.toFixed(decimals));
}

/** A chart of several lines; rebuilt when lines or settings change. */
export class ChartCard {
  readonly root: HTMLElement;
  private readonly plotBox: HTMLElement;
  private readonly legend: HTMLElement;
  private plot: uPlot | null = null;
  private lines: Line[] = [];
  private settings: ViewSettings;
  private drawn = false;
  /** The `structure()` the current plot was built for. */
  private builtFor = "";
  /** The user dragged a zoom (kept while live points arrive) and has not double-clicked it away. */
  private userZoom = false;
  private legendValues: HTMLElement[] = [];
  /** Index into uPlot's series of each line's top (smoothed or only) series. */
  private topSeries: number[] = [];
  private readonly resizeObserver: ResizeObserver;
  /** Widths known without asking the layout engine (asking per chart forces a reflow each time). */
  private observedWidth: number | undefined;
  private widthHint: number | undefined;

  constructor(
    readonly title: string,
    settings: ViewSettings,
    private readonly onFirstDraw: () => void = () => undefined,
    private readonly yLabel = "",
    private readonly onZoom?: (zoom: ZoomRequest) => void,
  ) {
    this.settings = settings;
    this.plotBox = el("div", { className: "plot" });
    this.legend = el("div", { className: "legend" });
    this.root = el("div", { className: "chart", "data-key": title }, el("h3", { className: "chart-title", title }, title), this.plotBox, this.legend);
    this.resizeObserver = new ResizeObserver((entries) => {
      const width = entries[entries.length - 1]?.contentRect.width;
      if (width === undefined || width <= 0) return;
      this.observedWidth = Math.max(200, Math.floor(width));
      if (this.plot !== null && Math.abs(this.plot.width - this.observedWidth) >= 1) this.plot.setSize({ width: this.observedWidth, height: this.plot.height });
    });
    this.resizeObserver.observe(this.plotBox);
    // uPlot resets the zoom on double-click; from then on live points may rescale again.
    this.plotBox.addEventListener("dblclick", () => {
      this.userZoom = false;
    });
  }

  /** Replace the lines and redraw. */
  setLines(lines: Line[]): void {
    this.lines = lines;
    this.update();
  }

  /** The lines as they are now (to append to them). */
  getLines(): Line[] {
    return this.lines;
  }

  /** Change the view settings and redraw. */
  setSettings(settings: ViewSettings): void {
    this.settings = settings;
    this.render();
  }

  /** Points drawn in total (raw), for tests and the live indicator. */
  pointCount(): number {
    return this.lines.reduce((n, l) => n + l.values.length, 0);
  }

  destroy(): void {
    this.resizeObserver.disconnect();
    this.plot?.destroy();
    this.plot = null;
    this.root.remove();
  }

  /** The width all cards of a grid share, measured once by the grid. */
  setWidthHint(width: number): void {
    if (width > 0) this.widthHint = Math.max(200, Math.floor(width));
  }

  private width(): number {
    return this.observedWidth ?? this.widthHint ?? Math.max(200, this.plotBox.clientWidth || 400);
  }

  /**
   * Redraw after points were appended to the lines: swap the data of the existing plot when the
   * set of lines is the same (cheap, no new canvas), else rebuild.
   */
  update(keepZoom = false): void {
    if (this.plot === null || this.builtFor !== this.structure()) {
      this.render();
      return;
    }
    this.plot.setData(this.buildData().data, !(keepZoom || this.userZoom));
    this.root.dataset["points"] = String(this.pointCount());
  }

  /** What the uPlot series depend on: which lines, and whether smoothing doubles them. */
  private structure(): string {
    return `${this.settings.smoothing > 0}|${this.lines.map((l) => `${l.id}:${l.scatter === true}`).join(",")}`;
  }

  /** uPlot's aligned data and series for the current lines and settings. */
  private buildData(): { data: uPlot.AlignedData; series: uPlot.Series[]; topSeries: number[] } {
    const { settings } = this;
    const tables = this.lines.map((l) => lineTable(l, settings));
    const smoothing = settings.smoothing > 0;
    const joinInput: uPlot.AlignedData[] = [];
    const series: uPlot.Series[] = [{}];
    const topSeries: number[] = [];
    this.lines.forEach((line, i) => {
      const table = tables[i];
      if (table === undefined) return;
      const colour = lineColour(i);
      if (line.scatter === true) {
        joinInput.push([table[0], table[1]]);
        series.push({ label: line.label, stroke: colour, fill: colour, paths: () => null, points: { show: true, size: 4, stroke: colour, fill: colour } });
      } else if (smoothing) {
        joinInput.push([table[0], table[1], table[2]]);
        series.push({ label: `${line.label} (raw)`, stroke: faint(colour), width: 1, spanGaps: true, points: { show: false } });
        series.push({ label: line.label, stroke: colour, width: 1.5, spanGaps: true, points: { show: false } });
      } else {
        joinInput.push([table[0], table[1]]);
        series.push({ label: line.label, stroke: colour, width: 1.5, spanGaps: true, points: { show: false } });
      }
      topSeries.push(series.length - 1);
    });
    const data: uPlot.AlignedData = joinInput.length === 0 ? [[]] : joinInput.length === 1 ? (joinInput[0] as uPlot.AlignedData) : uPlot.join(joinInput);
    return { data, series, topSeries };
  }

  /** Redraw from the lines and settings. */
  render(): void {
    const { settings } = this;
    const { data, series, topSeries } = this.buildData();
    this.topSeries = topSeries;
    this.builtFor = this.structure();
    this.root.dataset["lines"] = String(this.lines.length);
    this.root.dataset["series"] = String(series.length - 1);
    this.root.dataset["points"] = String(this.pointCount());
    this.root.dataset["xMode"] = settings.xMode;

    this.plot?.destroy();
    this.userZoom = false;
    clear(this.plotBox);
    const opts: uPlot.Options = {
      width: this.width(),
      height: 190,
      series,
      legend: { show: false },
      cursor: { drag: { x: true, y: false } },
      scales: {
        x: { time: settings.xMode === "wall" },
        y: settings.logScale ? { distr: 3 } : {},
      },
      axes: [
        {
          label: settings.xMode === "step" ? "step" : settings.xMode === "relative" ? "seconds since start" : "",
          labelSize: settings.xMode === "wall" ? 0 : 14,
          size: 36,
          // Steps are whole numbers: no 0.5 ticks.
          ...(settings.xMode === "step" ? { incrs: STEP_INCREMENTS } : {}),
        },
        { label: this.yLabel, size: 60, labelSize: this.yLabel === "" ? 0 : 14, values: settings.logScale ? undefined : (_u, splits) => formatTicks(splits) },
      ],
      hooks: {
        draw: [
          (u) => {
            // What the x axis shows, for tests and anyone inspecting the page.
            this.root.dataset["xRange"] = `${u.scales["x"]?.min ?? ""},${u.scales["x"]?.max ?? ""}`;
            if (!this.drawn) {
              this.drawn = true;
              this.root.dataset["drawn"] = "1";
              this.onFirstDraw();
            }
          },
        ],
        setCursor: [(u) => this.showValuesAt(u)],
        setSelect: [(u) => this.zoomed(u)],
      },
    };
    this.plot = new uPlot(opts, data, this.plotBox);
    this.renderLegend();
  }

  /** After a drag-zoom: tell the owner which steps the zoom covers, so thinned lines get finer points. */
  private zoomed(u: uPlot): void {
    if (u.select.width >= 2) this.userZoom = true;
    if (this.onZoom === undefined || u.select.width < 2 || !this.lines.some((l) => l.downsampled === true)) return;
    const x0 = u.posToVal(u.select.left, "x");
    const x1 = u.posToVal(u.select.left + u.select.width, "x");
    const fromSteps: (number | null)[] = [];
    const fractions: number[] = [];
    for (const line of this.lines) {
      let from: number | null = null;
      let lastX = -Infinity;
      for (let i = 0; i < line.values.length; i++) {
        const x = xOf(line, this.settings.xMode, i);
        if (x >= x0 && from === null) from = line.steps[i] ?? null;
        if (x > lastX) lastX = x;
      }
      fromSteps.push(from);
      fractions.push(lastX > x0 ? Math.min(1, Math.max(1e-6, (x1 - x0) / (lastX - x0))) : 1);
    }
    this.root.dataset["zoomed"] = "1";
    this.onZoom({ card: this, fromSteps, fractions });
  }

  private renderLegend(): void {
    clear(this.legend);
    this.legendValues = [];
    this.lines.forEach((line, i) => {
      const value = el("span", { className: "legend-value" });
      this.legendValues.push(value);
      const swatch = el("span", { className: "swatch" });
      swatch.style.background = lineColour(i);
      append(this.legend, el("span", { className: "legend-item", "data-line": line.id }, swatch, el("span", { className: "legend-label" }, line.label), value));
    });
  }

  private showValuesAt(u: uPlot): void {
    const idx = u.cursor.idx;
    this.topSeries.forEach((s, i) => {
      const target = this.legendValues[i];
      if (target === undefined) return;
      const v = idx === null || idx === undefined ? null : (u.data[s]?.[idx] ?? null);
      target.textContent = v === null || v === undefined ? "" : ` ${Number(v).toPrecision(5)}`;
    });
  }
}
