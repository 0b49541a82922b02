/**
 * `rankscope/ui`: the dashboard server from code (`rankscope ui` from the shell), and the types
 * of its JSON API. docs/dashboard.md.
 */
export { startDashboard, DEFAULT_UI_PORT, type Dashboard, type DashboardOptions } from "./server.js";
export type {
  DashboardRun,
  DashboardSource,
  HistogramEntry,
  KeyInfo,
  LabelledRun,
  RunDetails,
  RunLabels,
  RunQuery,
  RunsPage,
  RunSummary,
  SampleRow,
  SeriesData,
  SeriesQuery,
  StreamData,
  TraceFile,
  TraceFileEntry,
} from "./source.js";
