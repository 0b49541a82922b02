/**
 * What a report (`rankscope report`, docs/report.md) carries: the answers the dashboard's API
 * would give for its runs, frozen. `report.ts` (Node) fills it from a `DashboardSource`; the web
 * app (`web/frozen.ts`) answers its own requests from it instead of fetching. Both sides import
 * this file, so it holds types and pure functions only (no Node, no DOM).
 */

/** The id of the `<script>` element holding a report's data (gzip, then base64). */
export const REPORT_DATA_ID = "rankscope-report-data";

/** A column of numbers: whole numbers as differences from the one before (`d`), others as they are (`a`). */
export type NumberColumn = { readonly d: number[] } | { readonly a: Array<number | string> };

/** One line's points as the report keeps them (NaN and ±Infinity as the API spells them). */
export interface ReportLine {
  readonly steps: NumberColumn;
  readonly times: NumberColumn;
  readonly values: Array<number | string>;
  /** True when the store downsampled it to the report's points per line. */
  readonly downsampled: boolean;
}

/** A stream key's raw values (`per_rank_no_reduce`), every rank's, as `/api/lines?kind=stream` answers them. */
export interface ReportStream {
  readonly ranks: NumberColumn;
  readonly steps: NumberColumn;
  readonly times: NumberColumn;
  readonly values: Array<number | string>;
}

/** One line of a run: `g` the key's global line (a request without a rank), else the rank's number. */
export type LineId = "g" | `${number}`;

/** A key's histograms: the newest of any line (`limit=1`), and each line's newest ones. */
export interface ReportHistograms {
  readonly latest: unknown;
  readonly byRank: Record<string, unknown>;
}

/** What a report holds of one run: each endpoint's answer for it. */
export interface ReportRun {
  /** `/api/keys?run=`. */
  readonly keys: unknown;
  /** `/api/summary?run=&internal=1`: the last value of every scalar key. */
  readonly summary: Record<string, number | string>;
  /** Scalar lines by key, then by line. */
  readonly lines: Record<string, Record<string, ReportLine>>;
  /** System metrics (GPU/CPU monitor) by key, over wall time. */
  readonly system: Record<string, ReportLine>;
  /** Stream keys' raw values by key. */
  readonly streams: Record<string, ReportStream>;
  readonly alerts: unknown[];
  readonly samples: unknown[];
  /** `/api/config?run=` (secrets redacted). */
  readonly config: unknown;
  /** `/api/ranks?run=`, or null when the run keeps no per-rank timings. */
  readonly ranks: unknown;
  readonly histograms: Record<string, ReportHistograms>;
}

/** What the report says it is made of (shown at its top, and kept in its data). */
export interface ReportMade {
  /** Milliseconds since the epoch. */
  readonly at: number;
  readonly rankscope: string;
  readonly title: string;
  readonly runs: ReadonlyArray<{ readonly id: string; readonly status: string; readonly started: number | null }>;
  /** Points kept per line at most (the store's downsampling: min, max and last per bucket). */
  readonly pointsPerLine: number;
}

/** A report's data: the dashboard's answers and the view it opens on. */
export interface ReportData {
  readonly made: ReportMade;
  /** The dashboard URL fragment the report opens on (runs, tab, search, smoothing, x-axis, …). */
  readonly hash: string;
  /** `/api/version`. */
  readonly version: { readonly rankscope: string; readonly node: string };
  /** `/api/runs?summary=1&internal=1`'s runs, in the order listed. */
  readonly runs: unknown[];
  readonly perRun: Record<string, ReportRun>;
  /** When the view groups its runs (`groupby=`): `/api/groups`' answer for each key, grouped by `by`. */
  readonly groups?: { readonly by: readonly string[]; readonly byKey: Record<string, unknown> };
}

/** `values` as a column: differences when every one is a safe integer (steps, wall times in ms). */
export function encodeColumn(values: readonly number[]): NumberColumn {
  if (!values.every((v) => Number.isSafeInteger(v))) return { a: values.map(jsonNumber) };
  const d = new Array<number>(values.length);
  let last = 0;
  values.forEach((v, i) => {
    d[i] = v - last;
    last = v;
  });
  return { d };
}

/** The numbers of a column. */
export function decodeColumn(column: NumberColumn): Array<number | string> {
  if ("a" in column) return column.a;
  const out = new Array<number>(column.d.length);
  let sum = 0;
  column.d.forEach((delta, i) => {
    sum += delta;
    out[i] = sum;
  });
  return out;
}

/** A number as the API's JSON carries it: NaN and ±Infinity by name. */
export function jsonNumber(value: number): number | string {
  return Number.isFinite(value) ? value : String(value);
}
