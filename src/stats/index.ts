/** AReaL's stats face: trackers, scopes, masked statistics, scalars with counts, timings. */
export {
  stats,
  StatsTracker,
  StatReduce,
  type StatReduceName,
  type Mask,
  type StatValues,
  type StatOptions,
  type ScopeHandle,
} from "./tracker.js";
export { AVG_MIN_MAX, registerStatsReductions, type AvgMinMaxState } from "./reductions.js";
