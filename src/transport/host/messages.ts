/**
 * The messages between the controller and its host agents (see docs/scale.md), over NATS:
 *
 * ```
 * rankscope.{runId}.hosts.register     agent → controller (request; answered "hostRegistered")
 * rankscope.{runId}.hosts.deregister   agent → controller
 * rankscope.{runId}.hosts.flush        controller → every agent at once; each answers with one wire frame
 * rankscope.{runId}.hostctl.{hostId}   controller → one agent (init, shutdown); answered "hostReply"
 * rankscope.{runId}.host.{hostId}.*    the host's ranks ↔ its agent (the rank protocol, scoped)
 * rankscope.{runId}.rack.{rackId}.hosts.* / .hostctl.{hostId} / .ctlh.*
 *                                      the same host protocol between a rack agent and its hosts
 * ```
 *
 * Requests and small answers are JSON in the protocol's envelope (`proto`, `v`, `run`); the flush
 * answer is a binary frame (`wire/codec.ts`) whose header carries the same envelope. Anything
 * malformed, foreign or of another version is counted and ignored like every protocol message.
 */
import { encodeMessage } from "../../core/json.js";
import type { UserAlertCall } from "../../core/alert.js";
import type { OffCycleLog, RankInit } from "../../pipeline/rank-handle.js";
import type { HostTiming } from "../../core/step-timing.js";
import {
  PROTOCOL_VERSION,
  alertsProblem,
  decodeChecked,
  hostTimingProblem,
  isId,
  nameProblem,
  offCycleProblem,
  namesProblem,
  shortText,
  transportStats,
  type MessageProblem,
} from "../protocol/messages.js";

const PROTO = "rankscope";

/**
 * Subjects of the host layer of one run: the controller's (`rack` undefined), or those a rack
 * agent serves its hosts on (`rankscope.{runId}.rack.{rack}.…`, the same protocol one level down).
 */
export function hostSubjects(runId: string, rack?: string) {
  const base = rack === undefined ? `rankscope.${runId}` : `rankscope.${runId}.rack.${rack}`;
  return {
    register: `${base}.hosts.register`,
    deregister: `${base}.hosts.deregister`,
    flush: `${base}.hosts.flush`,
    control: (hostId: string) => `${base}.hostctl.${hostId}`,
    /** The prefix of the serving end's inbox, where the agents' frames go. */
    inbox: `${base}.ctlh`,
  };
}

/**
 * By rank name, answers of a host's ranks (`p`: the rank's process id, since a rank process
 * numbers its answers from 1; `s`: the answer numbers): those a host answer holds (`took`), or
 * those the controller took through an agent that is gone (`hostFlush.logged`).
 */
export type RankAnswers = Readonly<Record<string, { readonly p: number; readonly s: readonly number[] }>>;

/** Controller → agents and agent → controller (JSON messages). */
export type HostMessage =
  | {
      readonly t: "hostRegister";
      readonly host: string;
      readonly pid: number;
      /** The agent process (`HostStatesHeader.agent`): one registering anew replaces its predecessor. */
      readonly agent?: string;
    }
  | {
      readonly t: "hostRegistered";
      readonly host: string;
      readonly ok: boolean;
      readonly error?: string;
      /** The serving process (controller or rack agent, a random id): a flush from another one makes the agent register again. */
      readonly server?: string;
    }
  | {
      /** A serving process (a rack agent started anew) announces itself: agents registered with another one register again. No reply. */
      readonly t: "hostHello";
      readonly server: string;
    }
  | { readonly t: "hostDeregister"; readonly host: string; readonly reason: string }
  | {
      readonly t: "hostFlush";
      readonly id: number;
      readonly step: number;
      /** The controller's deadline: the agent answers within a shorter one of its own. */
      readonly deadlineMs: number;
      /** Hosts whose key table or rank list the controller lost: they resend them in full. */
      readonly resync: readonly string[];
      /** By host, answers the controller took late and has not acknowledged yet: kept, not sent again. */
      readonly taken?: Readonly<Record<string, readonly number[]>>;
      /**
       * By host, its ranks' answers the controller took through an earlier agent of the host (one
       * that is gone): the current agent acknowledges them to its ranks and does not take them again.
       */
      readonly logged?: Readonly<Record<string, RankAnswers>>;
      /** The serving process that asks (`hostRegistered.server`). */
      readonly server?: string;
    }
  | { readonly t: "hostInit"; readonly id: number; readonly init: RankInit }
  | { readonly t: "hostShutdown"; readonly id: number; readonly deadlineMs: number }
  | {
      /**
       * The controller took these answers of the agents (logged them): by host id, their numbers
       * (`HostStatesHeader.seq`). One message per flush on the hosts' flush subject; an agent keeps
       * each answer until then and sends it again with its next ones (docs/scale.md). No reply.
       */
      readonly t: "hostAck";
      readonly acks: Readonly<Record<string, readonly number[]>>;
      /** By host id, the agent process whose answers these are (`HostStatesHeader.agent`): another agent of the host ignores them. */
      readonly agents?: Readonly<Record<string, string>>;
    }
  | {
      readonly t: "hostReply";
      readonly id: number;
      readonly host: string;
      readonly ok: boolean;
      readonly error?: string;
    };

/** The header of a host's flush answer (a wire frame). */
export interface HostStatesHeader {
  readonly proto: string;
  readonly v: number;
  readonly run: string;
  readonly t: "hostStates";
  readonly id: number;
  readonly step: number;
  readonly host: string;
  /** The agent's count of answers so far (1, 2, …): the controller takes each once and acknowledges it (`hostAck`). */
  readonly seq?: number;
  /** Which agent process numbered them (a random id): a replacement agent numbers from 1 again. */
  readonly agent?: string;
  /** An earlier answer the controller has not acknowledged, sent again before the answer to flush `id`. */
  readonly carried?: true;
  /** The ranks' answers merged into this one: the agent acknowledges them to its ranks once the controller logged it. */
  readonly took?: RankAnswers;
  /** How many of the host's ranks answered the agent in time. */
  readonly reporting: number;
  /** The host's ranks that did not. */
  readonly missing: readonly string[];
  /** Version of the host's rank list; `ranks` is sent when it changed (or on resync). */
  readonly mv: number;
  readonly ranks?: readonly string[];
  /**
   * A rack's answer: the host of each rank of `ranks`, as runs of `[host, how many ranks]` in the
   * list's order (sent with `ranks`). Absent from a host's answer (its ranks are all on its host).
   */
  readonly hosts?: ReadonlyArray<readonly [string, number]>;
  /**
   * A rack's answer: the rack agent each rank's host registered with (this rack, or a rack below
   * it), as runs of `[rack, how many ranks]` in the list's order (sent with `ranks`).
   */
  readonly racks?: ReadonlyArray<readonly [string, number]>;
  /** Sum of the reporting ranks' dropped-key counts (since they started). */
  readonly dropped: number;
  readonly offCycle?: readonly OffCycleLog[];
  /** The host's ranks' `alert()` calls since their last answer. */
  readonly alerts?: readonly UserAlertCall[];
  /** The ranks' arrival at the agent (ms after it asked) and step timings, rows indexing the rank list of version `mv` (docs/stragglers.md). */
  readonly timing?: HostTiming;
}

/** Encode a host message in the protocol envelope. */
export function encodeHostMessage(run: string, message: HostMessage): string {
  const text = encodeMessage({ proto: PROTO, v: PROTOCOL_VERSION, run, ...message });
  const stats = transportStats();
  stats.messagesOut++;
  stats.bytesOut += text.length;
  return text;
}

/** The envelope every host message and frame header carries. */
export function hostEnvelope(run: string): { proto: string; v: number; run: string } {
  return { proto: PROTO, v: PROTOCOL_VERSION, run };
}

/** Decode and validate a JSON host message; undefined (counted, reported) when it is not a valid one. */
export function decodeHostMessage(run: string, data: Uint8Array | string, from: string): HostMessage | undefined {
  return decodeChecked<HostMessage>(run, data, from, validateHostMessage);
}

/** Longest deadline a host message may carry (the logger's deadlines are at most an hour). */
const MAX_DEADLINE_MS = 3_600_000;
const isDeadline = (value: unknown): boolean => isId(value) && Number(value) <= MAX_DEADLINE_MS;
const isText = (value: unknown): boolean => typeof value === "string" && value.length <= 16_384;

function validateHostMessage(m: Record<string, unknown>): MessageProblem {
  switch (m["t"]) {
    case "hostRegister":
      return (
        nameProblem("host", m["host"]) ??
        (isId(m["pid"]) ? undefined : "pid is required") ??
        (m["agent"] === undefined || isAgentId(m["agent"]) ? undefined : "agent must be a short id")
      );
    case "hostRegistered":
      return (
        nameProblem("host", m["host"]) ??
        (typeof m["ok"] === "boolean" && (m["error"] === undefined || isText(m["error"]))
          ? undefined
          : "ok is required") ??
        (m["server"] === undefined || isAgentId(m["server"]) ? undefined : "server must be a short id")
      );
    case "hostHello":
      return isAgentId(m["server"]) ? undefined : "server is required";
    case "hostDeregister":
      return nameProblem("host", m["host"]) ?? (isText(m["reason"]) ? undefined : "reason is required");
    case "hostFlush":
      return isId(m["id"]) && isId(m["step"]) && isDeadline(m["deadlineMs"])
        ? (namesProblem("resync", m["resync"]) ??
            (m["taken"] === undefined ? undefined : hostAcksProblem(m["taken"])) ??
            (m["logged"] === undefined ? undefined : loggedProblem(m["logged"])) ??
            (m["server"] === undefined || isAgentId(m["server"]) ? undefined : "server must be a short id"))
        : "id, step, deadlineMs (at most an hour) and resync are required";
    case "hostInit": {
      const init = m["init"];
      return isId(m["id"]) &&
        init !== null &&
        typeof init === "object" &&
        !Array.isArray(init) &&
        "backends" in init &&
        "run" in init &&
        typeof init.backends === "object" &&
        typeof init.run === "object"
        ? undefined
        : "id and init are required";
    }
    case "hostShutdown":
      return isId(m["id"]) && isDeadline(m["deadlineMs"])
        ? undefined
        : "id and deadlineMs (at most an hour) are required";
    case "hostAck":
      return hostAcksProblem(m["acks"]) ?? agentsProblem(m["agents"]);
    case "hostReply":
      return isId(m["id"]) && typeof m["ok"] === "boolean" && (m["error"] === undefined || isText(m["error"]))
        ? nameProblem("host", m["host"])
        : "id, host and ok are required";
    default:
      return `unknown message type ${shortText(m["t"])}`;
  }
}

/** Most hosts one `hostAck` names, and most numbers per host (an agent keeps at most `KEPT_HOST_ANSWERS`). */
const MAX_ACKED_HOSTS = 10_000;
const MAX_ACKED_PER_HOST = 64;

function hostAcksProblem(acks: unknown): MessageProblem {
  if (acks === null || typeof acks !== "object" || Array.isArray(acks))
    return "acks must map host ids to answer numbers";
  const entries = Object.entries(acks);
  if (entries.length > MAX_ACKED_HOSTS) return `acks must name at most ${MAX_ACKED_HOSTS} hosts`;
  for (const [host, seqs] of entries) {
    const problem = nameProblem("every host id in acks", host);
    if (problem !== undefined) return problem;
    if (!Array.isArray(seqs) || seqs.length > MAX_ACKED_PER_HOST || !seqs.every(isId))
      return `every host's acks must be a list of at most ${MAX_ACKED_PER_HOST} answer numbers`;
  }
  return undefined;
}

const isAgentId = (value: unknown): boolean => typeof value === "string" && value.length <= 64;

/** A problem unless `value` maps hosts to their ranks' answers (`RankAnswers`), within bounds. */
function loggedProblem(value: unknown): MessageProblem {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    return "logged must map host ids to their ranks' answers";
  const entries = Object.entries(value);
  if (entries.length > MAX_ACKED_HOSTS) return `logged must name at most ${MAX_ACKED_HOSTS} hosts`;
  for (const [host, answers] of entries) {
    const problem = nameProblem("every host id in logged", host) ?? rankAnswersProblem("logged", answers);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** A problem unless `value` maps rank names to `{ p: pid, s: answer numbers }` (`RankAnswers`), within bounds. */
function rankAnswersProblem(what: string, value: unknown): MessageProblem {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    return `${what} must map rank names to their answers`;
  const entries = Object.entries(value);
  if (entries.length > MAX_HOST_RANKS) return `${what} must name at most ${MAX_HOST_RANKS} ranks`;
  for (const [rank, answers] of entries) {
    const problem = nameProblem(`every rank name in ${what}`, rank);
    if (problem !== undefined) return problem;
    const entry: unknown = answers;
    if (entry === null || typeof entry !== "object") return `${what}: every rank's answers must be { p, s }`;
    const p: unknown = Reflect.get(entry, "p");
    const s: unknown = Reflect.get(entry, "s");
    if (!isId(p) || !Array.isArray(s) || s.length > MAX_ACKED_PER_HOST || !s.every(isId))
      return `${what}: every rank's answers must be { p: its process id, s: at most ${MAX_ACKED_PER_HOST} answer numbers }`;
  }
  return undefined;
}

function agentsProblem(agents: unknown): MessageProblem {
  if (agents === undefined) return undefined;
  if (agents === null || typeof agents !== "object" || Array.isArray(agents))
    return "agents must map host ids to agent ids";
  const entries = Object.entries(agents);
  if (entries.length > MAX_ACKED_HOSTS) return `agents must name at most ${MAX_ACKED_HOSTS} hosts`;
  return entries.every(([, id]) => isAgentId(id)) ? undefined : "every agent id must be a short id";
}

/** What is wrong with a host-states frame header, or undefined when it is well formed. */
export function validateHostStatesHeader(h: Record<string, unknown>): MessageProblem {
  if (h["t"] !== "hostStates") return `a ${shortText(h["t"])} frame where only "hostStates" is taken`;
  if (!isId(h["id"]) || !isId(h["step"])) return "id and step are required";
  if (
    (h["seq"] !== undefined && !isId(h["seq"])) ||
    (h["carried"] !== undefined && (h["carried"] !== true || !isId(h["seq"])))
  )
    return "seq must be an answer number, and carried true with one";
  if (h["agent"] !== undefined && !isAgentId(h["agent"])) return "agent must be a short id";
  if (h["took"] !== undefined) {
    const took = rankAnswersProblem("took", h["took"]);
    if (took !== undefined) return took;
  }
  if (!isId(h["reporting"]) || !isId(h["mv"]) || !isId(h["dropped"]))
    return "reporting, missing, mv and dropped are required";
  const names =
    offCycleProblem(h["offCycle"], "a host's frame") ??
    nameProblem("host", h["host"]) ??
    namesProblem("missing", h["missing"]) ??
    (h["ranks"] === undefined ? undefined : namesProblem("ranks", h["ranks"])) ??
    (h["hosts"] === undefined ? undefined : runsProblem("hosts", "host", h["hosts"], h["ranks"])) ??
    (h["racks"] === undefined ? undefined : runsProblem("racks", "rack", h["racks"], h["ranks"])) ??
    alertsProblem(h, "a host's frame");
  if (names !== undefined || h["timing"] === undefined) return names;
  // Rows index the rank list; without one in this frame, any index up to the bound a frame could name.
  return hostTimingProblem(h["timing"], Array.isArray(h["ranks"]) ? h["ranks"].length : MAX_HOST_RANKS);
}

/** Runs of `[name, count]` (`HostStatesHeader.hosts`, `.racks`) as one name per rank; empty when absent. */
export function expandRuns(runs: ReadonlyArray<readonly [string, number]> | undefined): string[] {
  return runs === undefined ? [] : runs.flatMap(([name, n]) => Array<string>(n).fill(name));
}

/** A problem unless `value` (field `field`) is runs of `[host or rack id, rank count]` covering exactly the frame's rank list. */
function runsProblem(field: string, what: string, value: unknown, ranks: unknown): MessageProblem {
  if (!Array.isArray(value) || !Array.isArray(ranks) || value.length > MAX_ACKED_HOSTS)
    return `${field} must come with ranks, as at most 10,000 [${what}, count] runs`;
  let total = 0;
  for (const run of value) {
    if (!Array.isArray(run) || run.length !== 2 || !isId(run[1]))
      return `every ${field} entry must be [${what}, count]`;
    const problem = nameProblem(`every ${what} id in ${field}`, run[0]);
    if (problem !== undefined) return problem;
    total += Number(run[1]);
  }
  return total === ranks.length ? undefined : `${field} must count exactly the ranks of ranks`;
}

/** The most ranks one host's answer may name (a bound for checking a frame's timing rows). */
const MAX_HOST_RANKS = 65_536;

/**
 * The agent's own deadline for a flush whose controller deadline is `controllerMs`: shorter by a
 * quarter (at most 1 s), so its answer — naming the ranks it missed — reaches the controller in time.
 */
export function agentDeadlineMs(controllerMs: number): number {
  return Math.max(1, controllerMs - Math.min(1000, Math.ceil(controllerMs / 4)));
}
