/**
 * A NATS connection that speaks only sealed messages (`seal.ts`): what the controller, ranks and
 * host agents publish is sealed with the run key, and only what opens — authenticated, not seen
 * before, within the window — reaches their handlers; everything else is dropped and counted by
 * kind (`ignoredMessageCounts()`: `unauthenticated`, `replayed`, `stale`).
 *
 * The connection itself (servers, credentials, TLS, reconnects) is made elsewhere; this wraps it.
 * Loaded only with the NATS carrier.
 */
import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import { nats } from "./nats-client.js";
import { reportIgnored } from "./messages.js";
import { Opener, RunKey, Sealer } from "./seal.js";

/** A message that opened: its plaintext, where it came in, and who sealed it. */
export interface OpenedMessage {
  readonly subject: string;
  /** Where the sender wants its answer (a request's inbox). */
  readonly reply: string | undefined;
  readonly data: Uint8Array;
  /** The sealing connection's id (hex): one per connection of a controller, rank or agent. */
  readonly sender: string;
}

/** A request that no one answered in time, or that the server said no one listens to. */
export class SealedRequestError extends Error {
  override name = "SealedRequestError";
}

/** The status the server answers a request with when nothing subscribes to its subject (NATS "no responders"). */
const NO_RESPONDERS = 503;

/**
 * The inbox prefix the connection was made with (`inboxPrefix`, which server permissions may
 * require), as the client's own requests use it; the default `_INBOX` otherwise. The client keeps
 * its options on the connection object, outside its interface: read through guards.
 */
function inboxPrefixOf(nc: NatsConnection): string | undefined {
  const options: unknown = "options" in nc ? nc.options : undefined;
  const prefix: unknown =
    options !== null && typeof options === "object" && "inboxPrefix" in options ? options.inboxPrefix : undefined;
  return typeof prefix === "string" && prefix.length > 0 ? prefix : undefined;
}

/** One NATS connection of a run, sealing what it sends and opening what it receives. */
export class SealedNats {
  private readonly sealer: Sealer;
  private readonly opener: Opener;

  constructor(
    /** The connection (for its status, statistics, draining and closing). */
    readonly nc: NatsConnection,
    runKey: RunKey,
  ) {
    this.sealer = new Sealer(runKey);
    this.opener = new Opener(runKey);
  }

  /** Seal and publish `payload` on `subject` (with `reply`, the inbox the answer goes to). */
  publish(subject: string, payload: string | Uint8Array, reply?: string): void {
    this.nc.publish(subject, this.sealer.seal(subject, reply, payload), reply === undefined ? undefined : { reply });
  }

  /** Answer a request on its reply subject; false when it has none. */
  respond(request: OpenedMessage, payload: string | Uint8Array): boolean {
    if (request.reply === undefined) return false;
    this.publish(request.reply, payload);
    return true;
  }

  /** Subscribe; `handler` gets only the messages that open (the rest are counted and reported). */
  subscribe(subject: string, handler: (message: OpenedMessage) => void): Subscription {
    return this.nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err !== null) return;
        const opened = this.open(msg);
        if (opened !== undefined) handler(opened);
      },
    });
  }

  /** Open one received message; undefined (counted, reported) when it does not open. */
  open(msg: Msg): OpenedMessage | undefined {
    const opened = this.opener.open(msg.subject, msg.reply, msg.data);
    if (!opened.ok) {
      reportIgnored(opened.kind, `a message on NATS subject ${msg.subject} is dropped: ${opened.detail}`);
      return undefined;
    }
    return {
      subject: msg.subject,
      reply: msg.reply === "" ? undefined : msg.reply,
      data: opened.data,
      sender: opened.sender,
    };
  }

  /**
   * A request: publish on `subject` with a fresh inbox, resolve with the first answer that opens
   * within `timeoutMs` (a forged or replayed answer on the inbox is counted and does not end the
   * wait). Rejects with `SealedRequestError` at the deadline, or at once when the server says
   * nothing subscribes to `subject`.
   */
  request(subject: string, payload: string | Uint8Array, timeoutMs: number): Promise<OpenedMessage> {
    const inbox = nats.createInbox(inboxPrefixOf(this.nc));
    return new Promise((resolve, reject) => {
      let done = false;
      const finish = (settle: () => void): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        sub.unsubscribe();
        settle();
      };
      const sub = this.nc.subscribe(inbox, {
        callback: (err, msg) => {
          if (err !== null) return;
          if (msg.data.length === 0 && msg.headers?.code === NO_RESPONDERS) {
            finish(() => reject(new SealedRequestError(`no responders on ${subject}`)));
            return;
          }
          const opened = this.open(msg);
          if (opened !== undefined) finish(() => resolve(opened));
        },
      });
      const timer = setTimeout(
        () => finish(() => reject(new SealedRequestError(`no answer on ${subject} within ${timeoutMs} ms`))),
        timeoutMs,
      );
      try {
        this.publish(subject, payload, inbox);
      } catch (error) {
        finish(() => reject(error instanceof Error ? error : new Error(String(error))));
      }
    });
  }
}
