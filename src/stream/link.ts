/**
 * Linking a user's worker thread to this process's stream writer (`streamLinkForWorker()` in the
 * thread that runs the stream, `attachStreamLink(port)` in the worker).
 *
 * The hand-off, on a MessageChannel of its own:
 * 1. the stream's side posts the control words and the ring's shape (`LinkOffer`);
 * 2. the worker allocates a ring of its own and answers with it and a key port (`LinkRing`);
 * 3. the stream's side forwards that ring to its writer, which drains it with its own.
 * A ring must exist before the worker's first value, hence the explicit hand-off.
 */
import { MessageChannel, receiveMessageOnPort, threadId, type MessagePort } from "node:worker_threads";
import { isRingAttachment, type RingAttachment } from "./messages.js";
import { createRing, type RingShape } from "./ring.js";

/** Step 1: what the worker needs to build its ring. */
interface LinkOffer {
  readonly type: "control";
  readonly control: Int32Array;
  readonly capacity: number;
  readonly values: number;
}

/** Step 2: the worker's ring, the port its key registrations arrive on, and its thread id. */
interface LinkRing extends RingAttachment {
  readonly type: "ring";
  readonly thread: number;
}

/** What the worker streams into: the shared control words, its ring, and its key port. */
interface AcceptedLink {
  readonly control: Int32Array;
  readonly shape: RingShape;
  readonly keys: MessagePort;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object";
}

function isLinkOffer(value: unknown): value is LinkOffer {
  return (
    isRecord(value) &&
    value["type"] === "control" &&
    value["control"] instanceof Int32Array &&
    typeof value["capacity"] === "number" &&
    typeof value["values"] === "number"
  );
}

function isLinkRing(value: unknown): value is LinkRing {
  return isRecord(value) && value["type"] === "ring" && typeof value["thread"] === "number" && isRingAttachment(value);
}

/**
 * The stream's side: a port to hand to the worker. `forward` is called once, with the worker's
 * ring, when it arrives.
 */
export function offerLink(offer: Omit<LinkOffer, "type">, forward: (ring: LinkRing) => void): MessagePort {
  const link = new MessageChannel();
  const message: LinkOffer = { type: "control", ...offer };
  link.port1.postMessage(message);
  link.port1.on("message", (answer: unknown) => {
    if (!isLinkRing(answer)) return;
    forward(answer);
    link.port1.close();
  });
  link.port1.unref();
  return link.port2;
}

/**
 * The worker's side: take the offer waiting on `port`, answer with a ring of this thread's own,
 * and close the port.
 * @throws TypeError for a port that did not come from `offerLink`
 */
export function acceptLink(port: MessagePort): AcceptedLink {
  const offer: unknown = receiveMessageOnPort(port)?.message;
  if (!isLinkOffer(offer))
    throw new TypeError("attachStreamLink(port) takes the port returned by streamLinkForWorker() in the main thread");
  const shape = createRing(offer.capacity, offer.values);
  const keys = new MessageChannel();
  const answer: LinkRing = { type: "ring", shape, keys: keys.port2, thread: threadId };
  port.postMessage(answer, [keys.port2]);
  port.close();
  keys.port1.unref();
  return { control: offer.control, shape, keys: keys.port1 };
}
