/**
 * The sync's settings, each an option of the `store` backend or its environment variable (through
 * `resolveSetting`): the server and its token turn the live sync on.
 */
import { integerKind, resolveSetting, textKind } from "../core/settings.js";

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

/** The store options that configure the sync. */
export const SYNC_OPTIONS = ["server", "serverToken", "serverProject", "syncIntervalMs", "syncFinishDeadlineMs", "syncSendDeadlineMs"] as const;

const OWNER = "store backend";

/** The live sync's settings, or null when no server is configured; a TypeError for an invalid value. */
export function resolveSyncSettings(options: Readonly<Record<string, unknown>>): LiveSyncSettings | null {
  const url = resolveSetting<string | undefined>({ owner: OWNER, option: "server", env: "RANKSCOPE_SERVER_URL", kind: textKind(/^https?:\/\/\S+$/, "an http:// or https:// URL"), fallback: undefined }, options["server"]);
  if (url === undefined) return null;
  const token = resolveSetting<string | undefined>({ owner: OWNER, option: "serverToken", env: "RANKSCOPE_SERVER_TOKEN", kind: textKind(), fallback: undefined, secret: true }, options["serverToken"]);
  if (token === undefined) throw new TypeError(`${OWNER}: a server is set (${url}) but no token; set serverToken or RANKSCOPE_SERVER_TOKEN to a write token of the project (rankscope server token create --project P --scope write)`);
  const project = resolveSetting<string | undefined>({ owner: OWNER, option: "serverProject", env: "RANKSCOPE_SERVER_PROJECT", kind: textKind(), fallback: undefined }, options["serverProject"]);
  const intervalMs = resolveSetting({ owner: OWNER, option: "syncIntervalMs", env: "RANKSCOPE_SYNC_INTERVAL_MS", kind: integerKind(10, 3_600_000), fallback: 1000 }, options["syncIntervalMs"]);
  const finishDeadlineMs = resolveSetting({ owner: OWNER, option: "syncFinishDeadlineMs", env: "RANKSCOPE_SYNC_FINISH_DEADLINE_MS", kind: integerKind(0, 3_600_000), fallback: 10_000 }, options["syncFinishDeadlineMs"]);
  const sendDeadlineMs = resolveSetting({ owner: OWNER, option: "syncSendDeadlineMs", env: "RANKSCOPE_SYNC_SEND_DEADLINE_MS", kind: integerKind(100, 3_600_000), fallback: 30_000 }, options["syncSendDeadlineMs"]);
  return { url, token, project, intervalMs, finishDeadlineMs, sendDeadlineMs };
}
