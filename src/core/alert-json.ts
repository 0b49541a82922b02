/**
 * An alert event as JSON text, read back: what the store keeps of each event, what the sync sends
 * the team server and what PostgreSQL keeps (docs/alerts.md). One reader for all three, checked
 * field by field, so a damaged row or a forged batch is never shown as an alert.
 */
import { ALERT_LEVELS, ALERT_STATES, type AlertEvent, type AlertLevel, type AlertState } from "./alert.js";
import { parseNumber, parseRecord } from "./json.js";

/** Longest stored event's JSON, and longest text of one of its fields (a user alert's message is its title and text). */
export const MAX_ALERT_JSON = 65_536;
const MAX_FIELD = 16_384;

function text(v: unknown): v is string {
  return typeof v === "string" && v.length <= MAX_FIELD;
}

function levelOf(v: unknown): AlertLevel | undefined {
  return ALERT_LEVELS.find((l) => l === v);
}

function stateOf(v: unknown): AlertState | undefined {
  return ALERT_STATES.find((s) => s === v);
}

/** A number as the event holds it (NaN and ±Infinity as their strings); undefined when absent, null when not a number. */
function valueOf(v: unknown): number | undefined | null {
  if (v === undefined) return undefined;
  try {
    return parseNumber(v);
  } catch {
    return null;
  }
}

/**
 * The alert event `json` holds, or a sentence saying why it is not one: the required fields
 * (`id`, `rule`, a known `level`, `run`, `step` a number or null, `message`, `state` firing,
 * resolved or ended, `at` a finite number) of the right types and lengths, the optional ones (`key`,
 * `rank`, `rankName`, `host`, `value`, `title`) absent or of their type. Other fields are dropped.
 */
export function parseAlertEvent(json: string): AlertEvent | string {
  if (json.length > MAX_ALERT_JSON)
    return `an alert event's JSON is ${json.length} characters, at most ${MAX_ALERT_JSON}`;
  let e: Record<string, unknown>;
  try {
    e = parseRecord(json, "an alert event");
  } catch {
    return "an alert event must be a JSON object";
  }
  const { id, rule, level, run, step, key, rank, rankName, host, value, message, state, at, title } = e;
  const level_ = levelOf(level);
  if (!text(id) || id === "" || !text(rule) || rule === "" || !text(run) || !text(message))
    return `an alert event needs id, rule, run and message (strings of at most ${MAX_FIELD} characters)`;
  if (level_ === undefined) return `an alert event's level must be one of ${ALERT_LEVELS.join(", ")}`;
  const state_ = stateOf(state);
  if (state_ === undefined) return `an alert event's state must be one of ${ALERT_STATES.join(", ")}`;
  if (step !== null && (typeof step !== "number" || !Number.isFinite(step)))
    return "an alert event's step must be a number or null";
  if (typeof at !== "number" || !Number.isFinite(at))
    return "an alert event's at must be a finite number (ms since the epoch)";
  if ([key, rankName, host, title].some((v) => v !== undefined && !text(v)))
    return `an alert event's key, rankName, host and title must be strings of at most ${MAX_FIELD} characters`;
  if (rank !== undefined && !Number.isSafeInteger(rank)) return "an alert event's rank must be an integer";
  const number = valueOf(value);
  if (number === null) return 'an alert event\'s value must be a number, "NaN", "Infinity" or "-Infinity"';
  return {
    id,
    rule,
    level: level_,
    run,
    step,
    ...(typeof key === "string" ? { key } : {}),
    ...(typeof rank === "number" ? { rank } : {}),
    ...(typeof rankName === "string" ? { rankName } : {}),
    ...(typeof host === "string" ? { host } : {}),
    ...(number === undefined ? {} : { value: number }),
    message,
    state: state_,
    at,
    ...(typeof title === "string" ? { title } : {}),
  };
}
