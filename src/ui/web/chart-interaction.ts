/**
 * What a chart shows besides its lines, and what the user does with it: the marks of non-finite
 * values, the tooltip's rows and where it goes, the card's buttons (pin, CSV, PNG, remove), downloads.
 */
import type uPlot from "uplot";
import { formatValue } from "./chart-axes.js";
import type { Line, Marker, XMode } from "./chart-data.js";
import { append, el, formatTime } from "./dom.js";
import { visibleName } from "./names.js";

/** Save `blob` as a file named `name` (a download, never a navigation). */
export function download(name: string, blob: Blob): void {
  const url = URL.createObjectURL(blob);
  const a = el("a", { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** What the card's buttons do: `pin` (absent: no pin button), `remove` (absent: no ✕), the CSV and PNG downloads. */
interface ToolActions {
  readonly pin?: () => void;
  readonly remove?: () => void;
  readonly csv: () => void;
  readonly png: () => void;
}

/** The buttons of the card of `key`: pin (when it can be pinned), CSV, PNG, ✕ (when it can be removed). */
export function chartTools(key: string, pinned: boolean, actions: ToolActions): HTMLElement {
  const shown = visibleName(key);
  const tools = el("span", { className: "chart-tools" });
  if (actions.pin !== undefined) {
    const pin = el(
      "button",
      {
        type: "button",
        className: pinned ? "icon pin on" : "icon pin",
        title: pinned ? "unpin" : "pin to the top",
        "aria-pressed": pinned ? "true" : "false",
        "aria-label": `pin ${shown}`,
      },
      pinned ? "★" : "☆",
    );
    pin.addEventListener("click", actions.pin);
    tools.appendChild(pin);
  }
  const csv = el(
    "button",
    { type: "button", className: "icon csv", title: "download the points as CSV", "aria-label": `CSV of ${shown}` },
    "CSV",
  );
  csv.addEventListener("click", actions.csv);
  const png = el(
    "button",
    { type: "button", className: "icon png", title: "download the chart as PNG", "aria-label": `PNG of ${shown}` },
    "PNG",
  );
  png.addEventListener("click", actions.png);
  append(tools, csv, png);
  if (actions.remove !== undefined) {
    const remove = el(
      "button",
      { type: "button", className: "icon remove", title: "remove this chart", "aria-label": `remove ${shown}` },
      "✕",
    );
    remove.addEventListener("click", actions.remove);
    tools.appendChild(remove);
  }
  return tools;
}

/** A safe file name from a key: letters, digits, `._-`; the rest as `_`. */
export function fileNameOf(key: string): string {
  return key.replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^_+|_+$/g, "") || "chart";
}

/** Red marks where a value was NaN or ±Infinity: a dashed line across the plot and a label. */
export function drawMarkers(u: uPlot, markers: readonly Marker[]): void {
  if (markers.length === 0) return;
  const ctx = u.ctx;
  const { left, top, width, height } = u.bbox;
  ctx.save();
  ctx.strokeStyle = "#dc2626";
  ctx.fillStyle = "#dc2626";
  ctx.lineWidth = 1 * devicePixelRatio;
  ctx.setLineDash([3 * devicePixelRatio, 3 * devicePixelRatio]);
  ctx.font = `${10 * devicePixelRatio}px sans-serif`;
  ctx.textAlign = "center";
  let lastX = -Infinity;
  for (const m of markers) {
    const x = u.valToPos(m.x, "x", true);
    if (!Number.isFinite(x) || x < left || x > left + width) continue;
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    if (x - lastX < 24 * devicePixelRatio) continue;
    lastX = x;
    const y =
      m.kind === "+Inf"
        ? top + 10 * devicePixelRatio
        : m.kind === "-Inf"
          ? top + height - 3 * devicePixelRatio
          : top + height / 2;
    ctx.fillText(m.kind, x, y);
  }
  ctx.restore();
}

/** The tooltip's first row: the step (on a step axis) and the point's date and time, in full. */
export function tooltipHead(line: Line, point: number, xMode: XMode): HTMLElement {
  const time = formatTime(line.times[point] ?? null);
  const step = xMode === "step" ? `step ${line.steps[point] ?? ""}${time === "" ? "" : " · "}` : "";
  return el("div", { className: "tip-head" }, `${step}${time}`);
}

/** A group's figures at a point: `± std · min … max · n runs`. */
function bandText(line: Line, point: number): string {
  const b = line.band;
  if (b === undefined) return "";
  const n = b.count[point] ?? 0;
  return ` ± ${formatValue(b.std[point] ?? NaN)} · min ${formatValue(b.min[point] ?? NaN)} · max ${formatValue(b.max[point] ?? NaN)} · ${n} run${n === 1 ? "" : "s"}`;
}

/**
 * One line's row of the tooltip: its swatch, label, value (and smoothed value); its step when the
 * x-axis is not the step, and its own time when it differs from the head's by a second or more.
 * Rows wrap rather than cut anything off.
 */
export function tooltipRow(
  line: Line,
  colour: string,
  point: number,
  smoothed: number | null,
  xMode: XMode,
  headTime: number | null,
): HTMLElement {
  const swatch = el("span", { className: "swatch" });
  swatch.style.background = colour;
  const time = line.times[point] ?? null;
  const ownTime = time !== null && headTime !== null && Math.abs(time - headTime) >= 1000;
  return el(
    "div",
    { className: "tip-row" },
    swatch,
    el("span", { className: "tip-label" }, line.label),
    ` ${formatValue(line.values[point] ?? NaN)}`,
    bandText(line, point),
    smoothed !== null ? ` (smoothed ${formatValue(smoothed)})` : "",
    xMode !== "step" ? ` · step ${line.steps[point] ?? ""}` : "",
    ownTime ? ` · ${formatTime(time)}` : "",
  );
}

/** Put the tooltip beside the cursor (`left`, in the plot), on whichever side has room, inside the card. */
export function placeTooltip(tooltip: HTMLElement, card: HTMLElement, u: uPlot, left: number): void {
  const cardWidth = card.clientWidth;
  const tipWidth = Math.min(tooltip.offsetWidth, cardWidth - 8);
  const at = u.over.getBoundingClientRect().left - card.getBoundingClientRect().left + left;
  const place = at + 16 + tipWidth <= cardWidth - 4 ? at + 16 : at - 16 - tipWidth;
  tooltip.style.left = `${Math.max(4, place)}px`;
}

/** What the step under a chart's cursor is read from: its plot, lines, their indexes by x, the lines hidden. */
type PickState = [
  u: uPlot | null,
  lines: readonly Line[],
  indexes: readonly Map<number, number>[],
  hidden: ReadonlySet<string>,
];

/** A click on `box` that is not the end of a drag (the zoom's) picks the step under the cursor (`onPick`). */
export function listenForPicks(
  box: HTMLElement,
  onPick: ((step: number) => void) | undefined,
  state: () => PickState,
): void {
  if (onPick === undefined) return;
  let down: [number, number] | null = null;
  box.addEventListener("mousedown", (e) => (down = [e.clientX, e.clientY]));
  box.addEventListener("click", (e) => {
    const moved = down === null ? 0 : Math.abs(e.clientX - down[0]) + Math.abs(e.clientY - down[1]);
    const step = moved > 4 ? undefined : stepUnderCursor(...state());
    if (step !== undefined) onPick(step);
  });
}

/** The step of the first shown line's point under the plot's cursor. */
function stepUnderCursor(...[u, lines, indexes, hidden]: PickState): number | undefined {
  const idx = u?.cursor.idx;
  const x = idx === null || idx === undefined ? undefined : u?.data[0]?.[idx];
  if (x === undefined) return undefined;
  for (const [i, line] of lines.entries()) {
    const point = indexes[i]?.get(x);
    if (point !== undefined && !hidden.has(line.id)) return line.steps[point];
  }
  return undefined;
}
