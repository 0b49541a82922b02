/**
 * The messages between the controller and its ranks, the same on every carrier (worker
 * MessagePort, child-process IPC, NATS).
 *
 * Every message is one JSON text written by `encodeMessage` (so NaN and ±Infinity survive) with an
 * envelope `{ proto: "rankscope", v: 1, run, t, ... }`. A receiver validates the envelope and the
 * fields its handler reads before acting (`validate.ts`: names bounded, states checked against
 * their reductions); anything else — another program's message, another run's, a newer protocol
 * version, a truncated text — is counted by kind (`ignored.ts`) and ignored, never thrown into
 * the controller or the rank. Over NATS every message is also sealed with the run secret
 * (`seal.ts`).
 *
 * Controller → rank: `init`, `flush`, `shutdown`, `start` (import the rank module), `call` (run one
 * of its exported functions), `sync` (write a marker line to stdout, for ordered output), `resend`
 * (a flush answer, by its `seq`, that never arrived), and over
 * NATS `hello` (a controller announcing itself: every rank that hears it registers again), and
 * `ack` (the flush answers it logged: a rank keeps each answer until then).
 * Rank → controller: `register`, `reply` (to any request; a flush reply carries its step),
 * `deregister`.
 */
import type { RankIdentity } from "../../core/rank-identity.js";
import { processWide } from "../../core/process-wide.js";
import { reportIgnored, shortText } from "../../core/ignored.js";
import { isId, nameProblem, rankTimingProblem, validateProtocolMessage, type MessageProblem } from "./validate.js";
import { decodeMessage, encodeMessage } from "../../core/json.js";
import type { RankInit, RankSnapshot } from "../../pipeline/rank-handle.js";
import type { RankTiming } from "../../core/step-timing.js";

export {
  ignoredMessageCounts,
  reportIgnored,
  shortText,
  takeRejectionsSinceLastFlush,
  REJECTION_KINDS,
  IGNORED_REPORT_INTERVAL_MS,
  type IgnoredKind,
  type IgnoredMessageCounts,
} from "../../core/ignored.js";
export {
  alertsProblem,
  hostTimingProblem,
  isId,
  keepValidStates,
  nameProblem,
  rankTimingProblem,
  namesProblem,
  offCycleProblem,
  MAX_NAMES,
  type MessageProblem,
} from "./validate.js";

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
       * Set by a receiver that reads wire frames (`wire/codec.ts`) of this version — a host agent,
       * and the controller for the ranks on its parent channels (worker ports, IPC): the rank
       * answers with a frame (`RankReplyFrameHeader`) instead of JSON. Absent: JSON, as every
       * carrier and older receiver takes.
       */
      readonly wire?: number;
      /** Ranks whose key table the receiver lost: they start a new key-table session. */
      readonly resync?: readonly string[];
      /**
       * By rank, answers the receiver took but has not acknowledged yet (late ones, carried into this
       * flush; a host agent's: those in its own answers the controller has not logged yet): the rank
       * keeps them until acknowledged but does not send them again.
       */
      readonly taken?: Readonly<Record<string, readonly number[]>>;
      /**
       * By rank, answers acknowledged since the last flush request (a host agent's ranks: those in
       * its answers the controller logged): the ack rides on the next flush, read before the rank
       * sends anything again, so no message of its own goes out (an `ack` is the same, sent alone).
       */
      readonly acks?: Readonly<Record<string, readonly number[]>>;
    }
  | { readonly t: "shutdown"; readonly id: number }
  | { readonly t: "start"; readonly id: number; readonly module: string }
  | { readonly t: "call"; readonly id: number; readonly fn: string; readonly args: readonly unknown[] }
  | { readonly t: "sync"; readonly id: number; readonly marker: string }
  | { readonly t: "resend"; readonly id: number; readonly seq: number };

/** What a rank sends the controller. */
export type RankMessage =
  | {
      readonly t: "register";
      readonly identity: RankIdentity;
      readonly pid: number;
      readonly host: string;
    }
  | { readonly t: "deregister"; readonly rankName: string; readonly reason: string }
  | RankReply;

/** A rank's answer to one request. A flush answer carries `snapshot` (with its step). */
export type RankReply =
  | {
      readonly t: "reply";
      readonly id: number;
      readonly rankName: string;
      readonly ok: true;
      readonly result?: unknown;
      readonly snapshot?: RankSnapshot;
      /**
       * An earlier flush answer the receiver has not acknowledged, sent again before the answer to
       * the flush `id` (`KeptAnswers`): taken once by its number (`snapshot.seq`), into that flush.
       */
      readonly carried?: true;
    }
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
interface RegisteredMessage {
  readonly t: "registered";
  readonly rankName: string;
  readonly ok: boolean;
  readonly error?: string;
}

/**
 * A controller announcing itself to the run's ranks over NATS (when it starts, after it reconnects,
 * or to one rank it does not know): a rank that hears it registers again. Not a request: no reply.
 */
interface HelloMessage {
  readonly t: "hello";
  /** Who says hello (a unique id of the controller's connection), for diagnostics. */
  readonly controller: string;
}

/**
 * The controller logged these flush answers: by rank name, their numbers (`seq`). Over NATS one
 * message per flush for every rank joined directly, on the run's flush subject; on a worker's port
 * or IPC one to the rank. A rank keeps its answers until they are acknowledged and sends them
 * again with its next answer, so a controller that dies before logging what it took loses
 * nothing: the next one takes them then. (A host agent's ranks get theirs in the next flush
 * request, `flush.acks`.) Not a request: no reply.
 */
interface AckMessage {
  readonly t: "ack";
  readonly acks: Readonly<Record<string, readonly number[]>>;
}

export { MAX_ACKED_PER_RANK } from "./validate.js";

/** Either direction. */
export type ProtocolMessage = ControllerRequest | RankMessage | RegisteredMessage | HelloMessage | AckMessage;

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
  return processWide("transport.stats.v2", (): TransportStats => ({
    messagesOut: 0,
    bytesOut: 0,
    messagesIn: 0,
    bytesIn: 0,
    lostAnswers: 0,
  }));
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
export function decodeProtocolMessage(
  run: string,
  data: unknown,
  from: string,
): (ProtocolMessage & Envelope) | undefined {
  return decodeChecked<ProtocolMessage & Envelope>(run, data, from, (m) => validateProtocolMessage(m, from));
}

/**
 * The one receive path of every JSON message (rank protocol and host messages alike): decode,
 * count, check the envelope, then `validate`. Anything that fails is counted by kind and reported,
 * and undefined is returned.
 */
export function decodeChecked<T>(
  run: string,
  data: unknown,
  from: string,
  validate: (m: Record<string, unknown>) => MessageProblem,
): T | undefined {
  let value: unknown;
  try {
    const text =
      typeof data === "string"
        ? data
        : data instanceof Uint8Array
          ? Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8")
          : undefined;
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
    reportIgnored(
      kind,
      `a "${shortText(value["t"])}" message from ${from} is ${kind === "malformed" ? "malformed" : "refused"} (${detail})`,
    );
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
  if (h["t"] !== "reply" || h["ok"] !== true)
    problem = `a frame with t ${shortText(h["t"])} and ok ${shortText(h["ok"])} where only successful flush replies travel as frames`;
  else if (!isId(h["id"]) || !isId(h["step"]) || !isId(h["seq"]) || !isId(h["dropped"]))
    problem = "id, step, seq and dropped are required";
  else
    problem =
      nameProblem("rankName", h["rankName"]) ??
      (h["timing"] === undefined ? undefined : rankTimingProblem(h["timing"]));
  if (problem !== undefined) {
    const { kind, detail } = typeof problem === "string" ? { kind: "malformed" as const, detail: problem } : problem;
    reportIgnored(
      kind,
      `a flush-answer frame from ${from} is ${kind === "malformed" ? "malformed" : "refused"} (${detail})`,
    );
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
    reportIgnored(
      "foreign",
      `a message from ${from} speaks rankscope protocol ${shortText(value["v"])}, this process speaks ${PROTOCOL_VERSION}`,
    );
    return false;
  }
  if (value["run"] !== run) {
    reportIgnored(
      "foreign",
      `a message from ${from} belongs to run ${shortText(value["run"])}, not ${JSON.stringify(run)}`,
    );
    return false;
  }
  return true;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
