/**
 * Validation of what arrives from another process: every field a handler reads, names and ids
 * bounded in length and characters, and each state checked against its reduction's shape (an
 * invalid state is left out of its answer and counted; the rest of the answer is used).
 */
import { ALERT_LEVELS, MAX_ALERT_TEXT, MAX_ALERT_TITLE, MAX_QUEUED_ALERTS } from "../../core/alert.js";
import { ReceivedStates } from "../../core/key-state-check.js";
import { isSubjectToken, MAX_NAME_LENGTH } from "./identity.js";
import { reportIgnored, shortText, type IgnoredKind } from "../../core/ignored.js";
import { MAX_ANSWER_TRACERS, MAX_TIMING_NAME, MAX_TRACER_PHASES } from "../../core/step-timing.js";

/**
 * What is wrong with a received message: a sentence (the message is `malformed`), or a sentence
 * with the kind it is counted as (`invalidName`, …). Undefined when the message is valid.
 */
export type MessageProblem = string | { readonly kind: IgnoredKind; readonly detail: string } | undefined;

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** A request id, step, sequence number or count: a safe integer ≥ 0. */
export function isId(value: unknown): value is number {
  return Number.isSafeInteger(value) && typeof value === "number" && value >= 0;
}

/** A string of 1 to `max` characters. */
function isText(value: unknown, max: number): value is string {
  return typeof value === "string" && value.length > 0 && value.length <= max;
}

/** Most numbers one rank's entry of an `ack`, `flush.acks` or `flush.taken` may hold (a rank keeps at most 16 answers). */
export const MAX_ACKED_PER_RANK = 64;

/** Longest free text accepted in a message (a reason, an error), a module path, a function name. */
const MAX_TEXT = 16_384;
const MAX_PATH = 4096;
const MAX_FN = 256;
/** Most names in one list (ranks to resync, a host's ranks). */
export const MAX_NAMES = 1_000_000;

/** A problem (counted as `invalidName`) unless `value` is a subject token within bounds. */
export function nameProblem(what: string, value: unknown): MessageProblem {
  if (isSubjectToken(value)) return undefined;
  return {
    kind: "invalidName",
    detail: `${what} must be 1 to ${MAX_NAME_LENGTH} letters, digits, "_" or "-", got ${shortText(value)}`,
  };
}

/** A problem unless `value` is a list of at most `MAX_NAMES` subject tokens. */
export function namesProblem(what: string, value: unknown): MessageProblem {
  if (!Array.isArray(value) || value.length > MAX_NAMES) return `${what} must be a list of at most ${MAX_NAMES} names`;
  const list: readonly unknown[] = value;
  for (const name of list) {
    const problem = nameProblem(`every name in ${what}`, name);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** What is wrong with a protocol message (rank ↔ controller), or undefined when it is well formed. */
export function validateProtocolMessage(m: Record<string, unknown>, from: string): MessageProblem {
  const t = m["t"];
  if (t !== "register" && t !== "deregister" && t !== "hello" && t !== "registered" && t !== "ack" && !isId(m["id"])) {
    return KNOWN_TYPES.has(String(t)) ? "id must be a non-negative integer" : `unknown message type ${shortText(t)}`;
  }
  switch (t) {
    case "init":
      return validateInit(m["init"]);
    case "flush":
      if (!isId(m["step"])) return "step must be a non-negative integer";
      if (m["wire"] !== undefined && !isId(m["wire"])) return "wire must be a wire-format version";
      return (
        (m["resync"] === undefined ? undefined : namesProblem("resync", m["resync"])) ??
        (m["taken"] === undefined ? undefined : validateAcks(m["taken"])) ??
        (m["acks"] === undefined ? undefined : validateAcks(m["acks"]))
      );
    case "shutdown":
      return undefined;
    case "start":
      return isText(m["module"], MAX_PATH) ? undefined : `module must be a path of 1 to ${MAX_PATH} characters`;
    case "call":
      return !isText(m["fn"], MAX_FN)
        ? `fn must be a name of 1 to ${MAX_FN} characters`
        : !Array.isArray(m["args"])
          ? "args must be an array"
          : undefined;
    case "sync":
      return isText(m["marker"], MAX_FN) ? undefined : `marker must be 1 to ${MAX_FN} characters`;
    case "resend":
      return isId(m["seq"]) ? undefined : "seq must be a non-negative integer";
    case "register":
      return (
        validateIdentity(m["identity"]) ??
        (isId(m["pid"]) && isText(m["host"], 255) ? undefined : "pid and host (1 to 255 characters) are required")
      );
    case "ack":
      return validateAcks(m["acks"]);
    case "deregister":
      return (
        nameProblem("rankName", m["rankName"]) ??
        (isText(m["reason"], MAX_TEXT) || m["reason"] === "" ? undefined : "reason is required")
      );
    case "hello":
      return isText(m["controller"], MAX_FN) ? undefined : "controller is required";
    case "registered":
      return (
        nameProblem("rankName", m["rankName"]) ??
        (typeof m["ok"] === "boolean" && (m["error"] === undefined || isText(m["error"], MAX_TEXT))
          ? undefined
          : "ok is required")
      );
    case "reply":
      return validateReply(m, from);
    default:
      return `unknown message type ${shortText(t)}`;
  }
}

const KNOWN_TYPES: ReadonlySet<string> = new Set([
  "init",
  "flush",
  "shutdown",
  "start",
  "call",
  "sync",
  "resend",
  "reply",
]);

/** A list of flush-answer numbers, bounded (see `MAX_ACKED_PER_RANK`). */
function isSeqList(value: unknown): value is number[] {
  return Array.isArray(value) && value.length <= MAX_ACKED_PER_RANK && value.every(isId);
}

/** An `ack`'s map: rank names (subject tokens, at most `MAX_NAMES`) to bounded lists of answer numbers. */
function validateAcks(acks: unknown): MessageProblem {
  if (!isObject(acks)) return "acks must map rank names to answer numbers";
  const names = Object.keys(acks);
  if (names.length > MAX_NAMES) return `acks must name at most ${MAX_NAMES} ranks`;
  for (const name of names) {
    const problem = nameProblem("every rank name in acks", name);
    if (problem !== undefined) return problem;
    if (!isSeqList(acks[name]))
      return `every rank's acks must be a list of at most ${MAX_ACKED_PER_RANK} answer numbers`;
  }
  return undefined;
}

function validateInit(init: unknown): MessageProblem {
  if (!isObject(init) || !isObject(init["backends"]) || !isObject(init["primaryMetadata"]) || !isObject(init["run"])) {
    return "init must carry backends, primaryMetadata and run";
  }
  const run = init["run"];
  if (
    !isText(run["runDir"], MAX_PATH) ||
    typeof run["experiment"] !== "string" ||
    typeof run["trial"] !== "string" ||
    !isId(run["resumeStep"])
  ) {
    return "init.run must carry runDir, experiment, trial and resumeStep";
  }
  return init["hyperparams"] === undefined || isObject(init["hyperparams"])
    ? undefined
    : "init.hyperparams must be an object";
}

function validateReply(m: Record<string, unknown>, from: string): MessageProblem {
  const name = nameProblem("rankName", m["rankName"]);
  if (name !== undefined) return name;
  if (m["ok"] === false)
    return isText(m["error"], MAX_TEXT) || m["error"] === "" ? undefined : "a failed reply must carry error";
  if (m["ok"] !== true) return "ok must be true or false";
  const carried = m["snapshot"];
  if (m["carried"] !== undefined && (m["carried"] !== true || !isObject(carried) || !isId(carried["seq"])))
    return "carried must be true, with the numbered snapshot carried";
  return m["snapshot"] === undefined ? undefined : validateSnapshot(m["snapshot"], from);
}

function validateIdentity(value: unknown): MessageProblem {
  if (
    !isObject(value) ||
    !isId(value["rank"]) ||
    !isId(value["localRank"]) ||
    !isId(value["localWorldSize"]) ||
    value["localWorldSize"] < 1
  ) {
    return "identity must carry rank, rankName, processName, localRank and localWorldSize";
  }
  return (
    nameProblem("identity.rankName", value["rankName"]) ?? nameProblem("identity.processName", value["processName"])
  );
}

function validateSnapshot(snapshot: unknown, from: string): MessageProblem {
  if (!isObject(snapshot)) return "snapshot must be an object";
  if (!isId(snapshot["step"]) || !isId(snapshot["droppedKeyRecords"]))
    return "snapshot must carry rankName, step and droppedKeyRecords";
  const name = nameProblem("snapshot.rankName", snapshot["rankName"]);
  if (name !== undefined) return name;
  if (snapshot["seq"] !== undefined && !isId(snapshot["seq"])) return "snapshot.seq must be a non-negative integer";
  if (snapshot["timing"] !== undefined) {
    const timing = rankTimingProblem(snapshot["timing"]);
    if (timing !== undefined) return timing;
  }
  const states = keepValidStates(snapshot["states"], `${from}'s answer`);
  if (states === undefined) return "snapshot.states must be a list of { key, reduce, state }";
  snapshot["states"] = states;
  return offCycleProblem(snapshot["offCycle"], from) ?? alertsProblem(snapshot, `${from}'s answer`);
}

/**
 * The valid states of a received list: each checked against its reduction's shape, names bounded
 * (`ReceivedStates`). One that fails is left out — the answer's other states are still used — and
 * counted by kind. Undefined when `states` is not a list at all.
 */
export function keepValidStates(states: unknown, where: string): readonly unknown[] | undefined {
  if (!Array.isArray(states)) return undefined;
  const list: readonly unknown[] = states;
  const checker = new ReceivedStates();
  let kept: unknown[] | undefined;
  for (let i = 0; i < list.length; i++) {
    const s = list[i];
    const problem = isObject(s)
      ? checker.problem(s["key"], s["reduce"], s["state"])
      : { kind: "malformed" as const, problem: "a state must be { key, reduce, state }" };
    if (problem === undefined) {
      kept?.push(s);
      continue;
    }
    kept ??= list.slice(0, i);
    reportIgnored(
      problem.kind,
      `a state in ${where} (key ${shortText(isObject(s) ? s["key"] : s)}) is left out: ${problem.problem}`,
    );
  }
  return kept ?? list;
}

/**
 * What is wrong with the user's `alert()` calls an answer carries (`holder.alerts`): not a list, or
 * more than a rank queues (`MAX_QUEUED_ALERTS`), is a problem of the whole message. Each call is
 * then checked — a known level, a title of 1 to `MAX_ALERT_TITLE` characters, a text of at most
 * `MAX_ALERT_TEXT`, a finite time, a rank name that is a name — and one that fails is left out and
 * counted (`rankscope/rejected/malformed`, or `invalidName` for its rank name), the others kept.
 * A refused call is never delivered, recorded or quoted: its title and text appear nowhere.
 */
export function alertsProblem(holder: Record<string, unknown>, where: string): MessageProblem {
  const alerts = holder["alerts"];
  if (alerts === undefined) return undefined;
  if (!Array.isArray(alerts) || alerts.length > MAX_QUEUED_ALERTS)
    return `alerts must be a list of at most ${MAX_QUEUED_ALERTS} alert() calls`;
  const list: readonly unknown[] = alerts;
  const kept = list.filter((call) => {
    const problem = alertCallProblem(call);
    if (problem === undefined) return true;
    const kind = typeof problem === "string" ? "malformed" : problem.kind;
    reportIgnored(
      kind,
      `an alert() call in ${where} is left out: ${typeof problem === "string" ? problem : problem.detail}`,
    );
    return false;
  });
  if (kept.length === 0) delete holder["alerts"];
  else if (kept.length < list.length) holder["alerts"] = kept;
  return undefined;
}

/** What is wrong with one received `alert()` call (without quoting its title or text), or undefined. */
function alertCallProblem(call: unknown): MessageProblem {
  if (!isObject(call)) return "an alert() call must be { title, text, level, at }";
  if (!ALERT_LEVELS.some((l) => l === call["level"])) return `its level must be one of ${ALERT_LEVELS.join(", ")}`;
  if (!isText(call["title"], MAX_ALERT_TITLE)) return `its title must be 1 to ${MAX_ALERT_TITLE} characters`;
  if (typeof call["text"] !== "string" || call["text"].length > MAX_ALERT_TEXT)
    return `its text must be at most ${MAX_ALERT_TEXT} characters`;
  if (typeof call["at"] !== "number" || !Number.isFinite(call["at"])) return "its time (at) must be a finite number";
  if (call["rankName"] !== undefined && !isSubjectToken(call["rankName"]))
    return { kind: "invalidName", detail: `its rankName must be 1 to ${MAX_NAME_LENGTH} letters, digits, "_" or "-"` };
  const known = new Set(["title", "text", "level", "at", "rankName"]);
  return Object.keys(call).every((k) => known.has(k)) ? undefined : "it carries fields an alert() call does not have";
}

/** What is wrong with a list of off-cycle logs (each log's invalid states are left out and counted). */
export function offCycleProblem(offCycle: unknown, from: string): MessageProblem {
  if (offCycle === undefined) return undefined;
  if (!Array.isArray(offCycle)) return "snapshot.offCycle must be an array";
  const logs: readonly unknown[] = offCycle;
  for (const log of logs) {
    if (!isObject(log) || !isText(log["axis"], MAX_FN) || !isId(log["step"]) || typeof log["timestamp"] !== "number") {
      return "every off-cycle log must carry axis, step, timestamp and states";
    }
    const states = keepValidStates(log["states"], `${from}'s off-cycle log`);
    if (states === undefined) return "every off-cycle log must carry axis, step, timestamp and states";
    log["states"] = states;
  }
  return undefined;
}

/** Longest duration or arrival a step timing may carry, in ms (100 days: anything longer is forged). */
const MAX_TIMING_MS = 8.64e9;
/** Longest host name in a step timing (as in `register`). */
const MAX_HOST = 255;

const isDuration = (v: unknown): v is number => typeof v === "number" && v >= 0 && v <= MAX_TIMING_MS;
const isTimingName = (v: unknown): v is string => isText(v, MAX_TIMING_NAME);
const isIdColumn = (v: unknown, n: number): v is number[] => Array.isArray(v) && v.length === n && v.every(isId);
const isDurationColumn = (v: unknown, n: number): v is number[] =>
  Array.isArray(v) && v.length === n && v.every(isDuration);

/**
 * The shape shared by a rank's tracers (`rows` undefined: one number per field) and a host's
 * (`rows` = n: a column of n numbers per field): bounded counts, unique names, durations finite,
 * non-negative and at most `MAX_TIMING_MS`.
 */
function tracersProblem(tracers: unknown, rows: number | undefined): MessageProblem {
  if (!Array.isArray(tracers)) return "timing.tracers must be a list";
  const list: readonly unknown[] = tracers;
  if (list.length > MAX_ANSWER_TRACERS) return `timing carries more than ${MAX_ANSWER_TRACERS} tracers`;
  const counts = (v: unknown): boolean => (rows === undefined ? isId(v) : isIdColumn(v, rows));
  const durations = (v: unknown): boolean => (rows === undefined ? isDuration(v) : isDurationColumn(v, rows));
  const prefixes = new Set<string>();
  for (const t of list) {
    if (
      !isObject(t) ||
      !isTimingName(t["prefix"]) ||
      prefixes.has(t["prefix"]) ||
      !counts(t["steps"]) ||
      !durations(t["totalMs"]) ||
      !Array.isArray(t["phases"])
    ) {
      return `every tracer must carry a unique prefix (1 to ${MAX_TIMING_NAME} characters), steps, totalMs (0 to ${MAX_TIMING_MS} ms)${rows === undefined ? "" : " per row"} and phases`;
    }
    prefixes.add(t["prefix"]);
    const phases: readonly unknown[] = t["phases"];
    if (phases.length > MAX_TRACER_PHASES) return `a tracer carries more than ${MAX_TRACER_PHASES} phases`;
    const names = new Set<string>();
    for (const p of phases) {
      if (
        !isObject(p) ||
        !isTimingName(p["name"]) ||
        names.has(p["name"]) ||
        (p["kind"] !== "phase" && p["kind"] !== "barrier") ||
        !counts(p["count"]) ||
        !durations(p["totalMs"])
      ) {
        return `every phase must carry a unique name, kind (phase or barrier), count and totalMs${rows === undefined ? "" : " per row"}`;
      }
      names.add(p["name"]);
    }
  }
  return undefined;
}

/** What is wrong with a rank's step timings (`RankSnapshot.timing`, a reply or a frame header), or undefined. */
export function rankTimingProblem(value: unknown): MessageProblem {
  if (!isObject(value) || !isId(value["rank"]) || !isText(value["host"], MAX_HOST))
    return `timing must carry rank and host (1 to ${MAX_HOST} characters)`;
  return tracersProblem(value["tracers"], undefined);
}

/**
 * What is wrong with a host's forwarded step timings (`HostStatesHeader.timing`) for a rank list
 * of `members` ranks, or undefined: rows strictly increasing indexes of that list, every column
 * one number per row.
 */
export function hostTimingProblem(value: unknown, members: number): MessageProblem {
  if (!isObject(value) || !Array.isArray(value["rows"])) return "timing must carry rows, ranks, arrivalMs and tracers";
  const rows: readonly unknown[] = value["rows"];
  const n = rows.length;
  for (let i = 0; i < n; i++) {
    const row = rows[i];
    if (!isId(row) || row >= members || (i > 0 && row <= Number(rows[i - 1])))
      return "timing.rows must be increasing indexes of the answer's rank list";
  }
  if (!isIdColumn(value["ranks"], n) || !isDurationColumn(value["arrivalMs"], n))
    return "timing.ranks and timing.arrivalMs must have one number per row";
  return tracersProblem(value["tracers"], n);
}
