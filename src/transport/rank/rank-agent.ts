/**
 * The rank's side of every carrier: turns the controller's requests into calls on this process's
 * `RankRuntime` and sends the answers back. A request that fails is answered with its error; a
 * message that is not a valid request is counted and ignored. Nothing here throws into the rank's
 * own code.
 */
import { hostname } from "node:os";
import { describeError, reportError } from "../../core/diagnostics.js";
import { allowedModule, checkWireBackends, type RankPolicy } from "./policy.js";
import { KeptAnswers } from "./kept-answers.js";
import type { RankSnapshot } from "../../pipeline/rank-handle.js";
import type { RankTiming } from "../../core/step-timing.js";
import type { RankRuntime } from "../../pipeline/runtime.js";
import {
  decodeProtocolMessage,
  encodeProtocolMessage,
  PROTOCOL_VERSION,
  reportIgnored,
  type ControllerRequest,
  type RankMessage,
} from "../protocol/messages.js";
import { StateEncoder, WIRE_VERSION, type FrameHeader } from "../wire/codec.js";

export { KEPT_FLUSH_ANSWERS } from "./kept-answers.js";

/** Sends one encoded message; the carrier decides where (a port, IPC, a NATS reply subject). */
export type SendText = (text: string) => void;

/** Sends one wire frame (binary): every carrier moves bytes as they are (a worker's port, IPC with "advanced" serialization, NATS). */
export type SendFrame = (frame: Uint8Array) => void;

/** Options of a `RankAgent`. */
interface RankAgentOptions {
  readonly runId: string;
  readonly runtime: RankRuntime;
  /** Called after the rank answered `shutdown` (a spawned rank exits here). */
  readonly onShutdown?: () => void;
  /**
   * What this rank's own side allows requests to do (`policy.ts`). Default: nothing from the wire —
   * no module to import, per-rank configs checked, no destination allowed.
   */
  readonly policy?: RankPolicy;
}

const NOTHING_ALLOWED: RankPolicy = { modules: [], trustInit: false, destinations: [] };

type FlushRequest = ControllerRequest & { t: "flush" };

/** Answers the controller's requests for one rank. */
export class RankAgent {
  /** Flush answers so far; each answer carries its number (`seq`). */
  private seq = 0;
  /** The flush answers its receiver has not acknowledged, sent again with each flush answer until it does. */
  private readonly kept: KeptAnswers;
  private module: Record<string, unknown> = {};
  private shuttingDown = false;
  private helloListener: ((controller: string) => void) | undefined;
  /** Key table of the flush answers sent as wire frames (created at the first one). */
  private frameEncoder: StateEncoder | undefined;
  /** The request whose `resync` reset the key table last (a request resets it once). */
  private resetFor = -1;
  /** Whether this rank is registering with a controller that said `hello` (see `holdFlushes`). */
  private holding = false;
  /** Flush broadcasts answered empty while registering (`holdFlushes`). */
  private heldFlushes = 0;

  constructor(private readonly options: RankAgentOptions) {
    this.kept = new KeptAnswers(options.runtime.identity.rankName);
  }

  get rankName(): string {
    return this.options.runtime.identity.rankName;
  }

  /** Be called when a controller says `hello` (the NATS carrier registers again then). */
  onHello(listener: (controller: string) => void): void {
    this.helloListener = listener;
  }

  /**
   * While a controller that said `hello` (one that does not know this rank: a restarted one, or a
   * host agent that forgot it) registers it, its flush broadcasts are answered empty: the values stay
   * in the collector for the first flush after registration, and no answer numbered here pushes
   * out of the kept ring the answers the registration lists as unacknowledged before the new
   * controller can ask for them. (A rank busy through a restart finds ~20 of the new controller's
   * flushes queued; answering them fully dropped the dead controller's last answer, issue 24.)
   * An empty answer, not none: a flush sent just after the registration, read before the
   * registration's answer, is then answered at once instead of at its deadline.
   */
  holdFlushes(hold: boolean): void {
    this.holding = hold;
  }

  /** Flush broadcasts answered empty while this rank was registering (`holdFlushes`). */
  get flushesHeld(): number {
    return this.heldFlushes;
  }

  /**
   * The `register` message this rank sends. Its unacknowledged answers are not listed: they go
   * again, marked `carried`, with its next flush answer to whichever receiver it registered with.
   */
  registerMessage(): string {
    return this.encode({ t: "register", identity: this.options.runtime.identity, pid: process.pid, host: hostname() });
  }

  /** Numbers of the kept flush answers no controller acknowledged, oldest first. */
  unacknowledged(): number[] {
    return this.kept.unacknowledged();
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
    if (message.t === "ack") {
      this.kept.acknowledge(message.acks[this.rankName]);
      return;
    }
    if (message.t === "register" || message.t === "deregister" || message.t === "reply" || message.t === "registered") {
      reportIgnored(
        "malformed",
        `rank ${this.rankName} received a "${message.t}" message, which only the controller takes`,
      );
      return;
    }
    const request: ControllerRequest = message;
    // A host agent's acknowledgements ride on its next flush request: read before anything is sent again.
    if (request.t === "flush") this.kept.acknowledge(request.acks?.[this.rankName]);
    if (request.t === "flush" && this.holding) {
      this.heldFlushes++;
      reply(
        this.encode({
          t: "reply",
          id: request.id,
          rankName: this.rankName,
          ok: true,
          snapshot: this.heldSnapshot(request.step),
        }),
      );
      return;
    }
    if (request.t !== "flush") {
      await this.respond(request, reply, replyFrame);
      return;
    }
    this.sendCarried(request, reply);
    await this.respond(request, reply, replyFrame);
  }

  /**
   * Before answering a flush, send again every earlier answer the receiver has not acknowledged
   * (lost in transit, or not logged yet), oldest first, each marked `carried`: the receiver takes
   * each answer number once, into this flush. Nothing is sent in the steady state (every answer
   * acknowledged before the next flush).
   */
  private sendCarried(request: FlushRequest, reply: SendText): void {
    if (this.kept.unacknowledged().length === 0) return;
    const taken = new Set(request.taken?.[this.rankName]);
    try {
      for (const snapshot of this.kept.carried())
        if (snapshot.seq === undefined || !taken.has(snapshot.seq))
          reply(
            this.encode({ t: "reply", id: request.id, rankName: this.rankName, ok: true, carried: true, snapshot }),
          );
    } catch (error) {
      reportError(
        "transport.replyFailed",
        `rank ${this.rankName} could not send its unacknowledged answers again: ${describeError(error)}`,
      );
    }
  }

  /** Answer one request (never rejects: a failure is the answer, or reported when it cannot be sent). */
  private async respond(request: ControllerRequest, reply: SendText, replyFrame: SendFrame | undefined): Promise<void> {
    let answer: RankMessage | Uint8Array;
    try {
      answer =
        replyFrame !== undefined && request.t === "flush" && request.wire === WIRE_VERSION
          ? await this.flushFrame(request)
          : await this.answer(request);
    } catch (error) {
      answer = { t: "reply", id: request.id, rankName: this.rankName, ok: false, error: describeError(error) };
    }
    try {
      const frame =
        answer instanceof Uint8Array
          ? answer
          : replyFrame !== undefined && request.t === "flush"
            ? this.frameOf(request, answer)
            : undefined;
      if (frame !== undefined && replyFrame !== undefined) replyFrame(frame);
      else if (!(answer instanceof Uint8Array)) reply(this.encode(answer));
    } catch (error) {
      reportError(
        "transport.replyFailed",
        `rank ${this.rankName} could not answer "${request.t}": ${describeError(error)}`,
      );
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
      case "init": {
        const policy = this.options.policy ?? NOTHING_ALLOWED;
        await runtime.init(request.init, (validated) =>
          checkWireBackends(validated, request.init.run.runDir, policy, this.rankName),
        );
        return ok;
      }
      case "flush": {
        const snapshot: RankSnapshot = { ...(await runtime.flush(request.step)), seq: ++this.seq };
        this.kept.keep(snapshot, snapshot.states.length);
        return { ...ok, snapshot };
      }
      case "resend": {
        return { ...ok, snapshot: this.kept.resend(request.seq) };
      }
      case "shutdown":
        await runtime.shutdown();
        return ok;
      case "start": {
        // Only the module this rank was given at its own start, never a path from the wire.
        const url = allowedModule(this.options.policy ?? NOTHING_ALLOWED, request.module, this.rankName);
        this.module = (await import(url)) as Record<string, unknown>;
        return { ...ok, result: Object.keys(this.module).filter((k) => typeof this.module[k] === "function") };
      }
      case "call": {
        const fn = this.module[request.fn];
        if (typeof fn !== "function") {
          const available = Object.keys(this.module).filter((k) => typeof this.module[k] === "function");
          throw new Error(
            `the rank module exports no function "${request.fn}"; it exports: ${available.join(", ") || "(none)"}`,
          );
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
   * A flush asked for as a wire frame: the states go straight from the collector's accumulators
   * into the frame when the answer is the collector's values alone (`RankRuntime.flushFrame`);
   * otherwise the answer is the snapshot, framed by `frameOf` (or JSON).
   */
  private async flushFrame(request: FlushRequest): Promise<RankMessage | Uint8Array> {
    const encoder = this.encoderFor(request);
    let seq = 0;
    const flushed = await this.options.runtime.flushFrame(request.step, undefined, (entries, dropped, timing) => {
      // Numbered when taken (synchronously), as the JSON answers are.
      const frame = encoder.encodeTaking(
        this.frameHeader(request.id, request.step, this.seq + 1, dropped, timing),
        entries,
      );
      seq = ++this.seq;
      return frame;
    });
    if ("bytes" in flushed) {
      const timing = flushed.timing;
      this.kept.keep(
        {
          seq,
          step: flushed.step,
          droppedKeyRecords: flushed.droppedKeyRecords,
          bytes: flushed.bytes,
          table: encoder.table,
          stateCount: encoder.lastFrameStates,
          ...(timing === undefined ? {} : { timing }),
        },
        encoder.lastFrameStates,
      );
      return flushed.bytes;
    }
    const snapshot: RankSnapshot = { ...flushed, seq: ++this.seq };
    this.kept.keep(snapshot, snapshot.states.length);
    return { t: "reply", id: request.id, rankName: this.rankName, ok: true, snapshot };
  }

  /**
   * The empty answer to a flush held while registering: no states and no number (it is not kept,
   * and nothing is asked for again); the key-bound count is the last one sent.
   */
  private heldSnapshot(step: number): RankSnapshot {
    return { rankName: this.rankName, step, states: [], droppedKeyRecords: this.kept.lastDroppedKeyRecords };
  }

  /** The key-table encoder of this rank's frames, reset when the request asks this rank to resync. */
  private encoderFor(request: FlushRequest): StateEncoder {
    this.frameEncoder ??= new StateEncoder();
    if (request.resync?.includes(this.rankName) === true && this.resetFor !== request.id) {
      this.frameEncoder.reset();
      this.resetFor = request.id;
    }
    return this.frameEncoder;
  }

  private frameHeader(
    id: number,
    step: number,
    seq: number,
    dropped: number,
    timing: RankTiming | undefined,
  ): Omit<FrameHeader, "session"> {
    return {
      proto: "rankscope",
      v: PROTOCOL_VERSION,
      run: this.options.runId,
      t: "reply",
      id,
      rankName: this.rankName,
      ok: true,
      step,
      seq,
      dropped,
      ...(timing === undefined ? {} : { timing }),
    };
  }

  /**
   * The flush answer as a wire frame, when the request asked for this wire version; undefined
   * (answer in JSON) otherwise, for off-cycle logs, or when a key cannot be framed.
   */
  private frameOf(request: FlushRequest, answer: RankMessage): Uint8Array | undefined {
    if (request.wire !== WIRE_VERSION || answer.t !== "reply" || !answer.ok || answer.snapshot === undefined)
      return undefined;
    const snapshot = answer.snapshot;
    if (
      (snapshot.offCycle !== undefined && snapshot.offCycle.length > 0) ||
      (snapshot.alerts !== undefined && snapshot.alerts.length > 0)
    )
      return undefined;
    const encoder = this.encoderFor(request);
    try {
      return encoder.encode(
        this.frameHeader(answer.id, snapshot.step, snapshot.seq ?? 0, snapshot.droppedKeyRecords, snapshot.timing),
        snapshot.states,
      );
    } catch {
      // A key too long for the frame's length fields: this answer goes as JSON, which carries any key.
      return undefined;
    }
  }

  private encode(message: RankMessage): string {
    return encodeProtocolMessage(this.options.runId, message);
  }
}
