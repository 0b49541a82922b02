/**
 * The app's state: what is selected and how it is viewed (all of it mirrored in the URL, see
 * url.ts), plus what the current view has on screen. Modules change it and call `hooks` to redraw.
 */
import type { RunInfo, RunKeys } from "./api.js";
import type { ChartCard } from "./chart.js";
import type { Line, ViewSettings } from "./chart-data.js";
import type { HistogramCard } from "./histogram.js";
import { assignRunColours } from "./colours.js";

export type Tab = "metrics" | "runs" | "streams" | "system" | "histograms" | "samples" | "logs" | "ranks" | "config" | "traces";
export const TABS: [Tab, string][] = [
  ["metrics", "Metrics"],
  ["runs", "Runs table"],
  ["streams", "Streams"],
  ["system", "System"],
  ["histograms", "Histograms"],
  ["samples", "Samples"],
  ["logs", "Logs"],
  ["ranks", "Ranks"],
  ["config", "Config"],
  ["traces", "Traces"],
];

export const DONE_STATUSES = new Set(["finished", "failed", "crashed", "killed", "completed", "done"]);

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
export interface AppState {
  runs: RunInfo[];
  selected: string[];
  tab: Tab;
  settings: ViewSettings;
  perRank: boolean;
  search: string;
  showInternal: boolean;
  pinned: string[];
  collapsed: string[];
  theme: "light" | "dark";
  /** Runs table: sort column (`-` prefix: descending), filter text, parallel-coordinates metric. */
  sort: string;
  filter: string;
  metric: string;
  /** Runs table: the summary columns the user picked, or null for the default rule (summary-columns.ts). */
  summaryColumns: string[] | null;
  /** Logs tab: the file, the lowest level and the component shown ("" for all), and whether new lines are followed. */
  logs: { file: string; level: string; component: string; follow: boolean };
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
  summaries: Map<string, Record<string, number>>;
}

export const state: AppState = {
  runs: [],
  selected: [],
  tab: "metrics",
  settings: { xMode: "step", xKey: "", smoothing: 0.6, logScale: false, logX: false, zoom: null },
  perRank: true,
  search: "",
  showInternal: false,
  pinned: [],
  collapsed: [],
  theme: "light",
  /** Runs table: sort column (`-` prefix: descending), filter text, parallel-coordinates metric. */
  sort: "",
  filter: "",
  metric: "",
  summaryColumns: null,
  logs: { file: "", level: "", component: "", follow: false },
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
  summaries: new Map(),
};

/** Redraw entry points, set by main.ts (so modules need not import each other in a circle). */
export const hooks = {
  renderView: (): Promise<void> => Promise.resolve(),
  renderRuns: (): void => undefined,
  writeUrl: (): void => undefined,
  showError: (error: unknown): void => {
    void error;
  },
};

export function runById(id: string): RunInfo | undefined {
  return state.runs.find((r) => r.id === id);
}

export function isLive(runId: string): boolean {
  const run = runById(runId);
  return run === undefined || !DONE_STATUSES.has(run.status.toLowerCase());
}

/** The runs' colours, worked out again only when the list of runs changes. */
let colourCache: { signature: string; colours: Map<string, string> } = { signature: "", colours: new Map() };

/** One colour per run, the same in the runs list, the table and every chart, from the run's id (colours.ts). */
export function runColour(run: string): string {
  const signature = state.runs.map((r) => `${r.id}\u0000${r.startedAt ?? ""}`).join("\u0001");
  if (signature !== colourCache.signature) colourCache = { signature, colours: assignRunColours(state.runs) };
  return colourCache.colours.get(run) ?? assignRunColours([{ id: run, startedAt: null }]).get(run) ?? "#333";
}
