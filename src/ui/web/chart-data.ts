/**
 * A chart's data: its lines as the server sent them (step, wall time, value) and what is drawn
 * from them under the view settings (x-axis mode, log scales, smoothing), with the non-finite
 * points to mark. No DOM here.
 */
import { smoothLine } from "./smooth.js";

export type XMode = "step" | "wall" | "relative" | "metric";

export interface ViewSettings {
  xMode: XMode;
  /** The metric drawn on the x-axis when `xMode` is "metric" (joined to each line by step). */
  xKey: string;
  smoothing: number;
  logScale: boolean;
  logX: boolean;
  /** The x range every chart shows, or null for all of it. */
  zoom: [number, number] | null;
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
  /** The points were thinned (by the server or in the page); zooming in asks for finer ones. */
  downsampled?: boolean;
  colour?: string;
  dash?: number[];
  /** For an x-axis by metric: that metric's (step, value) points of the line's run, in step order. */
  xMap?: { steps: number[]; values: number[] };
  /** A group's mean line: the band drawn around it and the figures the tooltip shows, by point. */
  band?: LineBand;
}

/** The band around a group's mean (`values`): its edges and the group's figures at each point. */
interface LineBand {
  /** What the edges are: mean ± std, or min and max. */
  readonly kind: "std" | "minmax";
  readonly lo: number[];
  readonly hi: number[];
  readonly std: number[];
  readonly min: number[];
  readonly max: number[];
  /** Runs the point's figures come from. */
  readonly count: number[];
}

/** A band's edges as drawn: [x, low, high] in the order of the line's table (smoothed like the line when it is). */
export function bandTable(line: Line, settings: ViewSettings): [number[], (number | null)[], (number | null)[]] | null {
  const band = line.band;
  if (band === undefined) return null;
  const pick = settings.smoothing > 0 ? 2 : 1;
  const lo = lineTable({ ...line, values: band.lo, band: undefined }, settings).table;
  const hi = lineTable({ ...line, values: band.hi, band: undefined }, settings).table;
  return [lo[0], lo[pick], hi[pick]];
}

/** Linear interpolation of `map` (ascending steps) at `step`; NaN outside its range. */
export function interpolate(map: { steps: number[]; values: number[] }, step: number): number {
  const { steps, values } = map;
  let lo = 0;
  let hi = steps.length - 1;
  if (hi < 0 || step < (steps[0] ?? 0) || step > (steps[hi] ?? 0)) return NaN;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if ((steps[mid] ?? 0) <= step) lo = mid;
    else hi = mid;
  }
  const s0 = steps[lo] ?? 0;
  const s1 = steps[hi] ?? 0;
  const v0 = values[lo] ?? NaN;
  if (s1 === s0 || step === s0) return v0;
  return v0 + ((values[hi] ?? NaN) - v0) * ((step - s0) / (s1 - s0));
}

/** The x of a line's i-th point under an x-axis mode. */
export function xOf(line: Line, mode: XMode, i: number): number {
  if (mode === "step") return line.steps[i] ?? 0;
  if (mode === "metric") return line.xMap === undefined ? NaN : interpolate(line.xMap, line.steps[i] ?? 0);
  const t = line.times[i] ?? 0;
  if (mode === "wall") return t / 1000;
  const start = line.runStart ?? line.times[0] ?? 0;
  return (t - start) / 1000;
}

/** A non-finite point to mark. */
export interface Marker {
  x: number;
  kind: "NaN" | "+Inf" | "-Inf";
}

/** A line's points in x order, as [xs, raw, smoothed] with nulls where nothing can be drawn, its markers, and x → point index. */
export function lineTable(
  line: Line,
  settings: ViewSettings,
): { table: [number[], (number | null)[], (number | null)[]]; markers: Marker[]; index: Map<number, number> } {
  const n = line.values.length;
  const order = Array.from({ length: n }, (_, i) => i);
  const xs = order.map((i) => xOf(line, settings.xMode, i));
  let sorted = true;
  for (let i = 1; i < n; i++) if ((xs[i] ?? 0) < (xs[i - 1] ?? 0)) sorted = false;
  if (!sorted) order.sort((a, b) => (xs[a] ?? 0) - (xs[b] ?? 0) || a - b);
  const x: number[] = [];
  const y: (number | null)[] = [];
  const markers: Marker[] = [];
  const index = new Map<number, number>();
  for (const i of order) {
    const xi = xs[i] ?? NaN;
    if (!Number.isFinite(xi) || (settings.logX && xi <= 0)) continue;
    const v = line.values[i] ?? NaN;
    if (!Number.isFinite(v)) markers.push({ x: xi, kind: Number.isNaN(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf" });
    const drawable = Number.isFinite(v) && (!settings.logScale || v > 0);
    index.set(xi, i);
    // uPlot needs strictly increasing x within a line: keep the last value of a repeated x.
    if (x.length > 0 && x[x.length - 1] === xi) {
      y[y.length - 1] = drawable ? v : null;
      continue;
    }
    x.push(xi);
    y.push(drawable ? v : null);
  }
  return { table: [x, y, line.scatter === true ? y : smoothLine(y, settings.smoothing)], markers, index };
}

/**
 * The points of lines as CSV: one row per point, `line,step,time_ms,value`; a chart of groups adds
 * each point's `std,min,max,runs` (its value is the group's mean).
 */
export function linesToCsv(lines: readonly Line[]): string {
  const quote = (s: string): string => (/[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  // Numbers as JavaScript writes them (full precision, NaN, Infinity), not as the axes show them.
  const number = (v: number | undefined): string => (v === undefined ? "" : String(v));
  const banded = lines.some((l) => l.band !== undefined);
  const rows = [banded ? "line,step,time_ms,value,std,min,max,runs" : "line,step,time_ms,value"];
  for (const line of lines) {
    const b = line.band;
    for (let i = 0; i < line.values.length; i++) {
      const figures = banded
        ? `,${number(b?.std[i])},${number(b?.min[i])},${number(b?.max[i])},${b?.count[i] ?? ""}`
        : "";
      rows.push(
        `${quote(line.label)},${line.steps[i] ?? ""},${line.times[i] ?? ""},${number(line.values[i] ?? NaN)}${figures}`,
      );
    }
  }
  return `${rows.join("\n")}\n`;
}
