/**
 * The dashboard's data from the `store` backend's SQLite files (adapter over its reader).
 */
import type { DashboardSource } from "./source.js";

/** A source reading each run's `metrics.db`. */
export function createStoreSource(): DashboardSource {
  throw new Error("the store reader is not available yet");
}
