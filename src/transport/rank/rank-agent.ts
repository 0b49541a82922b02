/**
 * The rank's side of every carrier: turns the controller's requests into calls on this process's
 * `RankRuntime` and sends the answers back. A request that fails is answered with its error; a
 * message that is not a valid request is counted and ignored. Nothing here throws into the rank's
 * own code.
 */
import { hostname } from "node:os";
import { pathToFileURL } from "node:url";
import { describeError, reportError } from "../../core/diagnostics.js";
import type { RankSnapshot } from "../protocol/types.js";
import type { RankRuntime } from "./runtime.js";
import { decodeProtocolMessage, encodeProtocolMessage, PROTOCOL_VERSION, reportIgnored, type ControllerRequest, type RankMessage } from "../protocol/messages.js";
import { StateEncoder, WIRE_VERSION } from "../wire/codec.js";

/** Sends one encoded message; the carrier decides where (a port, IPC, a NATS reply subject). */
export type SendText = (text: string) => void;

/** Sends one wire frame (binary); only carriers that move bytes as they are (NATS) have one. */
export type SendFrame = (frame: Uint8Array) => void;

/** Options of a `RankAgent`. */
export interface RankAgentOptions {
  readonly runId: string;
  readonly runtime: RankRuntime;
  /** Called after the rank answered `shutdown` (a spawned rank exits here). */
  readonly onShutdown?: () => void;
}

/**
 * How many of its last flush answers a rank keeps, to send again one that was lost in transit, and
 * how many key states they may hold together (the newest answer is always kept).
 */
export const KEPT_FLUSH_ANSWERS = 16;
export const KEPT_FLUSH_STATES = 20_000;

/** Answers the controller's requests for one rank. */
export class RankAgent {
  /** Flush answers so far; each answer carries its number (`seq`). */
  private seq = 0;
  private readonly kept: RankSnapshot[] = [];
  private keptStates = 0;
  private module: Record<string, unknown> = {};
  private shuttingDown = false;
  private helloListener: ((controller: string) => void) | undefined;
  /** Key table of the flush answers sent as wire frames (created at the first one). */
  private frameEncoder: StateEncoder | undefined;

  constructor(private readonly options: RankAgentOptions) {}

  get rankName(): string {
    return this.options.runtime.identity.rankName;
  }

  /** Be called when a controller says `hello` (the NATS carrier registers again then). */
  onHello(listener: (controller: string) => void): void {
    this.helloListener = listener;
  }

  /** The `register` message this rank sends first. */
  registerMessage(): string {
    return this.encode({ t: "register", identity: this.options.runtime.identity, pid: process.pid, host: hostname() });
  }

  /** The `deregister` message this rank sends when it leaves. */
  deregisterMessage(reason: string): string {
    return this.encode({ t: "deregister", rankName: this.rankName, reason });
  }

  /**
   * Handle one message from the controller; `reply` sends the answer back the way the request came.
   * When the carrier can send bytes (`replyFrame`) and a flush request asks for wire frames
   * (`flush.wire`, a host agent does), the flush answer is one frame: only the keys recorded since
   * the last flush, key ids interned per session, numbers in typed arrays.
   * Returns a promise that settles when the answer was sent (never rejects).
   */
  async receive(data: unknown, reply: SendText, from = "the controller", replyFrame?: SendFrame): Promise<void> {
    const message = decodeProtocolMessage(this.options.runId, data, from);
    if (message === undefined) return;
    if (message.t === "hello") {
      this.helloListener?.(message.controller);
      return;
    }
    if (message.t === "register" || message.t === "deregister" || message.t === "reply" || message.t === "registered") {
      reportIgnored("malformed", `rank ${this.rankName} received a "${message.t}" message, which only the controller takes`);
      return;
    }
    const request = message as ControllerRequest;
    let answer: RankMessage;
    try {
      answer = await this.answer(request);
    } catch (error) {
      answer = { t: "reply", id: request.id, rankName: this.rankName, ok: false, error: describeError(error) };
    }
    try {
      const frame = replyFrame !== undefined && request.t === "flush" ? this.frameOf(request, answer) : undefined;
      if (frame !== undefined) (replyFrame as SendFrame)(frame);
      else reply(this.encode(answer));
    } catch (error) {
      reportError("transport.replyFailed", `rank ${this.rankName} could not answer "${request.t}": ${describeError(error)}`);
    }
    if (request.t === "shutdown" && !this.shuttingDown) {
      this.shuttingDown = true;
      this.options.onShutdown?.();
    }
  }

  private async answer(request: ControllerRequest): Promise<RankMessage> {
    const runtime = this.options.runtime;
    const ok = { t: "reply", id: request.id, rankName: this.rankName, ok: true } as const;
    switch (request.t) {
      case "init":
        await runtime.init(request.init);
        return ok;
      case "flush": {
        const snapshot: RankSnapshot = { ...(await runtime.flush(request.step)), seq: ++this.seq };
        this.kept.push(snapshot);
        this.keptStates += snapshot.states.length;
        while (this.kept.length > 1 && (this.kept.length > KEPT_FLUSH_ANSWERS || this.keptStates > KEPT_FLUSH_STATES)) {
          this.keptStates -= (this.kept.shift() as RankSnapshot).states.length;
        }
        return { ...ok, snapshot };
      }
      case "resend": {
        const snapshot = this.kept.find((s) => s.seq === request.seq);
        if (snapshot === undefined) throw new Error(`flush answer ${request.seq} is no longer kept (a rank keeps its last ${KEPT_FLUSH_ANSWERS})`);
        return { ...ok, snapshot };
      }
      case "shutdown":
        await runtime.shutdown();
        return ok;
      case "start": {
        const url = request.module.startsWith("file:") ? request.module : pathToFileURL(request.module).href;
        this.module = (await import(url)) as Record<string, unknown>;
        return { ...ok, result: Object.keys(this.module).filter((k) => typeof this.module[k] === "function") };
      }
      case "call": {
        const fn = this.module[request.fn];
        if (typeof fn !== "function") {
          const available = Object.keys(this.module).filter((k) => typeof this.module[k] === "function");
          throw new Error(`the rank module exports no function "${request.fn}"; it exports: ${available.join(", ") || "(none)"}`);
        }
        const result: unknown = await (fn as (...args: unknown[]) => unknown)(...request.args);
        return result === undefined ? ok : { ...ok, result };
      }
      case "sync":
        await new Promise<void>((resolve) => process.stdout.write(`${request.marker}\n`, () => resolve()));
        return ok;
    }
  }

  /**
   * The flush answer as a wire frame, when the request asked for this wire version; undefined
   * (answer in JSON) otherwise, for off-cycle logs, or when a key cannot be framed.
   */
  private frameOf(request: ControllerRequest & { t: "flush" }, answer: RankMessage): Uint8Array | undefined {
    if (request.wire !== WIRE_VERSION || answer.t !== "reply" || !answer.ok || answer.snapshot === undefined) return undefined;
    const snapshot = answer.snapshot;
    if (snapshot.offCycle !== undefined && snapshot.offCycle.length > 0) return undefined;
    this.frameEncoder ??= new StateEncoder();
    if (request.resync?.includes(this.rankName) === true) this.frameEncoder.reset();
    const header = { proto: "rankscope", v: PROTOCOL_VERSION, run: this.options.runId, t: "reply", id: answer.id, rankName: this.rankName, ok: true, step: snapshot.step, seq: snapshot.seq, dropped: snapshot.droppedKeyRecords };
    try {
      return this.frameEncoder.encode(header, snapshot.states);
    } catch {
      // A key too long for the frame's length fields: this answer goes as JSON, which carries any key.
      return undefined;
    }
  }

  private encode(message: RankMessage): string {
    return encodeProtocolMessage(this.options.runId, message);
  }
}
