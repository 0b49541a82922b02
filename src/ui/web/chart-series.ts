/**
 * A chart card's lines as uPlot draws them: one joined table, and per line its series — scatter,
 * plain, or smoothed on top of its raw values drawn faint — then its group's band (two undrawn
 * edges with the space between filled); with each line's series indexes, its non-finite markers and
 * its points by x, which the card's legend, visibility and tooltip use.
 */
import uPlot from "uplot";
import { bandTable, lineTable, type Line, type Marker, type ViewSettings } from "./chart-data.js";
import { RUN_PALETTE } from "./colours.js";
import { smoothingFor } from "./smooth.js";

/** A chart without run colours: the first ten run colours (matplotlib's "tab10"). */
const PALETTE = RUN_PALETTE.slice(0, 10);

/** The colour of the i-th line of a chart without run colours. */
export function lineColour(i: number): string {
  return PALETTE[i % PALETTE.length] ?? "#333";
}

function faint(colour: string): string {
  return `${colour}40`;
}

/** What a chart draws: the joined table, its series (and which are lines, raw lines, band edges), bands, markers and point indexes. */
export interface BuiltData {
  data: uPlot.AlignedData;
  series: uPlot.Series[];
  topSeries: number[];
  rawSeries: (number | null)[];
  bandSeries: ([number, number] | null)[];
  bands: uPlot.Band[];
  markers: Marker[];
  indexes: Map<number, number>[];
}

/** Add one line's series to `out` and its table's columns to `joinInput`: scatter, smoothed (with its raw line faint) or plain, then its group band if it has one. */
function addLineSeries(
  out: BuiltData,
  joinInput: uPlot.AlignedData[],
  line: Line,
  table: ReturnType<typeof lineTable>["table"],
  colour: string,
  show: boolean,
  settings: ViewSettings,
): void {
  const { series, rawSeries } = out;
  if (line.scatter === true) {
    joinInput.push([table[0], table[1]]);
    series.push({
      label: line.label,
      show,
      stroke: colour,
      fill: colour,
      paths: () => null,
      points: { show: true, size: 4, stroke: colour, fill: colour },
    });
    rawSeries.push(null);
  } else if (settings.smoothing > 0) {
    joinInput.push([table[0], table[1], table[2]]);
    series.push(lineSeries(`${line.label} (raw)`, show, faint(colour), 1, line.dash));
    rawSeries.push(series.length - 1);
    series.push(lineSeries(line.label, show, colour, 1.5, line.dash));
  } else {
    joinInput.push([table[0], table[1]]);
    series.push(lineSeries(line.label, show, colour, 1.5, line.dash));
    rawSeries.push(null);
  }
  out.topSeries.push(series.length - 1);
  addBand(out, joinInput, line, colour, show, settings);
}

/** A drawn (or, at width 0, undrawn) line without points, broken at gaps. */
function lineSeries(label: string, show: boolean, stroke: string, width: number, dash?: number[]): uPlot.Series {
  return {
    label,
    show,
    stroke,
    width,
    spanGaps: false,
    points: { show: false },
    ...(dash !== undefined ? { dash } : {}),
  };
}

/** A group's band: its low and high edges as two undrawn series, the space between filled (null in `bandSeries` when the line has none). */
function addBand(
  out: BuiltData,
  joinInput: uPlot.AlignedData[],
  line: Line,
  colour: string,
  show: boolean,
  settings: ViewSettings,
): void {
  const { series } = out;
  const edges = bandTable(line, settings);
  if (edges === null) {
    out.bandSeries.push(null);
    return;
  }
  joinInput.push(edges);
  series.push(lineSeries(`${line.label} (low)`, show, "transparent", 0));
  series.push(lineSeries(`${line.label} (high)`, show, "transparent", 0));
  const pair: [number, number] = [series.length - 2, series.length - 1];
  out.bandSeries.push(pair);
  out.bands.push({ series: [pair[1], pair[0]], fill: `${colour}33` });
}

/** The lines' table and series, `colourOf(i)` the i-th line's colour, the `hidden` lines (by id) not shown. */
export function buildSeries(
  lines: readonly Line[],
  settings: ViewSettings,
  colourOf: (i: number) => string,
  hidden: ReadonlySet<string>,
): BuiltData {
  const built = lines.map((l) => lineTable(l, settings));
  const joinInput: uPlot.AlignedData[] = [];
  const out: BuiltData = {
    data: [[]],
    series: [{}],
    topSeries: [],
    rawSeries: [],
    bandSeries: [],
    bands: [],
    markers: [],
    indexes: [],
  };
  lines.forEach((line, i) => {
    const table = built[i]?.table;
    if (table === undefined) return;
    addLineSeries(out, joinInput, line, table, colourOf(i), !hidden.has(line.id), settings);
  });
  const [only, ...more] = joinInput;
  out.data = only === undefined ? [[]] : more.length === 0 ? only : uPlot.join(joinInput);
  out.markers = built.flatMap((b) => b.markers);
  out.indexes = built.map((b) => b.index);
  return out;
}

/**
 * The smoothing weight the shortest smoothed line is drawn with (smooth.ts: a line is smoothed over
 * at most a tenth of its points), and its finite points.
 */
export function drawnSmoothing(lines: readonly Line[], weight: number): { drawn: number; fewest: number } {
  let fewest = Infinity;
  for (const line of lines) {
    if (line.scatter === true) continue;
    let n = 0;
    for (const v of line.values) if (Number.isFinite(v)) n++;
    fewest = Math.min(fewest, n);
  }
  return { drawn: Number.isFinite(fewest) ? smoothingFor(weight, fewest) : weight, fewest };
}
