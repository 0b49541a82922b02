/**
 * A chart's axes and scales: tick spacing and labels, value formatting, the theme's colours, and
 * the uPlot scale and axis options for the view settings.
 */
import type uPlot from "uplot";
import type { ViewSettings } from "./chart-data.js";
import { visibleName } from "./names.js";

/** Tick spacings for a step axis: 1, 2, 5 × powers of ten. */
const STEP_INCREMENTS = Array.from({ length: 16 }, (_, e) => [1, 2, 5].map((m) => m * 10 ** e)).flat();

/**
 * Tick labels with as many decimals as the ticks need to read as what they are (0.25 and 0.75,
 * not 0.3 and 0.8), exponents for very large or very small ones.
 */
export function formatTicks(splits: number[]): string[] {
  const step = splits.length > 1 ? Math.abs((splits[1] ?? 0) - (splits[0] ?? 0)) : Math.abs(splits[0] ?? 1);
  const largest = Math.max(...splits.map((v) => Math.abs(v)));
  if (largest !== 0 && (largest >= 1e6 || (step > 0 && step < 1e-4))) {
    for (let d = 1; d <= 6; d++) {
      const labels = splits.map((v) => (v === 0 ? "0" : v.toExponential(d)));
      if (splits.every((v, i) => v === 0 || Math.abs(Number(labels[i]) - v) <= step * 1e-6)) return labels;
    }
    return splits.map((v) => (v === 0 ? "0" : v.toExponential(6)));
  }
  const tolerance = Math.max(step, Number.MIN_VALUE) * 1e-6;
  for (let d = 0; d <= 10; d++) {
    if (splits.every((v) => Math.abs(Number(v.toFixed(d)) - v) <= tolerance)) return splits.map((v) => v.toFixed(d));
  }
  return splits.map((v) => v.toFixed(10));
}

/** A value for the tooltip and legend. */
export function formatValue(v: number | null | undefined): string {
  if (v === null || v === undefined) return "";
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
  return Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(4) : String(Number(v.toPrecision(6)));
}

/** Colours of axes and grid from the page's theme. */
function themeColours(): { axis: string; grid: string } {
  const style = getComputedStyle(document.documentElement);
  return {
    axis: style.getPropertyValue("--muted").trim() || "#555",
    grid: style.getPropertyValue("--grid").trim() || "#0000001a",
  };
}

/** uPlot's scales for the view settings: x by time for wall clock, log where asked, the zoom fixed. */
export function scalesOf(settings: ViewSettings): uPlot.Scales {
  const wall = settings.xMode === "wall";
  return {
    x: {
      time: wall,
      ...(settings.logX && !wall ? { distr: 3 } : {}),
      ...(settings.zoom !== null ? { min: settings.zoom[0], max: settings.zoom[1], auto: false } : {}),
    },
    y: settings.logScale ? { distr: 3 } : {},
  };
}

/** The x-axis label: what the x of a point is (wall time needs none: its ticks are clock times over dates). */
export function xLabelOf(settings: ViewSettings): string {
  return settings.xMode === "step"
    ? "step"
    : settings.xMode === "relative"
      ? "seconds since start"
      : settings.xMode === "metric"
        ? visibleName(settings.xKey)
        : "";
}

/** uPlot's x and y axes for the view settings, labelled, in the theme's colours. */
export function axesOf(settings: ViewSettings, yLabel: string): uPlot.Axis[] {
  const colours = themeColours();
  const axis = {
    stroke: colours.axis,
    grid: { stroke: colours.grid, width: 1 },
    ticks: { stroke: colours.grid, width: 1 },
  };
  const wall = settings.xMode === "wall";
  const xLabel = xLabelOf(settings);
  return [
    {
      ...axis,
      label: xLabel,
      labelSize: wall ? 0 : 14,
      // Wall time labels take two rows (time, then date): room for both.
      size: wall ? 48 : 36,
      ...(settings.xMode === "step" && !settings.logX ? { incrs: STEP_INCREMENTS } : {}),
      ...(!wall && !settings.logX ? { values: (_u: uPlot, splits: number[]) => formatTicks(splits) } : {}),
    },
    {
      ...axis,
      label: yLabel,
      size: 64,
      labelSize: yLabel === "" ? 0 : 14,
      ...(settings.logScale ? {} : { values: (_u: uPlot, splits: number[]) => formatTicks(splits) }),
    },
  ];
}
