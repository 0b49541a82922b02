/**
 * `alert(title, text, level)`: the user's own alerts, from any process of the job. On the
 * controller (where the logger lives) an alert is delivered at once; in a rank it waits in the
 * process and reaches the controller with the rank's next flush answer, which delivers it like
 * its own. Either way it is recorded and sent the way rule alerts are (docs/alerts.md).
 */
import {
  ALERT_LEVELS,
  MAX_ALERT_TEXT,
  MAX_ALERT_TITLE,
  MAX_QUEUED_ALERTS,
  type AlertLevel,
  type UserAlertCall,
} from "../core/alert.js";
import { reportError } from "../core/diagnostics.js";
import { peekProcessWide, processWide, setProcessWide } from "../core/process-wide.js";
import { describeValue } from "../core/settings.js";

/** The slot of the controller's handler, set while a logger with its alerts runs in this process. */
const HANDLER = "alerts.userHandler";

function queue(): UserAlertCall[] {
  return processWide("alerts.userQueue", (): UserAlertCall[] => []);
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * Raise an alert of your own (W&B's `wandb.alert`): recorded in the run (the console and text
 * log, the store: the dashboard's banner and Alerts tab) and POSTed to the alerts webhook if one
 * is set, as `{ rule: "user", title, message: "title: text", level, state: "firing", … }`. Never
 * rate limited, never blocks, never throws for a delivery problem (those are counted).
 *
 * Works in any process of the job: on the controller it is delivered now; in a rank (a spawned
 * process or thread rank, a `joinRun` process) it goes to the controller with the rank's next
 * flush answer (at most 100 wait; beyond that the oldest is dropped and counted).
 *
 * @param title A short headline (non-empty; cut at 200 characters).
 * @param text  What happened (cut at 4,000 characters); default empty.
 * @param level `info` (default), `warning` or `error`.
 * @throws TypeError when `title` is not a non-empty string, `text` not a string, or `level` not a level.
 */
export function alert(title: string, text = "", level: AlertLevel = "info"): void {
  if (typeof title !== "string" || title.trim() === "")
    throw new TypeError(`alert(title, text, level): title must be a non-empty string, got ${describeValue(title)}`);
  if (typeof text !== "string")
    throw new TypeError(`alert(title, text, level): text must be a string, got ${describeValue(text)}`);
  if (!ALERT_LEVELS.some((l) => l === level))
    throw new TypeError(
      `alert(title, text, level): level must be one of ${ALERT_LEVELS.join(", ")}, got ${describeValue(level)}`,
    );
  const call: UserAlertCall = {
    title: cut(title, MAX_ALERT_TITLE),
    text: cut(text, MAX_ALERT_TEXT),
    level,
    at: Date.now(),
  };
  const handler = peekProcessWide<(call: UserAlertCall) => void>(HANDLER);
  if (handler !== undefined) {
    handler(call);
    return;
  }
  const waiting = queue();
  if (waiting.length >= MAX_QUEUED_ALERTS) {
    waiting.shift();
    reportError(
      "alerts.userQueueFull",
      `more than ${MAX_QUEUED_ALERTS} alert() calls waited in this process for its next flush; the oldest are dropped and counted`,
    );
  }
  waiting.push(call);
}

/**
 * `earlier` then `later` (alerts carried over a late answer, or merged from a host's ranks), the
 * newest `MAX_QUEUED_ALERTS` of them: what one answer may carry. Older ones are dropped and counted
 * (`alerts.carriedFull` in the diagnostics, named by `where`).
 */
export function newestAlerts(
  earlier: readonly UserAlertCall[] | undefined,
  later: readonly UserAlertCall[] | undefined,
  where: string,
): UserAlertCall[] {
  const all = [...(earlier ?? []), ...(later ?? [])];
  if (all.length <= MAX_QUEUED_ALERTS) return all;
  reportError(
    "alerts.carriedFull",
    `${where}: ${all.length - MAX_QUEUED_ALERTS} alert() calls beyond the ${MAX_QUEUED_ALERTS} one answer carries were dropped (the oldest) and counted`,
  );
  return all.slice(-MAX_QUEUED_ALERTS);
}

/** True when alerts wait in this process for its next flush answer. */
export function hasQueuedAlerts(): boolean {
  return (peekProcessWide<UserAlertCall[]>("alerts.userQueue")?.length ?? 0) > 0;
}

/** Take the alerts waiting in this process (a rank's flush answer carries them). */
export function takeQueuedAlerts(): UserAlertCall[] {
  const waiting = peekProcessWide<UserAlertCall[]>("alerts.userQueue");
  return waiting === undefined ? [] : waiting.splice(0, waiting.length);
}

/**
 * Deliver this process's `alert()` calls to `handler` from now on (the controller's alerts),
 * alerts already waiting first. Returns a function that stops it (at the logger's shutdown).
 */
export function handleUserAlerts(handler: (call: UserAlertCall) => void): () => void {
  setProcessWide(HANDLER, handler);
  for (const call of takeQueuedAlerts()) handler(call);
  return () => {
    if (peekProcessWide(HANDLER) === handler) setProcessWide(HANDLER, undefined);
  };
}
