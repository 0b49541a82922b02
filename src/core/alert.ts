/**
 * What an alert is, as every side reads it: the alerts engine that raises it (src/alerts), the
 * backends that record it (the store, for the dashboard), the webhook that carries it, a rank that
 * hands the user's own `alert()` calls to the controller (the transport), and the dashboard that
 * shows it. Types and constants only, no Node API: the web app reads them too.
 */

/** How serious an alert is. */
export type AlertLevel = "info" | "warning" | "error";

/** The valid levels, in the order error messages list them. */
export const ALERT_LEVELS = ["info", "warning", "error"] as const satisfies readonly AlertLevel[];

/** Longest title and text of a user's `alert()` (longer ones are cut where called, refused when received). */
export const MAX_ALERT_TITLE = 200;
export const MAX_ALERT_TEXT = 4000;

/** At most this many `alert()` calls wait in a process for its next flush, and ride in one answer. */
export const MAX_QUEUED_ALERTS = 100;

/**
 * `firing` when a rule's condition starts, `resolved` when it ends, `ended` when the run ended
 * (`shutdown()`) while it was still firing: an episode has one firing and at most one of the other two.
 */
export type AlertState = "firing" | "resolved" | "ended";

/** The valid states, in the order messages list them. */
export const ALERT_STATES = ["firing", "resolved", "ended"] as const satisfies readonly AlertState[];

/**
 * One alert event: a rule's episode starting (`firing`) or ending (`resolved`, or `ended` with the
 * run), or a user's own
 * `alert()` call (rule `user`, firing only). This is the webhook's JSON body (plus `text` in the
 * Slack format), the store's record and the dashboard's row.
 */
export interface AlertEvent {
  /** Identifies the episode: its `firing` and `resolved` events share it (`nonfinite:loss#1`). */
  readonly id: string;
  /** The rule's name: `nonfinite`, `rank_lost`, `stalled`, `straggler`, a user rule's name, or `user`. */
  readonly rule: string;
  readonly level: AlertLevel;
  /** The run, as the dashboard names it: `experiment/trial`. */
  readonly run: string;
  /** The step of the flush that saw it (the last flushed step for `stalled` and `user`); null before the first flush. */
  readonly step: number | null;
  /** The metric key, for rules about a key. */
  readonly key?: string;
  /** The rank, for rules about a rank (its number, its name, and its host when known). */
  readonly rank?: number;
  readonly rankName?: string;
  readonly host?: string;
  /** The value that started (or ended) the episode; NaN and ±Infinity included (JSON: the strings "NaN", "Infinity", "-Infinity"). */
  readonly value?: number;
  /** A sentence saying what happened, for people. */
  readonly message: string;
  readonly state: AlertState;
  /** When, in milliseconds since the epoch (as every timestamp of the pipeline). */
  readonly at: number;
  /** The title of a user's `alert(title, text)`. */
  readonly title?: string;
}

/**
 * A user's `alert(title, text, level)` made in a process without the controller's alerts (a
 * rank): it waits in that process and reaches the controller with its next flush answer.
 */
export interface UserAlertCall {
  readonly title: string;
  readonly text: string;
  readonly level: AlertLevel;
  /** When it was called, in milliseconds since the epoch. */
  readonly at: number;
  /** The rank that called it (filled in by the rank that sends it). */
  readonly rankName?: string;
}
