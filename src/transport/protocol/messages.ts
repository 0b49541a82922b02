/**
 * The messages between the controller and its ranks, the same on every carrier (worker
 * MessagePort, child-process IPC, NATS).
 *
 * Every message is one JSON text written by `encodeMessage` (so NaN and ±Infinity survive) with an
 * envelope `{ proto: "rankscope", v: 1, run, t, ... }`. A receiver validates the envelope and the
 * fields its handler reads before acting; anything else — another program's message, another
 * run's, a newer protocol version, a truncated text — is counted (`transport.malformed` /
 * `transport.foreign`) and ignored, never thrown into the controller or the rank.
 *
 * Controller → rank: `init`, `flush`, `shutdown`, `start` (import the rank module), `call` (run one
 * of its exported functions), `sync` (write a marker line to stdout, for ordered output), `resend`
 * (a flush answer, by its `seq`, that never arrived), and over
 * NATS `hello` (a controller announcing itself: every rank that hears it registers again).
 * Rank → controller: `register`, `reply` (to any request; a flush reply carries its step),
 * `deregister`.
 */
import type { RankIdentity } from "../../core/rank-identity.js";
import { warnAtBoundedRate } from "../../core/diagnostics.js";
import { ReceivedStates } from "../../core/key-state-check.js";
import { decodeMessage, encodeMessage } from "../../core/json.js";
import type { RankInit, RankSnapshot } from "./types.js";
import { isSubjectToken, MAX_NAME_LENGTH } from "./identity.js";
import { processWide } from "../../core/process-wide.js";

/** The protocol version this build speaks. A message with another version is ignored and counted. */
export const PROTOCOL_VERSION = 1;
const PROTO = "rankscope";

interface Envelope {
  readonly proto: typeof PROTO;
  readonly v: typeof PROTOCOL_VERSION;
  /** The run the message belongs to (NATS subjects are namespaced by it too). */
  readonly run: string;
}

/** A request from the controller to one rank (or, for `flush` over NATS, to all of them). */
export type ControllerRequest =
  | { readonly t: "init"; readonly id: number; readonly init: RankInit }
  | {
      readonly t: "flush";
      readonly id: number;
      readonly step: number;
      /**
       * Set by a receiver that reads wire frames (`wire/codec.ts`) of this version, a host agent:
       * a rank whose carrier can send bytes answers with a frame (`RankReplyFrameHeader`) instead
       * of JSON. Absent: JSON, as every carrier and older receiver takes.
       */
      readonly wire?: number;
      /** Ranks whose key table the receiver lost: they start a new key-table session. */
      readonly resync?: readonly string[];
    }
  | { readonly t: "shutdown"; readonly id: number }
  | { readonly t: "start"; readonly id: number; readonly module: string }
  | { readonly t: "call"; readonly id: number; readonly fn: string; readonly args: readonly unknown[] }
  | { readonly t: "sync"; readonly id: number; readonly marker: string }
  | { readonly t: "resend"; readonly id: number; readonly seq: number };

/** What a rank sends the controller. */
export type RankMessage =
  | { readonly t: "register"; readonly identity: RankIdentity; readonly pid: number; readonly host: string }
  | { readonly t: "deregister"; readonly rankName: string; readonly reason: string }
  | RankReply;

/** A rank's answer to one request. A flush answer carries `snapshot` (with its step). */
export type RankReply =
  | { readonly t: "reply"; readonly id: number; readonly rankName: string; readonly ok: true; readonly result?: unknown; readonly snapshot?: RankSnapshot }
  | { readonly t: "reply"; readonly id: number; readonly rankName: string; readonly ok: false; readonly error: string };

/**
 * The header of a rank's flush answer sent as a wire frame (the frame's states are the snapshot's
 * states). Only sent to a receiver that asked with `flush.wire`, and only for a snapshot without
 * off-cycle logs (those answers stay JSON, which keeps NaN and ±Infinity in their states).
 */
export interface RankReplyFrameHeader extends Envelope {
  readonly t: "reply";
  readonly id: number;
  readonly rankName: string;
  readonly ok: true;
  readonly step: number;
  readonly seq: number;
  /** The snapshot's `droppedKeyRecords`. */
  readonly dropped: number;
  readonly session: string;
}

/** The controller's answer to a rank's `register` over NATS (on other carriers, `init` follows directly). */
export interface RegisteredMessage {
  readonly t: "registered";
  readonly rankName: string;
  readonly ok: boolean;
  readonly error?: string;
}

/**
 * A controller announcing itself to the run's ranks over NATS (when it starts, after it reconnects,
 * or to one rank it does not know): a rank that hears it registers again. Not a request: no reply.
 */
export interface HelloMessage {
  readonly t: "hello";
  /** Who says hello (a unique id of the controller's connection), for diagnostics. */
  readonly controller: string;
}

/** Either direction. */
export type ProtocolMessage = ControllerRequest | RankMessage | RegisteredMessage | HelloMessage;

/**
 * Counts of messages (or parts of them) this process ignored, by kind. Every kind but `late` is a
 * rejection: each is also logged per flush as `rankscope/rejected/{kind}` (`REJECTED_KEY_PREFIX`).
 */
export interface IgnoredMessageCounts {
  /** Not JSON, not a message of this protocol's shape, or a frame that cannot be read. */
  malformed: number;
  /** Another program's, another run's or another protocol version's, or from someone not registered here. */
  foreign: number;
  /** An answer after its deadline (not a rejection: its values go into that rank's next flush). */
  late: number;
  /** Over NATS: not sealed with the run secret, or its authentication tag does not verify. */
  unauthenticated: number;
  /** Received before: a replayed message, or an answer already used. */
  replayed: number;
  /** Outside the receiver's window: sealed too long ago, or older than the last 1,024 of its sender. */
  stale: number;
  /** A state that does not fit its reduction's shape (types, lengths, ranges). */
  invalidState: number;
  /** A name or id (rank, process, host, run, key, reduce) out of bounds in length or characters. */
  invalidName: number;
  /** A request the receiver's own side does not allow: a module to import, or a backend's destination or path. */
  refused: number;
}

/** The kinds of `IgnoredMessageCounts`. */
export type IgnoredKind = keyof IgnoredMessageCounts;

/** The kinds that are rejections (every kind but `late`), in the order they are logged. */
export const REJECTION_KINDS: readonly IgnoredKind[] = ["unauthenticated", "replayed", "stale", "malformed", "foreign", "invalidState", "invalidName", "refused"];

/** How many messages this process has ignored since it started, by kind. */
export function ignoredMessageCounts(): IgnoredMessageCounts {
  return processWide(
    "transport.ignoredByKind",
    (): IgnoredMessageCounts => ({ malformed: 0, foreign: 0, late: 0, unauthenticated: 0, replayed: 0, stale: 0, invalidState: 0, invalidName: 0, refused: 0 }),
  );
}

/** How often each kind is reported again while it keeps happening (the first is reported at once). */
export const IGNORED_REPORT_INTERVAL_MS = 60_000;

/** Count and report a message (or a part of one) that was ignored; reports are bounded in rate per kind. */
export function reportIgnored(reason: IgnoredKind, detail: string): void {
  ignoredMessageCounts()[reason]++;
  warnAtBoundedRate(`transport.${reason}`, `${detail}; ignored (counted in ignoredMessageCounts().${reason})`, IGNORED_REPORT_INTERVAL_MS);
}

/**
 * The rejections of this process since the previous call, by kind (those that happened): what a
 * process logs at each flush as `rankscope/rejected/{kind}`, so an attack shows in the run's data.
 */
export function takeRejectionsSinceLastFlush(): Array<[kind: IgnoredKind, count: number]> {
  const counts = ignoredMessageCounts();
  const logged = processWide("transport.rejectionsLogged", (): Partial<Record<IgnoredKind, number>> => ({}));
  const out: Array<[IgnoredKind, number]> = [];
  for (const kind of REJECTION_KINDS) {
    const delta = counts[kind] - (logged[kind] ?? 0);
    if (delta > 0) {
      out.push([kind, delta]);
      logged[kind] = counts[kind];
    }
  }
  return out;
}

/** Messages and bytes this process encoded and decoded (bytes are UTF-16 code units of the JSON text, i.e. bytes for ASCII). */
export interface TransportStats {
  messagesOut: number;
  bytesOut: number;
  messagesIn: number;
  bytesIn: number;
  /** Flush answers lost in transit that could not be sent again (their values are not logged). */
  lostAnswers: number;
}

/** Counts of protocol messages this process sent and received (for benchmarks and health pages). */
export function transportStats(): TransportStats {
  return processWide("transport.stats.v2", (): TransportStats => ({ messagesOut: 0, bytesOut: 0, messagesIn: 0, bytesIn: 0, lostAnswers: 0 }));
}

/** Serialise a message for the wire. */
export function encodeProtocolMessage(run: string, message: ProtocolMessage): string {
  const text = encodeMessage({ proto: PROTO, v: PROTOCOL_VERSION, run, ...message });
  const stats = transportStats();
  stats.messagesOut++;
  stats.bytesOut += text.length;
  return text;
}

/**
 * What is wrong with a received message: a sentence (the message is `malformed`), or a sentence
 * with the kind it is counted as (`invalidName`, …). Undefined when the message is valid.
 */
export type MessageProblem = string | { readonly kind: IgnoredKind; readonly detail: string } | undefined;

/**
 * Decode and validate a message received from the wire. Returns undefined (counted and reported)
 * for anything that is not a well-formed rankscope message of this run and protocol version.
 * `from` names the sender in the report.
 */
export function decodeProtocolMessage(run: string, data: unknown, from: string): (ProtocolMessage & Envelope) | undefined {
  return decodeChecked<ProtocolMessage & Envelope>(run, data, from, (m) => validate(m, from));
}

/**
 * The one receive path of every JSON message (rank protocol and host messages alike): decode,
 * count, check the envelope, then `validate`. Anything that fails is counted by kind and reported,
 * and undefined is returned.
 */
export function decodeChecked<T>(run: string, data: unknown, from: string, validate: (m: Record<string, unknown>) => MessageProblem): T | undefined {
  let value: unknown;
  try {
    const text = typeof data === "string" ? data : data instanceof Uint8Array ? Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8") : undefined;
    if (text !== undefined) {
      const stats = transportStats();
      stats.messagesIn++;
      stats.bytesIn += text.length;
      value = decodeMessage(text);
    }
  } catch {
    reportIgnored("malformed", `a message from ${from} is not valid JSON`);
    return undefined;
  }
  if (!checkEnvelope(run, value, from)) return undefined;
  const problem = validate(value);
  if (problem !== undefined) {
    const { kind, detail } = typeof problem === "string" ? { kind: "malformed" as const, detail: problem } : problem;
    reportIgnored(kind, `a "${shortText(value["t"])}" message from ${from} is ${kind === "malformed" ? "malformed" : "refused"} (${detail})`);
    return undefined;
  }
  return value as unknown as T;
}

/**
 * Check the header of a rank's flush-answer frame (envelope and fields). Returns it, or undefined
 * (counted and reported) when it is not a well-formed one of this run and protocol version.
 */
export function checkReplyFrameHeader(run: string, header: unknown, from: string): RankReplyFrameHeader | undefined {
  if (!checkEnvelope(run, header, from)) return undefined;
  const h = header;
  let problem: MessageProblem;
  if (h["t"] !== "reply" || h["ok"] !== true) problem = `a frame with t ${shortText(h["t"])} and ok ${shortText(h["ok"])} where only successful flush replies travel as frames`;
  else if (!isId(h["id"]) || !isId(h["step"]) || !isId(h["seq"]) || !isId(h["dropped"])) problem = "id, step, seq and dropped are required";
  else problem = nameProblem("rankName", h["rankName"]);
  if (problem !== undefined) {
    const { kind, detail } = typeof problem === "string" ? { kind: "malformed" as const, detail: problem } : problem;
    reportIgnored(kind, `a flush-answer frame from ${from} is ${kind === "malformed" ? "malformed" : "refused"} (${detail})`);
    return undefined;
  }
  return h as unknown as RankReplyFrameHeader;
}

/** Envelope check: a rankscope message of this run and protocol version (else counted and reported). */
export function checkEnvelope(run: string, value: unknown, from: string): value is Record<string, unknown> {
  if (!isObject(value) || value["proto"] !== PROTO) {
    reportIgnored("foreign", `a message from ${from} is not a rankscope message`);
    return false;
  }
  if (value["v"] !== PROTOCOL_VERSION) {
    reportIgnored("foreign", `a message from ${from} speaks rankscope protocol ${shortText(value["v"])}, this process speaks ${PROTOCOL_VERSION}`);
    return false;
  }
  if (value["run"] !== run) {
    reportIgnored("foreign", `a message from ${from} belongs to run ${shortText(value["run"])}, not ${JSON.stringify(run)}`);
    return false;
  }
  return true;
}

/** A value quoted in a report, cut short (a hostile message may carry 200 KB where a name goes). */
export function shortText(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 80)}… (${text.length} characters)` : text;
}

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

/** Longest free text accepted in a message (a reason, an error), a module path, a function name. */
const MAX_TEXT = 16_384;
const MAX_PATH = 4096;
const MAX_FN = 256;
/** Most names in one list (ranks to resync, a host's ranks). */
export const MAX_NAMES = 1_000_000;

/** A problem (counted as `invalidName`) unless `value` is a subject token within bounds. */
export function nameProblem(what: string, value: unknown): MessageProblem {
  if (isSubjectToken(value)) return undefined;
  return { kind: "invalidName", detail: `${what} must be 1 to ${MAX_NAME_LENGTH} letters, digits, "_" or "-", got ${shortText(value)}` };
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

/** What is wrong with a message, or undefined when it is well formed. */
function validate(m: Record<string, unknown>, from: string): MessageProblem {
  const t = m["t"];
  if (t !== "register" && t !== "deregister" && t !== "hello" && t !== "registered" && !isId(m["id"])) {
    return KNOWN_TYPES.has(String(t)) ? "id must be a non-negative integer" : `unknown message type ${shortText(t)}`;
  }
  switch (t) {
    case "init":
      return validateInit(m["init"]);
    case "flush":
      if (!isId(m["step"])) return "step must be a non-negative integer";
      if (m["wire"] !== undefined && !isId(m["wire"])) return "wire must be a wire-format version";
      return m["resync"] === undefined ? undefined : namesProblem("resync", m["resync"]);
    case "shutdown":
      return undefined;
    case "start":
      return isText(m["module"], MAX_PATH) ? undefined : `module must be a path of 1 to ${MAX_PATH} characters`;
    case "call":
      return !isText(m["fn"], MAX_FN) ? `fn must be a name of 1 to ${MAX_FN} characters` : !Array.isArray(m["args"]) ? "args must be an array" : undefined;
    case "sync":
      return isText(m["marker"], MAX_FN) ? undefined : `marker must be 1 to ${MAX_FN} characters`;
    case "resend":
      return isId(m["seq"]) ? undefined : "seq must be a non-negative integer";
    case "register":
      return validateIdentity(m["identity"]) ?? (isId(m["pid"]) && isText(m["host"], 255) ? undefined : "pid and host (1 to 255 characters) are required");
    case "deregister":
      return nameProblem("rankName", m["rankName"]) ?? (isText(m["reason"], MAX_TEXT) || m["reason"] === "" ? undefined : "reason is required");
    case "hello":
      return isText(m["controller"], MAX_FN) ? undefined : "controller is required";
    case "registered":
      return nameProblem("rankName", m["rankName"]) ?? (typeof m["ok"] === "boolean" && (m["error"] === undefined || isText(m["error"], MAX_TEXT)) ? undefined : "ok is required");
    case "reply":
      return validateReply(m, from);
    default:
      return `unknown message type ${shortText(t)}`;
  }
}

const KNOWN_TYPES: ReadonlySet<string> = new Set(["init", "flush", "shutdown", "start", "call", "sync", "resend", "reply"]);

function validateInit(init: unknown): MessageProblem {
  if (!isObject(init) || !isObject(init["backends"]) || !isObject(init["primaryMetadata"]) || !isObject(init["run"])) {
    return "init must carry backends, primaryMetadata and run";
  }
  const run = init["run"];
  if (!isText(run["runDir"], MAX_PATH) || typeof run["experiment"] !== "string" || typeof run["trial"] !== "string" || !isId(run["resumeStep"])) {
    return "init.run must carry runDir, experiment, trial and resumeStep";
  }
  return init["hyperparams"] === undefined || isObject(init["hyperparams"]) ? undefined : "init.hyperparams must be an object";
}

function validateReply(m: Record<string, unknown>, from: string): MessageProblem {
  const name = nameProblem("rankName", m["rankName"]);
  if (name !== undefined) return name;
  if (m["ok"] === false) return isText(m["error"], MAX_TEXT) || m["error"] === "" ? undefined : "a failed reply must carry error";
  if (m["ok"] !== true) return "ok must be true or false";
  return m["snapshot"] === undefined ? undefined : validateSnapshot(m["snapshot"], from);
}

function validateIdentity(value: unknown): MessageProblem {
  if (!isObject(value) || !isId(value["rank"]) || !isId(value["localRank"]) || !isId(value["localWorldSize"]) || value["localWorldSize"] < 1) {
    return "identity must carry rank, rankName, processName, localRank and localWorldSize";
  }
  return nameProblem("identity.rankName", value["rankName"]) ?? nameProblem("identity.processName", value["processName"]);
}

function validateSnapshot(snapshot: unknown, from: string): MessageProblem {
  if (!isObject(snapshot)) return "snapshot must be an object";
  if (!isId(snapshot["step"]) || !isId(snapshot["droppedKeyRecords"])) return "snapshot must carry rankName, step and droppedKeyRecords";
  const name = nameProblem("snapshot.rankName", snapshot["rankName"]);
  if (name !== undefined) return name;
  if (snapshot["seq"] !== undefined && !isId(snapshot["seq"])) return "snapshot.seq must be a non-negative integer";
  const states = keepValidStates(snapshot["states"], `${from}'s answer`);
  if (states === undefined) return "snapshot.states must be a list of { key, reduce, state }";
  snapshot["states"] = states;
  return offCycleProblem(snapshot["offCycle"], from);
}

/**
 * The valid states of a received list: each checked against its reduction's shape, names bounded
 * (`ReceivedStates`). One that fails is left out — the answer's other states are still used — and
 * counted by kind. Undefined when `states` is not a list at all.
 */
export function keepValidStates(states: unknown, where: string): unknown[] | undefined {
  if (!Array.isArray(states)) return undefined;
  const list: readonly unknown[] = states;
  const checker = new ReceivedStates();
  let kept: unknown[] | undefined;
  for (let i = 0; i < list.length; i++) {
    const s = list[i];
    const problem = isObject(s) ? checker.problem(s["key"], s["reduce"], s["state"]) : { kind: "malformed" as const, problem: "a state must be { key, reduce, state }" };
    if (problem === undefined) {
      kept?.push(s);
      continue;
    }
    kept ??= list.slice(0, i);
    reportIgnored(problem.kind, `a state in ${where} (key ${shortText(isObject(s) ? s["key"] : s)}) is left out: ${problem.problem}`);
  }
  return kept ?? [...list];
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
