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
import { warn } from "../../core/diagnostics.js";
import { decodeMessage, encodeMessage } from "../../core/json.js";
import type { RankInit, RankSnapshot } from "./types.js";
import { processWide } from "../../core/process-wide.js";
import { rankTimingProblem, type RankTiming } from "../../core/step-timing.js";

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
  /** The snapshot's `timing` (the rank's step timings), when it has some. */
  readonly timing?: RankTiming;
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

/** Counts of messages ignored by this process, by reason (also reported through diagnostics). */
export interface IgnoredMessageCounts {
  malformed: number;
  foreign: number;
  late: number;
}

/** How many messages this process has ignored since it started, by reason. */
export function ignoredMessageCounts(): IgnoredMessageCounts {
  return processWide("transport.ignored", (): IgnoredMessageCounts => ({ malformed: 0, foreign: 0, late: 0 }));
}

/** Count and report a message that was ignored. */
export function reportIgnored(reason: keyof IgnoredMessageCounts, detail: string): void {
  ignoredMessageCounts()[reason]++;
  warn(`transport.${reason}`, `${detail}; the message was ignored (counted in ignoredMessageCounts().${reason})`);
}

/** Messages and bytes this process encoded and decoded (bytes are UTF-16 code units of the JSON text, i.e. bytes for ASCII). */
export interface TransportStats {
  messagesOut: number;
  bytesOut: number;
  messagesIn: number;
  bytesIn: number;
}

/** Counts of protocol messages this process sent and received (for benchmarks and health pages). */
export function transportStats(): TransportStats {
  return processWide("transport.stats", (): TransportStats => ({ messagesOut: 0, bytesOut: 0, messagesIn: 0, bytesIn: 0 }));
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
 * Decode and validate a message received from the wire. Returns undefined (counted and reported)
 * for anything that is not a well-formed rankscope message of this run and protocol version.
 * `from` names the sender in the report.
 */
export function decodeProtocolMessage(run: string, data: unknown, from: string): (ProtocolMessage & Envelope) | undefined {
  return decodeChecked<ProtocolMessage & Envelope>(run, data, from, validate);
}

/**
 * The one receive path of every JSON message (rank protocol and host messages alike): decode,
 * count, check the envelope, then `validate` (what is wrong, or undefined). Anything that fails is
 * counted and reported, and undefined is returned.
 */
export function decodeChecked<T>(run: string, data: unknown, from: string, validate: (m: Record<string, unknown>) => string | undefined): T | undefined {
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
    reportIgnored("malformed", `a "${String(value["t"])}" message from ${from} is malformed (${problem})`);
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
  let problem: string | undefined;
  if (h["t"] !== "reply" || h["ok"] !== true) problem = `a frame with t ${JSON.stringify(h["t"])} and ok ${JSON.stringify(h["ok"])} where only successful flush replies travel as frames`;
  else if (!isId(h["id"]) || !isString(h["rankName"]) || !isId(h["step"]) || !isId(h["seq"]) || !isId(h["dropped"])) problem = "id, rankName, step, seq and dropped are required";
  else if (h["timing"] !== undefined) problem = rankTimingProblem(h["timing"]);
  if (problem !== undefined) {
    reportIgnored("malformed", `a flush-answer frame from ${from} is malformed (${problem})`);
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
    reportIgnored("foreign", `a message from ${from} speaks rankscope protocol ${JSON.stringify(value["v"])}, this process speaks ${PROTOCOL_VERSION}`);
    return false;
  }
  if (value["run"] !== run) {
    reportIgnored("foreign", `a message from ${from} belongs to run ${JSON.stringify(value["run"])}, not ${JSON.stringify(run)}`);
    return false;
  }
  return true;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function isId(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}

function isString(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

/** What is wrong with a message, or undefined when it is well formed. */
function validate(m: Record<string, unknown>): string | undefined {
  switch (m["t"]) {
    case "init": {
      if (!isId(m["id"])) return "id must be a non-negative integer";
      const init = m["init"];
      if (!isObject(init) || !isObject(init["backends"]) || !isObject(init["primaryMetadata"]) || !isObject(init["run"])) {
        return "init must carry backends, primaryMetadata and run";
      }
      const run = init["run"];
      if (!isString(run["runDir"]) || typeof run["experiment"] !== "string" || typeof run["trial"] !== "string" || !isId(run["resumeStep"])) {
        return "init.run must carry runDir, experiment, trial and resumeStep";
      }
      return undefined;
    }
    case "flush":
      if (!isId(m["id"])) return "id must be a non-negative integer";
      if (!isId(m["step"])) return "step must be a non-negative integer";
      if (m["wire"] !== undefined && !isId(m["wire"])) return "wire must be a wire-format version";
      return m["resync"] === undefined || (Array.isArray(m["resync"]) && m["resync"].every(isString)) ? undefined : "resync must be a list of rank names";
    case "shutdown":
      return isId(m["id"]) ? undefined : "id must be a non-negative integer";
    case "start":
      return !isId(m["id"]) ? "id must be a non-negative integer" : !isString(m["module"]) ? "module must be a non-empty string" : undefined;
    case "call":
      if (!isId(m["id"])) return "id must be a non-negative integer";
      return !isString(m["fn"]) ? "fn must be a non-empty string" : !Array.isArray(m["args"]) ? "args must be an array" : undefined;
    case "sync":
      return !isId(m["id"]) ? "id must be a non-negative integer" : !isString(m["marker"]) ? "marker must be a non-empty string" : undefined;
    case "resend":
      return !isId(m["id"]) ? "id must be a non-negative integer" : !isId(m["seq"]) ? "seq must be a non-negative integer" : undefined;
    case "register":
      if (!isIdentity(m["identity"])) return "identity must carry rank, rankName, processName, localRank and localWorldSize";
      return Number.isInteger(m["pid"]) && typeof m["host"] === "string" ? undefined : "pid and host are required";
    case "deregister":
      return isString(m["rankName"]) && typeof m["reason"] === "string" ? undefined : "rankName and reason are required";
    case "hello":
      return isString(m["controller"]) ? undefined : "controller is required";
    case "registered":
      return isString(m["rankName"]) && typeof m["ok"] === "boolean" ? undefined : "rankName and ok are required";
    case "reply":
      if (!isId(m["id"]) || !isString(m["rankName"])) return "id and rankName are required";
      if (m["ok"] === false) return typeof m["error"] === "string" ? undefined : "a failed reply must carry error";
      if (m["ok"] !== true) return "ok must be true or false";
      return m["snapshot"] === undefined ? undefined : validateSnapshot(m["snapshot"]);
    default:
      return `unknown message type ${JSON.stringify(m["t"])}`;
  }
}

function isIdentity(value: unknown): value is RankIdentity {
  return (
    isObject(value) &&
    isId(value["rank"]) &&
    isString(value["rankName"]) &&
    isString(value["processName"]) &&
    isId(value["localRank"]) &&
    isId(value["localWorldSize"]) &&
    value["localWorldSize"] >= 1
  );
}

function validateSnapshot(snapshot: unknown): string | undefined {
  if (!isObject(snapshot)) return "snapshot must be an object";
  if (!isString(snapshot["rankName"]) || !isId(snapshot["step"]) || !isId(snapshot["droppedKeyRecords"])) {
    return "snapshot must carry rankName, step and droppedKeyRecords";
  }
  if (snapshot["seq"] !== undefined && !isId(snapshot["seq"])) return "snapshot.seq must be a non-negative integer";
  const states = snapshot["states"];
  if (!Array.isArray(states)) return "snapshot.states must be an array";
  const list: readonly unknown[] = states;
  for (const s of list) {
    if (!isObject(s) || !isString(s["key"]) || !isString(s["reduce"])) return "every state must carry key and reduce";
    const state = s["state"];
    if (!isObject(state) || typeof state["v"] !== "number" || typeof state["count"] !== "number") {
      return `state of "${String(s["key"])}" must carry v and count`;
    }
  }
  if (snapshot["timing"] !== undefined) {
    const problem = rankTimingProblem(snapshot["timing"]);
    if (problem !== undefined) return `snapshot.${problem}`;
  }
  return validateOffCycle(snapshot["offCycle"]);
}

function validateOffCycle(offCycle: unknown): string | undefined {
  if (offCycle === undefined) return undefined;
  if (!Array.isArray(offCycle)) return "snapshot.offCycle must be an array";
  const logs: readonly unknown[] = offCycle;
  for (const log of logs) {
    if (!isObject(log) || !isString(log["axis"]) || !isId(log["step"]) || typeof log["timestamp"] !== "number" || !Array.isArray(log["states"])) {
      return "every off-cycle log must carry axis, step, timestamp and states";
    }
  }
  return undefined;
}

