/**
 * The sync's settings, each an option of the `store` backend or its environment variable (through
 * `resolveSetting`): the server and its token turn the live sync on. Declared once here; the store's
 * option shape (`backends/store/options.ts`) checks the options with the same kinds.
 */
import { integerKind, resolveSetting, textKind, type Setting } from "../core/settings.js";

/** The live sync's settings, resolved. */
export interface LiveSyncSettings {
  readonly url: string;
  readonly token: string;
  readonly project: string | undefined;
  /** How often the sync looks at the store (default 1000 ms). */
  readonly intervalMs: number;
  /** How long the job's end waits for the last data to reach the server (default 10 s); the rest is left for `rankscope sync`. */
  readonly finishDeadlineMs: number;
  /** How long one batch is retried before a pass gives up and the next pass tries again (default 30 s). */
  readonly sendDeadlineMs: number;
}

const OWNER = "store backend";

/** Each sync setting: its store option, variable, kind and default. */
export const SYNC_SETTINGS = {
  server: {
    owner: OWNER,
    option: "server",
    env: "RANKSCOPE_SERVER_URL",
    kind: textKind(/^https?:\/\/\S+$/, "an http:// or https:// URL"),
    fallback: undefined,
  },
  serverToken: {
    owner: OWNER,
    option: "serverToken",
    env: "RANKSCOPE_SERVER_TOKEN",
    kind: textKind(),
    fallback: undefined,
    secret: true,
  },
  serverProject: {
    owner: OWNER,
    option: "serverProject",
    env: "RANKSCOPE_SERVER_PROJECT",
    kind: textKind(),
    fallback: undefined,
  },
  syncIntervalMs: {
    owner: OWNER,
    option: "syncIntervalMs",
    env: "RANKSCOPE_SYNC_INTERVAL_MS",
    kind: integerKind(10, 3_600_000),
    fallback: 1000,
  },
  syncFinishDeadlineMs: {
    owner: OWNER,
    option: "syncFinishDeadlineMs",
    env: "RANKSCOPE_SYNC_FINISH_DEADLINE_MS",
    kind: integerKind(0, 3_600_000),
    fallback: 10_000,
  },
  syncSendDeadlineMs: {
    owner: OWNER,
    option: "syncSendDeadlineMs",
    env: "RANKSCOPE_SYNC_SEND_DEADLINE_MS",
    kind: integerKind(100, 3_600_000),
    fallback: 30_000,
  },
} satisfies Record<string, Setting<string | undefined> | Setting<number>>;

/** The live sync's settings, or null when no server is configured; a TypeError for an invalid value. */
export function resolveSyncSettings(options: Readonly<Record<string, unknown>>): LiveSyncSettings | null {
  const url = resolveSetting<string | undefined>(SYNC_SETTINGS.server, options["server"]);
  if (url === undefined) return null;
  const token = resolveSetting<string | undefined>(SYNC_SETTINGS.serverToken, options["serverToken"]);
  if (token === undefined)
    throw new TypeError(
      `${OWNER}: a server is set (${url}) but no token; set serverToken or RANKSCOPE_SERVER_TOKEN to a write token of the project (rankscope server token create --project P --scope write)`,
    );
  const project = resolveSetting<string | undefined>(SYNC_SETTINGS.serverProject, options["serverProject"]);
  const intervalMs = resolveSetting(SYNC_SETTINGS.syncIntervalMs, options["syncIntervalMs"]);
  const finishDeadlineMs = resolveSetting(SYNC_SETTINGS.syncFinishDeadlineMs, options["syncFinishDeadlineMs"]);
  const sendDeadlineMs = resolveSetting(SYNC_SETTINGS.syncSendDeadlineMs, options["syncSendDeadlineMs"]);
  return { url, token, project, intervalMs, finishDeadlineMs, sendDeadlineMs };
}
