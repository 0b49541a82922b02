/**
 * Hyperparameters, one rule for every sink. They are kept nested as given (`{ model: { layers: 4 } }`),
 * whether they come from `initBackends(config, { runConfig })`, `MetricLogger.logHyperparams` or
 * the facade's `Logger.logHyperparams`; each call merges into the run's earlier ones name by name
 * at every depth (a later value replaces an earlier one of the same name, the others stay). A sink
 * that needs flat names joins the path with `.` (`model.layers`: TensorBoard's HParams, the
 * dashboard's runs table and Config tab, W&B's own display of a nested config), so a name reads
 * the same everywhere. Arrays and other values are leaves.
 */
import { isRecord } from "./json.js";

/** A plain object (not an array, a Date, a typed array, a class instance): merged by name. */
function isPlainRecord(value: unknown): value is Record<string, unknown> {
  if (!isRecord(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** `earlier` with `later` merged in at every depth; neither is changed. */
export function mergeHyperparams(
  earlier: Readonly<Record<string, unknown>>,
  later: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...earlier };
  for (const [name, value] of Object.entries(later)) {
    const before = out[name];
    out[name] = isPlainRecord(before) && isPlainRecord(value) ? mergeHyperparams(before, value) : value;
  }
  return out;
}
