/** The `store` backend's options, declared once (type, names and checks; `option-schema.ts`). */
import { z } from "zod";
import { SYNC_SETTINGS } from "../../sync/settings.js";
import { says, settingOption, type OptionsOf } from "../option-schema.js";

const flag = (): z.ZodOptional<z.ZodBoolean> =>
  z.boolean(says((got, name) => `${name} must be true or false, got ${got}`)).optional();

export const STORE_OPTIONS = {
  /** Write from a worker thread (default true), so SQLite never blocks the loop. */
  worker: flag(),
  /** `finish()` waits for every write (default false: bounded by the deadline). */
  waitForWrites: flag(),
  /** Batches queued for the writer before new ones are dropped and counted (default 256). */
  maxPendingBatches: z
    .number(says((got) => `maxPendingBatches must be a positive integer, got ${got}`))
    .int()
    .min(1)
    .optional(),
  /** Milliseconds between commits (default 200). */
  commitIntervalMs: z
    .number(says((got) => `commitIntervalMs must be a number of milliseconds >= 0, got ${got}`))
    .finite()
    .min(0)
    .optional(),
  /** A team server to stream the run to (`RANKSCOPE_SERVER_URL`; docs/server.md). */
  server: settingOption(SYNC_SETTINGS.server),
  /** A write token of the project (`RANKSCOPE_SERVER_TOKEN`). */
  serverToken: settingOption(SYNC_SETTINGS.serverToken),
  /** The project the token must belong to (`RANKSCOPE_SERVER_PROJECT`; optional). */
  serverProject: settingOption(SYNC_SETTINGS.serverProject),
  /** How often the sync looks at the store (default 1000 ms). */
  syncIntervalMs: settingOption(SYNC_SETTINGS.syncIntervalMs),
  /** How long the run's end waits for the sync to deliver the rest (default 10,000 ms). */
  syncFinishDeadlineMs: settingOption(SYNC_SETTINGS.syncFinishDeadlineMs),
  /** How long one batch is retried before the sync's pass gives up (default 30,000 ms). */
  syncSendDeadlineMs: settingOption(SYNC_SETTINGS.syncSendDeadlineMs),
};

/** Options of the `store` backend (the embedded SQLite store the dashboard reads). */
export type StoreBackendOptions = OptionsOf<typeof STORE_OPTIONS>;
