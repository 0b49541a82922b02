/**
 * The app's state: what is selected and how it is viewed (all of it mirrored in the URL, see
 * url.ts), plus what the current view has on screen. Modules change it and call `hooks` to redraw.
 */
import type { RunInfo, RunKeys } from "./api.js";
import type { ChartCard } from "./chart.js";
import type { Line, ViewSettings } from "./chart-data.js";
import type { HistogramCard } from "./histogram.js";
import { assignRunColours, colourFromEarliest } from "./colours.js";

/** The band drawn around a group's mean: ± one standard deviation, min to max, or none. */
export type Band = "std" | "minmax" | "none";

export type Tab =
  | "metrics"
  | "inference"
  | "runs"
  | "streams"
  | "system"
  | "histograms"
  | "samples"
  | "logs"
  | "ranks"
  | "alerts"
  | "config"
  | "traces";
export const TABS: [Tab, string][] = [
  ["metrics", "Metrics"],
  ["inference", "Inference"],
  ["runs", "Runs table"],
  ["streams", "Streams"],
  ["system", "System"],
  ["histograms", "Histograms"],
  ["samples", "Samples"],
  ["logs", "Logs"],
  ["ranks", "Ranks"],
  ["alerts", "Alerts"],
  ["config", "Config"],
  ["traces", "Traces"],
];

const DONE_STATUSES = new Set(["finished", "failed", "crashed", "killed", "completed", "done"]);

/** Where a drawn line's points come from, so polling can ask for what came after. */
export interface LineSource {
  kind: "series" | "stream" | "system";
  run: string;
  key: string;
  rank: number | undefined;
  cursor: string | null;
  card: ChartCard;
  line: Line;
}

/** The app's state: the view (what the URL says) and what it has loaded. */
interface AppState {
  /** Every run the app has a row of (pages of the runs list and table, the selected runs), by id. */
  knownRuns: Map<string, RunInfo>;
  /** The earliest-started runs of the root, which decide the run colours (colours.ts). */
  earliestRuns: RunInfo[];
  selected: string[];
  tab: Tab;
  settings: ViewSettings;
  perRank: boolean;
  search: string;
  showInternal: boolean;
  pinned: string[];
  /** Metrics tab: charts of several keys each (`combine=train/loss,val/loss`), drawn first in a "Combined" section. */
  combined: string[][];
  collapsed: string[];
  theme: "light" | "dark";
  /** Runs table: sort column (`-` prefix: descending), filter text, parallel-coordinates metric. */
  sort: string;
  filter: string;
  metric: string;
  /** Runs table: the summary columns the user picked, or null for the default rule (summary-columns.ts). */
  summaryColumns: string[] | null;
  /** Metrics tab: group the selected runs by these fields (`param:lr`, `group`, …): a line per group. */
  groupBy: string[];
  /** What the band around a group's mean shows. */
  band: Band;
  /** Logs tab: the file, the lowest level and the component shown ("" for all), and whether new lines are followed. */
  logs: { file: string; level: string; component: string; follow: boolean };
  /** Inference tab: the flush its distributions and slowest replicas show (`step=`), null for the newest. */
  inferenceStep: number | null;
  /** Bumped on every view change so late answers for an old view are dropped. */
  generation: number;
  cards: ChartCard[];
  histogramCards: HistogramCard[];
  lineSources: Map<string, LineSource>;
  keySignature: string;
  firstGridMarked: boolean;
  /** Runs that ended since the last poll and get one more. */
  finalPoll: Set<string>;
  keysByRun: Map<string, RunKeys>;
  /** Whether a selected run has inference keys: the Inference tab is shown only then (or when it is the tab open). */
  hasInference: boolean;
  summaries: Map<string, Record<string, number>>;
}

export const state: AppState = {
  knownRuns: new Map(),
  earliestRuns: [],
  selected: [],
  tab: "metrics",
  settings: { xMode: "step", xKey: "", smoothing: 0.6, logScale: false, logX: false, zoom: null },
  perRank: true,
  search: "",
  showInternal: false,
  pinned: [],
  combined: [],
  collapsed: [],
  theme: "light",
  /** Runs table: sort column (`-` prefix: descending), filter text, parallel-coordinates metric. */
  sort: "",
  filter: "",
  metric: "",
  summaryColumns: null,
  groupBy: [],
  band: "std",
  logs: { file: "", level: "", component: "", follow: false },
  inferenceStep: null,
  /** Bumped on every view change so late answers for an old view are dropped. */
  generation: 0,
  cards: [],
  histogramCards: [],
  lineSources: new Map(),
  keySignature: "",
  firstGridMarked: false,
  /** Runs that ended since the last poll and get one more. */
  finalPoll: new Set(),
  keysByRun: new Map(),
  hasInference: false,
  summaries: new Map(),
};

/** Redraw entry points, set by main.ts (so modules need not import each other in a circle). */
export const hooks = {
  renderView: (): Promise<void> => Promise.resolve(),
  renderRuns: (): void => undefined,
  writeUrl: (): void => undefined,
  switchTab: (tab: Tab): void => {
    void tab;
  },
  showError: (error: unknown): void => {
    void error;
  },
};

export function runById(id: string): RunInfo | undefined {
  return state.knownRuns.get(id);
}

/** Remember rows the server sent. */
export function knowRuns(rows: readonly RunInfo[]): void {
  for (const row of rows) state.knownRuns.set(row.id, row);
}

export function isLive(runId: string): boolean {
  const run = runById(runId);
  return run === undefined || !DONE_STATUSES.has(run.status.toLowerCase());
}

/** The earliest runs' colours, worked out again only when those runs change. */
let colourCache: { of: RunInfo[] | null; colours: Map<string, string> } = { of: null, colours: new Map() };

/** One colour per run, the same in the runs list, the table and every chart, from the run's id (colours.ts). */
export function runColour(run: string): string {
  if (colourCache.of !== state.earliestRuns)
    colourCache = { of: state.earliestRuns, colours: assignRunColours(state.earliestRuns) };
  return colourFromEarliest(run, state.earliestRuns, colourCache.colours);
}
