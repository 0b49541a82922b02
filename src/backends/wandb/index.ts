/**
 * `rankscope/wandb`: the Weights & Biases backend (our own HTTP client of W&B's API), its offline
 * spool, and `syncSpool` behind `rankscope wandb sync`. Loaded lazily: importing `rankscope` does
 * not load it; a config that names `wandb` does.
 */
import { registerBackend } from "../backend.js";
import { validateWandbOptions, WANDB_OPTIONS } from "./options.js";
import { WandbBackend } from "./wandb-backend.js";

registerBackend("wandb", (options) => new WandbBackend(options), { options: WANDB_OPTIONS, validate: validateWandbOptions, destinationOptions: ["baseUrl"] });

export { WandbBackend, type SharedRunMetadata } from "./wandb-backend.js";
export { RunWriter, type RunTarget, type WriterStats } from "./run-writer.js";
export { syncSpool, type SyncOptions, type SyncProgress, type SyncResult } from "./sync.js";
export { findSpools, readSpool, spoolDirFor, type SpoolRunInfo, type SpooledRun } from "./spool.js";
export { historyLine, historyNumber, histogramJson } from "./history.js";
export { PRIMARY_CLIENT_ID, UPSERT_BUCKET, RUN_RESUME_STATUS, HISTORY_FILE, SUMMARY_FILE, type FileStreamBody, type UpsertVariables } from "./api.js";
export {
  DEFAULT_BASE_URL,
  DEFAULT_LIMITS,
  resolveWandbOptions,
  validateWandbOptions,
  type SenderLimits,
  type WandbMode,
  type WandbOptions,
  type WandbResume,
} from "./options.js";
