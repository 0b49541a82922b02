/**
 * Parallel coordinates of the runs table (below it): an axis per hyperparameter that varies across
 * the runs loaded, then the chosen summary metric; a line per run in its colour, thicker when
 * selected. Numbers sit on a linear axis, other values on one level each (at most 24).
 */
import type { ParamValue, RunInfo } from "../api.js";
import { formatValue } from "../chart-axes.js";
import { el } from "../dom.js";
import { visibleName } from "../names.js";
import { runColour, state } from "../state.js";

const SVG = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
  text?: string,
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** One axis of the plot: where a value sits on it (0 bottom … 1 top), and its end labels. */
interface Axis {
  name: string;
  pos: (v: ParamValue | undefined) => number | null;
  low: string;
  high: string;
}

function axisFor(name: string, values: (ParamValue | undefined)[]): Axis | null {
  const present = values.filter(
    (v): v is string | number | boolean =>
      v !== null && v !== undefined && !(typeof v === "number" && !Number.isFinite(v)),
  );
  if (present.length === 0) return null;
  const nums = present.filter((v) => typeof v === "number");
  if (nums.length === present.length) {
    const lo = Math.min(...nums);
    const hi = Math.max(...nums);
    return {
      name,
      pos: (v) => (typeof v === "number" && Number.isFinite(v) ? (hi > lo ? (v - lo) / (hi - lo) : 0.5) : null),
      low: formatValue(lo),
      high: formatValue(hi),
    };
  }
  const levels = [...new Set(present.map(String))].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  if (levels.length > 24) return null;
  return {
    name,
    pos: (v) =>
      v === null || v === undefined ? null : levels.length > 1 ? levels.indexOf(String(v)) / (levels.length - 1) : 0.5,
    low: visibleName(levels[0] ?? ""),
    high: visibleName(levels[levels.length - 1] ?? ""),
  };
}

/** Parallel coordinates: an axis per hyperparameter that varies, then the metric; a line per run in its colour. */
export function parallelCoordinates(runs: RunInfo[], paramKeys: string[], metric: string, width: number): Element {
  const axes: Axis[] = [];
  const paramsOf = (r: RunInfo): Record<string, ParamValue> => r.params ?? {};
  for (const key of paramKeys) {
    const values = runs.map((r) => paramsOf(r)[key]);
    if (new Set(values.map((v) => String(v))).size < 2 && runs.length > 1) continue;
    const axis = axisFor(key, values);
    if (axis !== null) axes.push(axis);
  }
  const metricAxis =
    metric === ""
      ? null
      : axisFor(
          metric,
          runs.map((r) => r.summary?.[metric]),
        );
  if (metricAxis !== null) axes.push(metricAxis);
  if (axes.length < 2 || runs.length === 0)
    return el(
      "p",
      { className: "muted", id: "parcoords-empty" },
      "Parallel coordinates need runs with at least one hyperparameter that varies and a summary metric.",
    );
  const height = 260;
  const top = 34;
  const bottom = 26;
  const left = 50;
  const right = 60;
  const plotH = height - top - bottom;
  const gap = (width - left - right) / (axes.length - 1);
  const root = svg("svg", {
    class: "parcoords",
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": `parallel coordinates of ${axes.length - 1} hyperparameters and ${visibleName(metric)}`,
    "data-axes": axes.length,
    "data-runs": runs.length,
  });
  axes.forEach((axis, i) => {
    const x = left + i * gap;
    root.appendChild(svg("line", { x1: x, x2: x, y1: top, y2: top + plotH, class: "pc-axis" }));
    root.appendChild(
      svg(
        "text",
        {
          x,
          y: top - 18,
          "text-anchor": "middle",
          class: i === axes.length - 1 && metricAxis !== null ? "pc-label pc-metric" : "pc-label",
        },
        visibleName(axis.name),
      ),
    );
    root.appendChild(svg("text", { x, y: top - 5, "text-anchor": "middle", class: "pc-tick" }, axis.high));
    root.appendChild(svg("text", { x, y: top + plotH + 14, "text-anchor": "middle", class: "pc-tick" }, axis.low));
  });
  for (const run of runs) {
    const points: string[] = [];
    axes.forEach((axis, i) => {
      const value = i === axes.length - 1 && metricAxis !== null ? run.summary?.[metric] : paramsOf(run)[axis.name];
      const p = axis.pos(value);
      if (p !== null) points.push(`${(left + i * gap).toFixed(1)},${(top + plotH - p * plotH).toFixed(1)}`);
    });
    if (points.length < 2) continue;
    const path = svg("polyline", {
      points: points.join(" "),
      fill: "none",
      stroke: runColour(run.id),
      "stroke-width": state.selected.includes(run.id) ? 2.5 : 1.2,
      "data-run": run.id,
      class: "pc-line",
    });
    path.appendChild(svg("title", {}, visibleName(run.id)));
    root.appendChild(path);
  }
  return root;
}
