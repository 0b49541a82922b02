/**
 * `rankscope/wandb`: the Weights & Biases backend (our own HTTP client of W&B's API), its offline
 * spool, and `syncSpool` behind `rankscope wandb sync`. Loaded lazily: importing `rankscope` does
 * not load it; a config that names `wandb` does.
 */
import { registerBackend } from "../backend.js";
import { validateWandbOptions, WANDB_OPTIONS } from "./options.js";
import { WandbBackend } from "./wandb-backend.js";

registerBackend("wandb", (options) => new WandbBackend(options), {
  options: WANDB_OPTIONS,
  validate: validateWandbOptions,
  destinationOptions: ["baseUrl"],
});

export { WandbBackend } from "./wandb-backend.js";
export type { WriterStats } from "./writer/run-writer.js";
export { syncSpool, type SyncOptions, type SyncProgress, type SyncResult } from "./sync/sync.js";
export { findSpools, readSpool, type SpoolRunInfo, type SpooledRun } from "./spool/spool.js";
export type { WandbMode, WandbOptions, WandbResume } from "./options.js";
