/**
 * An agent's side of the host protocol, towards whoever serves it: the controller, or the rack
 * agent of its rack (docs/scale.md, "A deeper tree"). A host agent and a rack agent both use it:
 * it registers (and registers again when a new serving process asks or announces itself), takes
 * the acknowledgements, keeps every answer until it is acknowledged and sends it again before the
 * next ones (`carried`), and encodes the answers in the agent's own key-table session.
 */
import { randomUUID } from "node:crypto";
import { describeError, reportError } from "../../core/diagnostics.js";
import type { KeyState } from "../../core/key-state.js";
import { reportIgnored } from "../protocol/messages.js";
import { SealedRequestError, type OpenedMessage, type SealedNats } from "../protocol/sealed-nats.js";
import { StateEncoder } from "../wire/codec.js";
import { KeptHostAnswers, type KeptHostAnswer } from "./kept-host-answers.js";
import {
  decodeHostMessage,
  encodeHostMessage,
  hostSubjects,
  type HostMessage,
  type HostStatesHeader,
} from "./messages.js";

/** A flush request from the serving end. */
export type HostFlushRequest = Extract<HostMessage, { t: "hostFlush" }>;

/** Who the link is, and whom it registers with. */
export interface UpwardConfig {
  readonly runId: string;
  /** The agent's id upwards: its host id, or its rack id. */
  readonly id: string;
  /** The rack agent it registers with; undefined: the controller. */
  readonly parent: string | undefined;
  /** The NATS URL without credentials (for messages). */
  readonly url: string;
  /** "host agent h1", "rack agent r0" (for messages). */
  readonly what: string;
  readonly joinDeadlineMs: number;
}

/** What the agent does with what arrives from above. */
export interface UpwardHandlers {
  /** A flush request from the process it registered with, to answer on `reply` (`UpwardLink.answer`). */
  flush(request: HostFlushRequest, reply: string): Promise<void>;
  /** The serving end logged (or passed up and had acknowledged) these answers. */
  acknowledged(released: readonly KeptHostAnswer[]): void;
  /** The serving end asked for the key table and rank list again. */
  resync(): void;
  /** `hostInit` or `hostShutdown` on the agent's control subject. */
  control(msg: OpenedMessage, request: HostMessage): Promise<void>;
}

/** One agent's link upwards. */
export class UpwardLink {
  /** This agent process's id in its answers: the serving end takes each (agent, number) once. */
  readonly agentId = randomUUID();
  readonly kept: KeptHostAnswers;
  private readonly encoder = new StateEncoder();
  readonly subjects: ReturnType<typeof hostSubjects>;
  /** The serving process this agent registered with (`hostRegistered.server`). */
  private serverId: string | undefined;
  private registering: Promise<void> | undefined;
  /** Bytes of answer frames sent. */
  bytesOut = 0;
  private handlers: UpwardHandlers | undefined;

  constructor(
    private readonly nc: SealedNats,
    readonly config: UpwardConfig,
  ) {
    this.kept = new KeptHostAnswers(config.id);
    this.subjects = hostSubjects(config.runId, config.parent);
  }

  /** Subscribe to the flush and control subjects. */
  start(handlers: UpwardHandlers): void {
    this.handlers = handlers;
    this.nc.subscribe(this.subjects.flush, (msg) => void this.onFlush(msg, handlers));
    this.nc.subscribe(this.subjects.control(this.config.id), (msg) => {
      const request = decodeHostMessage(this.config.runId, msg.data, `NATS subject ${msg.subject}`);
      if (request !== undefined) void handlers.control(msg, request);
    });
  }

  private async onFlush(msg: OpenedMessage, handlers: UpwardHandlers): Promise<void> {
    const { runId, id } = this.config;
    const request = decodeHostMessage(runId, msg.data, `NATS subject ${msg.subject}`);
    if (request === undefined) return;
    if (request.t === "hostAck") {
      const of = request.agents?.[id];
      if (of === undefined || of === this.agentId) handlers.acknowledged(this.kept.acknowledge(request.acks[id]));
      return;
    }
    if (request.t === "hostHello") {
      if (request.server !== this.serverId) this.registerAgain(`${request.server} announced itself`);
      return;
    }
    if (request.t !== "hostFlush") {
      reportIgnored(
        "malformed",
        `a "${request.t}" message arrived on ${msg.subject}, which takes only "hostFlush", "hostAck" and "hostHello"`,
      );
      return;
    }
    if (msg.reply === undefined) return;
    // A flush from a serving process this agent did not register with (its predecessor is gone):
    // not answered (what it holds waits for the next flush), and the agent registers again.
    if (request.server !== undefined && this.serverId !== undefined && request.server !== this.serverId) {
      this.registerAgain(`a flush came from ${request.server}`);
      return;
    }
    if (request.resync.includes(id)) {
      this.encoder.reset();
      handlers.resync();
    }
    await handlers.flush(request, msg.reply);
  }

  private registerAgain(why: string): void {
    this.registering ??= this.register()
      .catch((error: unknown) =>
        reportError(
          `host.reregister:${this.config.id}`,
          `${this.config.what} could not register again (${why}): ${describeError(error)}`,
        ),
      )
      .finally(() => (this.registering = undefined));
  }

  /** Register with the serving end, retrying until it answers or the join deadline passes (then throw, naming the URL). */
  async register(): Promise<void> {
    const { runId, id, url, what, joinDeadlineMs, parent } = this.config;
    const deadline = Date.now() + joinDeadlineMs;
    const text = encodeHostMessage(runId, { t: "hostRegister", host: id, pid: process.pid, agent: this.agentId });
    const serving = parent === undefined ? `no controller of run ${runId}` : `no rack agent ${parent} of run ${runId}`;
    let lastError: unknown;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `${what}: ${serving} answered on NATS at ${url} within ${joinDeadlineMs} ms (${describeError(lastError)}); is it serving hosts (serveHostsOverNats, startRackAgent)?`,
        );
      }
      try {
        const answer = await this.nc.request(this.subjects.register, text, Math.min(left, 2000));
        const message = decodeHostMessage(runId, answer.data, "the serving end");
        if (message?.t === "hostRegistered" && message.host === id) {
          if (!message.ok) throw new Error(`${what}: registration refused: ${message.error ?? "no reason given"}`);
          if (message.server !== this.serverId && this.serverId !== undefined) {
            // A new serving process holds no key table nor rank list of ours: start both anew.
            this.encoder.reset();
            this.handlers?.resync();
          }
          this.serverId = message.server;
          return;
        }
      } catch (error) {
        if (!(error instanceof SealedRequestError)) throw error;
        lastError = error; // no serving end yet, or a timeout: try again until the deadline
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /**
   * Answer a flush: the earlier answers not acknowledged yet go first, once more each (the serving
   * end takes each number once), then this one, kept until acknowledged. Returns the answers
   * dropped at the bound (counted lost): what they hold need not be kept below any longer.
   */
  answer(
    reply: string,
    request: HostFlushRequest,
    header: Omit<HostStatesHeader, "session"> & { seq: number },
    states: readonly KeyState[],
  ): KeptHostAnswer[] {
    const taken = new Set(request.taken?.[this.config.id]);
    for (const earlier of this.kept.unacknowledged)
      if (!taken.has(earlier.header.seq)) this.send(reply, { ...earlier.header, carried: true }, earlier.states);
    const dropped = this.kept.keep({ header, states });
    this.send(reply, header, states);
    return dropped;
  }

  private send(reply: string, header: Omit<HostStatesHeader, "session">, states: readonly KeyState[]): void {
    const frame = this.encoder.encode(header, states);
    this.nc.publish(reply, frame);
    this.bytesOut += frame.length;
  }

  /** Tell the serving end this agent leaves (best effort: a connection already gone just means it names our ranks missing). */
  deregister(reason: string): void {
    try {
      this.nc.publish(
        this.subjects.deregister,
        encodeHostMessage(this.config.runId, { t: "hostDeregister", host: this.config.id, reason }),
      );
    } catch {
      // The connection is already gone.
    }
  }

  /** Answer a control request (`hostReply`). */
  reply(msg: OpenedMessage, id: number, error?: string): void {
    const answer: HostMessage = {
      t: "hostReply",
      id,
      host: this.config.id,
      ok: error === undefined,
      ...(error === undefined ? {} : { error }),
    };
    this.nc.respond(msg, encodeHostMessage(this.config.runId, answer));
  }
}
