/**
 * One chart card: a title with pin, download and (for a combined chart) remove buttons, a uPlot canvas, a tooltip and a legend.
 *
 * A line keeps its points as the server sent them (step, wall time, value); what is drawn is
 * derived from them and the view settings (x-axis, smoothing, log scales, zoom), so changing a
 * setting redraws without asking the server again. With smoothing on, each line is drawn twice:
 * the raw values faint behind, the smoothed ones on top. NaN and ±Infinity break the line and are
 * marked in red where they happened (at the top for +Inf, the bottom for -Inf, the middle for NaN).
 *
 * A card draws only while it is on screen (`setOnScreen`): off screen it keeps its points and no
 * canvas, so a run with a thousand keys costs the charts one can see.
 *
 * This file is the card (its DOM, its uPlot and redraws). What is drawn from the lines is
 * chart-data.ts, uPlot's table and series from them chart-series.ts, axes and scales chart-axes.ts, markers, tooltip rows and downloads
 * chart-interaction.ts, the legend chart-legend.ts.
 */
import uPlot from "uplot";
import { axesOf, formatValue, scalesOf, xLabelOf } from "./chart-axes.js";
import { linesToCsv, type Line, type Marker, type ViewSettings } from "./chart-data.js";
import { ChartLegend } from "./chart-legend.js";
import {
  chartTools,
  download,
  drawMarkers,
  fileNameOf,
  listenForPicks,
  placeTooltip,
  tooltipHead,
  tooltipRow,
} from "./chart-interaction.js";
import { append, clear, el } from "./dom.js";
import { visibleName } from "./names.js";
import { buildSeries, drawnSmoothing, lineColour, type BuiltData } from "./chart-series.js";

/** What a card tells its owner. */
interface ChartEvents {
  /** Its first draw, or it left the screen before one: "every chart on screen drawn" waits for it no longer. */
  onSettled?: () => void;
  /** The user dragged a zoom (an x range) or double-clicked it away (null). */
  onZoom?: (range: [number, number] | null) => void;
  onPin?: (key: string) => void;
  /** The user clicked the card's ✕ (a card without this has none). */
  onRemove?: () => void;
  /** The user clicked a point (not a drag): the step of the point under the cursor. */
  onPick?: (step: number) => void;
}

/** A chart of several lines. */
export class ChartCard {
  readonly root: HTMLElement;
  private readonly plotBox: HTMLElement;
  private readonly legend: ChartLegend;
  private readonly tooltip: HTMLElement;
  /** Says when a short line is smoothed less than the slider asks (smooth.ts), so the weight shown is never taken for the one drawn. */
  private readonly smoothNote: HTMLElement;
  private plot: uPlot | null = null;
  private lines: Line[] = [];
  private settings: ViewSettings;
  private drawn = false;
  private onScreen = false;
  /** Lines or settings changed while off screen: draw on the next appearance. */
  private dirty = false;
  /** The `structure()` the current plot was built for. */
  private builtFor = "";
  /** Index into uPlot's series of each line's top (smoothed or only) series, and its raw one. */
  private topSeries: number[] = [];
  private rawSeries: (number | null)[] = [];
  /** Each line's band edges (low, high) among uPlot's series, or null. */
  private bandSeries: ([number, number] | null)[] = [];
  private indexes: Map<number, number>[] = [];
  private markers: Marker[] = [];
  /** Lines the user hid from the legend, by id. */
  private readonly hidden = new Set<string>();
  private hovered = false;
  private readonly resizeObserver: ResizeObserver;
  private observedWidth: number | undefined;
  private widthHint: number | undefined;

  constructor(
    readonly title: string,
    settings: ViewSettings,
    private readonly events: ChartEvents = {},
    private readonly yLabel = "",
    pinned = false,
  ) {
    this.settings = settings;
    this.plotBox = el("div", { className: "plot" });
    this.smoothNote = el("span", { className: "muted smoothing-note" });
    this.tooltip = el("div", { className: "tooltip hidden", role: "status" });
    this.legend = new ChartLegend((id, only) => (only ? this.isolate(id) : this.toggle(id)));
    const shown = visibleName(title);
    const tools = chartTools(title, pinned, {
      ...(events.onPin === undefined ? {} : { pin: () => events.onPin?.(title) }),
      ...(events.onRemove === undefined ? {} : { remove: () => events.onRemove?.() }),
      csv: () => download(`${fileNameOf(title)}.csv`, new Blob([linesToCsv(this.lines)], { type: "text/csv" })),
      png: () => this.downloadPng(),
    });
    this.root = el(
      "div",
      { className: "chart", "data-key": title },
      el("div", { className: "chart-head" }, el("h3", { className: "chart-title", title: shown }, shown), tools),
      this.plotBox,
      this.smoothNote,
      this.tooltip,
      this.legend.box,
      this.legend.more,
    );
    this.resizeObserver = new ResizeObserver((entries) => {
      const width = entries[entries.length - 1]?.contentRect.width;
      if (width === undefined || width <= 0) return;
      this.observedWidth = Math.max(200, Math.floor(width));
      if (this.plot !== null && Math.abs(this.plot.width - this.observedWidth) >= 1)
        this.plot.setSize({ width: this.observedWidth, height: this.plot.height });
      this.legend.scheduleFit();
    });
    this.resizeObserver.observe(this.plotBox);
    this.plotBox.addEventListener("dblclick", () => this.events.onZoom?.(null));
    listenForPicks(this.plotBox, events.onPick, () => [this.plot, this.lines, this.indexes, this.hidden]);
    // The cursor moves on every chart at once (synced); the tooltip shows only where the mouse is.
    this.plotBox.addEventListener("mouseenter", () => {
      this.hovered = true;
    });
    this.plotBox.addEventListener("mouseleave", () => {
      this.hovered = false;
      this.tooltip.classList.add("hidden");
    });
  }

  /** Replace the lines and redraw. */
  setLines(lines: Line[]): void {
    this.lines = lines;
    this.update();
  }

  getLines(): Line[] {
    return this.lines;
  }

  getSettings(): ViewSettings {
    return this.settings;
  }

  /** Change the view settings and redraw. */
  setSettings(settings: ViewSettings): void {
    this.settings = settings;
    this.render();
  }

  /** Draw while on screen; off screen, drop the canvas and keep the points. */
  setOnScreen(on: boolean): void {
    if (on === this.onScreen) return;
    this.onScreen = on;
    this.root.dataset["onscreen"] = on ? "1" : "0";
    if (on && (this.dirty || this.plot === null) && this.root.dataset["loaded"] === "1") this.render();
    if (!on && !this.drawn) this.events.onSettled?.();
    if (!on && this.plot !== null) {
      this.plot.destroy();
      this.plot = null;
      clear(this.plotBox);
      this.root.dataset["canvas"] = "0";
    }
  }

  isOnScreen(): boolean {
    return this.onScreen;
  }

  /** Points held in total (raw), for tests and the live indicator. */
  pointCount(): number {
    return this.lines.reduce((n, l) => n + l.values.length, 0);
  }

  destroy(): void {
    this.resizeObserver.disconnect();
    this.plot?.destroy();
    this.plot = null;
    this.root.remove();
  }

  setWidthHint(width: number): void {
    if (width > 0) this.widthHint = Math.max(200, Math.floor(width));
  }

  private width(): number {
    return this.observedWidth ?? this.widthHint ?? Math.max(200, this.plotBox.clientWidth || 400);
  }

  /**
   * Redraw after points were appended: swap the data of the existing plot when the set of lines is
   * the same (cheap, no new canvas), else rebuild.
   */
  update(): void {
    this.root.dataset["loaded"] = "1";
    this.root.dataset["points"] = String(this.pointCount());
    if (!this.onScreen) {
      this.dirty = true;
      return;
    }
    if (this.plot === null || this.builtFor !== this.structure()) {
      this.render();
      return;
    }
    const built = this.buildData();
    this.markers = built.markers;
    this.indexes = built.indexes;
    this.root.dataset["nonfinite"] = String(this.markers.length);
    this.plot.setData(built.data, this.settings.zoom === null);
    if (this.settings.zoom !== null)
      this.plot.setScale("x", { min: this.settings.zoom[0], max: this.settings.zoom[1] });
  }

  private structure(): string {
    return `${this.settings.smoothing > 0}|${this.lines.map((l) => `${l.id}:${l.scatter === true}:${l.band?.kind ?? ""}`).join(",")}`;
  }

  /** The weight the card's shortest smoothed line is drawn with, when it is below the slider's. */
  private noteSmoothing(): void {
    const weight = this.settings.smoothing;
    const { drawn, fewest } = drawnSmoothing(this.lines, weight);
    const less = weight > 0 && drawn < weight;
    // A line too short to smooth at all is drawn through its values: say so rather than "smoothing 0.00".
    const what = drawn > 0 ? `smoothing ${drawn.toFixed(2)}` : "not smoothed";
    this.smoothNote.textContent = less ? `${what} (${fewest} points)` : "";
    this.smoothNote.title = less
      ? "A line is smoothed over at most a tenth of its points, so a short run is drawn through its values"
      : "";
    this.root.dataset["smoothing"] = String(less ? drawn : weight);
  }

  private colourOf(i: number): string {
    return this.lines[i]?.colour ?? lineColour(i);
  }

  private buildData(): BuiltData {
    this.noteSmoothing();
    return buildSeries(this.lines, this.settings, (i) => this.colourOf(i), this.hidden);
  }

  /** Redraw from the lines and settings (only while on screen). */
  render(): void {
    if (!this.onScreen) {
      this.dirty = true;
      return;
    }
    this.dirty = false;
    const { settings } = this;
    const { data, series, topSeries, rawSeries, bandSeries, bands, markers, indexes } = this.buildData();
    this.topSeries = topSeries;
    this.rawSeries = rawSeries;
    this.bandSeries = bandSeries;
    this.root.dataset["bands"] = String(bands.length);
    this.markers = markers;
    this.indexes = indexes;
    this.builtFor = this.structure();
    this.root.dataset["lines"] = String(this.lines.length);
    this.root.dataset["series"] = String(series.length - 1);
    this.root.dataset["points"] = String(this.pointCount());
    this.root.dataset["xMode"] = settings.xMode;
    this.root.dataset["xLabel"] = xLabelOf(settings);
    this.root.dataset["logX"] = settings.logX ? "1" : "0";
    this.root.dataset["nonfinite"] = String(markers.length);

    this.plot?.destroy();
    clear(this.plotBox);
    const opts: uPlot.Options = {
      width: this.width(),
      height: 190,
      series,
      bands,
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: false }, sync: { key: "rankscope", setSeries: false } },
      select: { show: true, left: 0, top: 0, width: 0, height: 0 },
      scales: scalesOf(settings),
      axes: axesOf(settings, this.yLabel),
      hooks: {
        draw: [
          (u) => {
            drawMarkers(u, this.markers);
            this.root.dataset["xRange"] = `${u.scales["x"]?.min ?? ""},${u.scales["x"]?.max ?? ""}`;
            this.root.dataset["canvas"] = "1";
            if (!this.drawn) {
              this.drawn = true;
              this.root.dataset["drawn"] = "1";
              this.events.onSettled?.();
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

  /** After a drag: the dragged x range becomes the zoom of every chart (the owner refetches finer points). */
  private zoomed(u: uPlot): void {
    if (u.select.width < 2) return;
    const x0 = u.posToVal(u.select.left, "x");
    const x1 = u.posToVal(u.select.left + u.select.width, "x");
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    if (x1 > x0) this.events.onZoom?.([x0, x1]);
  }

  /** Apply a zoom given by the owner (from any chart, or the URL). */
  setZoom(zoom: [number, number] | null): void {
    this.settings = { ...this.settings, zoom };
    if (this.plot === null) {
      this.dirty = true;
      return;
    }
    if (zoom === null) this.render();
    else this.plot.setScale("x", { min: zoom[0], max: zoom[1] });
  }

  private renderLegend(): void {
    this.legend.render(this.lines, (i) => this.colourOf(i), this.hidden);
    this.root.dataset["hidden"] = String(this.hidden.size);
  }

  /** Hide or show one line. */
  toggle(id: string): void {
    if (this.hidden.has(id)) this.hidden.delete(id);
    else this.hidden.add(id);
    this.applyVisibility();
  }

  /** Show only this line; when it already is the only one shown, show all again. */
  isolate(id: string): void {
    const alone = this.lines.every((l) => (l.id === id) !== this.hidden.has(l.id));
    this.hidden.clear();
    if (!alone) for (const l of this.lines) if (l.id !== id) this.hidden.add(l.id);
    this.applyVisibility();
  }

  private applyVisibility(): void {
    this.lines.forEach((line, i) => {
      const show = !this.hidden.has(line.id);
      this.legend.setShown(i, show);
      if (this.plot === null) return;
      const top = this.topSeries[i];
      const raw = this.rawSeries[i];
      const band = this.bandSeries[i];
      this.plot.batch(() => {
        if (top !== undefined) this.plot?.setSeries(top, { show });
        if (raw !== undefined && raw !== null) this.plot?.setSeries(raw, { show });
        for (const edge of band ?? []) this.plot?.setSeries(edge, { show });
      });
    });
    this.root.dataset["hidden"] = String(this.hidden.size);
  }

  private showValuesAt(u: uPlot): void {
    const idx = u.cursor.idx ?? null;
    const rows: HTMLElement[] = [];
    let head: HTMLElement | null = null;
    let headTime: number | null = null;
    const x = idx === null ? undefined : u.data[0]?.[idx];
    const xMode = this.settings.xMode;
    this.legend.holdHeight(idx !== null);
    this.topSeries.forEach((s, i) => {
      const line = this.lines[i];
      if (line === undefined) return;
      const v = idx === null ? null : (u.data[s]?.[idx] ?? null);
      this.legend.setValue(i, v === null || v === undefined ? "" : ` ${formatValue(v)}`);
      if (x === undefined || this.hidden.has(line.id)) return;
      const point = this.indexes[i]?.get(x);
      if (point === undefined) return;
      if (head === null) {
        head = tooltipHead(line, point, xMode);
        headTime = line.times[point] ?? null;
      }
      const rawIdx = this.rawSeries[i];
      const smoothed = rawIdx !== null && rawIdx !== undefined && idx !== null ? (u.data[s]?.[idx] ?? null) : null;
      rows.push(tooltipRow(line, this.colourOf(i), point, smoothed, xMode, headTime));
    });
    const left = u.cursor.left ?? -1;
    if (rows.length === 0 || left < 0 || !this.hovered) {
      this.tooltip.classList.add("hidden");
      return;
    }
    clear(this.tooltip);
    append(
      this.tooltip,
      head,
      ...rows.slice(0, 12),
      rows.length > 12 ? el("div", { className: "muted" }, `… ${rows.length - 12} more`) : null,
    );
    this.tooltip.classList.remove("hidden");
    placeTooltip(this.tooltip, this.root, u, left);
  }

  private downloadPng(): void {
    const canvas = this.plotBox.querySelector("canvas");
    if (canvas === null) return;
    canvas.toBlob((blob) => {
      if (blob !== null) download(`${fileNameOf(this.title)}.png`, blob);
    }, "image/png");
  }
}
