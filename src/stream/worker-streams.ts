/**
 * A user's worker thread's raw values, without a call of its own: when the process's main thread
 * streams metric values (a `per_rank_no_reduce` backend), every worker whose collector linked to
 * it (record from anywhere, `src/core/worker-link.ts`) streams too, under its own recorder (its
 * owner's identity and its `threadId`), into a ring of its own drained by the main thread's
 * writer. docs/stream.md ("Worker threads") and docs/DESIGN.md ("Identity") describe it.
 *
 * The hand-off runs on a `BroadcastChannel` of the process (a port cannot travel on one, a
 * SharedArrayBuffer can):
 * 1. the worker's collector links at its first key; from then its raw values wait in a bounded
 *    buffer (`PendingValues`), and it asks `want`;
 * 2. the main thread (listening from when the stream module loads there) answers `offer` (its
 *    control words, the ring's shape, its recorder, its step) when it streams metric values, `none`
 *    otherwise — then the worker stops buffering, as it does when nobody answers within 5 s; the
 *    main thread also offers to every worker when its stream starts, and says `end` when it stops;
 * 3. on an offer the worker allocates its ring, moves the waiting values into it with their own
 *    timestamps, says `ring`, and from then records straight into the ring; key names follow as
 *    `key` messages, which the main thread forwards to the writer on a port of the ring's own (the
 *    writer waits for a name it has not received yet, see writer.ts).
 * 4. a worker that ends while still waiting (a script that records and never yields to its event
 *    loop, so no answer reaches it) makes the ring itself at its exit, sized to its waiting values,
 *    with control words of its own, and announces it as in 3: the main thread attaches it while it
 *    streams (and drops it otherwise, as its `none` would have said).
 * Values that did not fit the waiting buffer are counted as the ring's drops (`ringFull`).
 */
import { BroadcastChannel, MessageChannel, threadId, type MessagePort } from "node:worker_threads";
import type { Collector, NumericEntry, StreamProducer } from "../core/collector.js";
import { reportError } from "../core/diagnostics.js";
import { registerDrain } from "../core/lifecycle.js";
import { processWide } from "../core/process-wide.js";
import type { Recorder } from "../core/rank-identity.js";
import { isKeyRegistration, isRecorder, isRingShape, type KeyRegistration, type RingAttachment } from "./messages.js";
import { createControl, createRing, type RingShape } from "./ring.js";

/** The process's channel for worker streams (versioned with the state's shape). */
const CHANNEL = "rankscope.stream.v1";
/** Raw values a worker keeps while it waits for the main thread's answer; beyond, counted as dropped. */
const MAX_PENDING_VALUES = 4096;
/** Key names the main thread keeps for a worker ring it has not seen yet. */
const MAX_EARLY_KEYS = 4096;
/** A worker whose question nobody answered within this long stops keeping its raw values (no main thread streams). */
const ANSWER_WITHIN_MS = 5000;

/**
 * What a worker's ring is made from: the writer's control words (a control of its own when the
 * worker makes the ring at its exit, unoffered: nothing to wake, its values carry their times), the
 * ring's shape and the step.
 */
type RingOffer = Pick<StreamOffer, "control" | "capacity" | "values" | "step">;

/** What the main thread offers a worker: where its ring goes and whose it is. */
interface StreamOffer {
  readonly control: Int32Array;
  readonly capacity: number;
  readonly values: number;
  /** The main thread's recorder; the worker's is the same with its own `thread`. */
  readonly owner: Recorder;
  /** The step raw values recorded now belong to. */
  readonly step: number;
}

type StreamLinkMessage =
  | { readonly t: "want"; readonly thread: number }
  | ({ readonly t: "offer"; readonly thread: number | null } & StreamOffer)
  | { readonly t: "none"; readonly thread: number }
  | { readonly t: "ring"; readonly thread: number; readonly shape: RingShape }
  | { readonly t: "key"; readonly thread: number; readonly id: number; readonly name: string }
  | { readonly t: "end" };

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object";
}

/** The message a channel event carries, when it is one of ours (rebuilt from its checked fields). */
function messageOf(event: unknown): StreamLinkMessage | undefined {
  if (!isObject(event)) return undefined;
  const m = event["data"];
  if (!isObject(m)) return undefined;
  const thread = m["thread"];
  const t = m["t"];
  if (t === "end") return { t };
  if (t === "offer") {
    const { control, capacity, values, owner, step } = m;
    if (
      (thread !== null && typeof thread !== "number") ||
      !(control instanceof Int32Array) ||
      typeof capacity !== "number" ||
      typeof values !== "number" ||
      !isRecorder(owner) ||
      typeof step !== "number"
    )
      return undefined;
    return { t, thread, control, capacity, values, owner, step };
  }
  if (typeof thread !== "number") return undefined;
  if (t === "want" || t === "none") return { t, thread };
  if (t === "ring") return isRingShape(m["shape"]) ? { t, thread, shape: m["shape"] } : undefined;
  if (t === "key") return isKeyRegistration(m) ? { t, thread, id: m.id, name: m.name } : undefined;
  return undefined;
}

/**
 * The main thread's side (one per process, listening from when the stream module loads): answers
 * each worker's `want` — an offer while this thread streams metric values (`start`…`end`), `none`
 * otherwise — hands their rings to the writer and forwards their key names.
 */
class WorkerStreamHost {
  private readonly channel = new BroadcastChannel(CHANNEL);
  private readonly keyPorts = new Map<number, MessagePort>();
  private readonly earlyKeys = new Map<number, KeyRegistration[]>();
  private offer: () => StreamOffer | null = () => null;
  private attach: (ring: RingAttachment) => void = () => undefined;

  constructor() {
    this.channel.unref();
    this.channel.onmessage = (event: unknown) => this.receive(messageOf(event));
  }

  /**
   * This thread streams metric values from now on: `offer` says what to offer a worker (null once
   * the stream stopped), `attach` hands a worker's ring to the writer. Workers linked before get
   * the offer now.
   */
  start(offer: () => StreamOffer | null, attach: (ring: RingAttachment) => void): void {
    this.offer = offer;
    this.attach = attach;
    this.post(null);
  }

  /** The stream stopped: workers stop recording into their rings. */
  end(): void {
    this.offer = () => null;
    this.attach = () => undefined;
    this.channel.postMessage({ t: "end" } satisfies StreamLinkMessage);
    for (const port of this.keyPorts.values()) port.close();
    this.keyPorts.clear();
    this.earlyKeys.clear();
  }

  private post(thread: number | null): void {
    const offer = this.offer();
    if (offer !== null) this.channel.postMessage({ t: "offer", thread, ...offer } satisfies StreamLinkMessage);
    else if (thread !== null) this.channel.postMessage({ t: "none", thread } satisfies StreamLinkMessage);
  }

  private receive(message: StreamLinkMessage | undefined): void {
    if (message === undefined) return;
    switch (message.t) {
      case "want":
        this.post(message.thread);
        return;
      case "ring":
        this.attachRing(message.thread, message.shape);
        return;
      case "key": {
        if (this.offer() === null) return;
        const registration: KeyRegistration = { id: message.id, name: message.name };
        const port = this.keyPorts.get(message.thread);
        if (port !== undefined) port.postMessage(registration);
        else this.keepEarly(message.thread, registration);
        return;
      }
      default:
        return;
    }
  }

  private attachRing(thread: number, shape: RingShape): void {
    const offer = this.offer();
    if (offer === null || this.keyPorts.has(thread)) return;
    const keys = new MessageChannel();
    keys.port1.unref();
    this.keyPorts.set(thread, keys.port1);
    this.attach({ shape, keys: keys.port2, recorder: { ...offer.owner, thread } });
    for (const registration of this.earlyKeys.get(thread) ?? []) keys.port1.postMessage(registration);
    this.earlyKeys.delete(thread);
  }

  private keepEarly(thread: number, registration: KeyRegistration): void {
    const kept = this.earlyKeys.get(thread) ?? [];
    if (kept.length >= MAX_EARLY_KEYS) {
      reportError(
        "stream.workerKeys",
        `stream: worker thread ${thread} named more than ${MAX_EARLY_KEYS} keys before its ring arrived; its values under the others are not written`,
      );
      return;
    }
    kept.push(registration);
    this.earlyKeys.set(thread, kept);
  }
}

/** The process's host (the main thread's; created when the stream module loads there). */
export function workerStreamHost(): WorkerStreamHost {
  return processWide("workerStreamHost", () => new WorkerStreamHost());
}

/** A worker's raw values while it waits for the main thread's answer (bounded; the rest counted). */
class PendingValues implements StreamProducer {
  readonly entries: NumericEntry[] = [];
  readonly values: number[] = [];
  readonly steps: number[] = [];
  readonly times: number[] = [];
  dropped = 0;

  record(entry: NumericEntry, value: number, step: number): void {
    if (this.entries.length >= MAX_PENDING_VALUES) {
      this.dropped++;
      return;
    }
    this.entries.push(entry);
    this.values.push(value);
    this.steps.push(step);
    this.times.push(Date.now());
  }

  clear(): void {
    this.entries.length = 0;
    this.values.length = 0;
    this.steps.length = 0;
    this.times.length = 0;
    this.dropped = 0;
  }
}

/** What the worker's side needs of its thread's stream service. */
interface WorkerStreamTarget {
  /** Start producing into `shape` under `control`, key names going to `postKey`; returns the metric producer. */
  beginLinked(
    control: Int32Array,
    shape: RingShape,
    postKey: (registration: KeyRegistration) => void,
  ): WorkerRingProducer;
  /** This thread already streams through a link of its own (`attachStreamLink`): its producer. */
  linkedProducer(): StreamProducer | null;
  /** Stop producing (the main thread's stream ended). */
  endLinked(): void;
}

/** The worker's producer once linked: records, replays waiting values with their own times, counts drops. */
interface WorkerRingProducer extends StreamProducer {
  recordAt(entry: NumericEntry, value: number, step: number, timestamp: number): void;
  countDropped(n: number): void;
}

/**
 * The worker's side: from the collector's link on, its raw values wait for the main thread's
 * answer, then go into a ring of its own (or nowhere, when the main thread does not stream).
 */
export function linkWorkerStream(collector: Collector, target: WorkerStreamTarget): void {
  const channel = new BroadcastChannel(CHANNEL);
  channel.unref();
  const pending = new PendingValues();
  let producer: StreamProducer | null = null;
  collector.stream = pending;
  const adopt = (offer: RingOffer): void => {
    if (producer !== null) return;
    collector.step = Math.max(collector.step, offer.step);
    const own = target.linkedProducer();
    if (own !== null) {
      producer = own;
    } else {
      const shape = createRing(offer.capacity, offer.values);
      channel.postMessage({ t: "ring", thread: threadId, shape } satisfies StreamLinkMessage);
      const ring = target.beginLinked(offer.control, shape, (r) =>
        channel.postMessage({ t: "key", thread: threadId, id: r.id, name: r.name } satisfies StreamLinkMessage),
      );
      for (let i = 0; i < pending.entries.length; i++) {
        const entry = pending.entries[i];
        if (entry !== undefined)
          ring.recordAt(entry, pending.values[i] ?? 0, pending.steps[i] ?? 0, pending.times[i] ?? 0);
      }
      if (pending.dropped > 0) ring.countDropped(pending.dropped);
      producer = ring;
    }
    pending.clear();
    if (collector.stream === pending || collector.stream === null) collector.stream = producer;
  };
  const release = (): void => {
    if (collector.stream === pending || (producer !== null && collector.stream === producer)) collector.stream = null;
    if (producer !== null && target.linkedProducer() !== producer) target.endLinked();
    producer = null;
    pending.clear();
  };
  // A main thread without rankscope never answers: stop waiting (and buffering) after a while.
  const unanswered = setTimeout(() => {
    if (producer === null) release();
  }, ANSWER_WITHIN_MS);
  unanswered.unref();
  channel.onmessage = (event: unknown) => {
    const message = messageOf(event);
    if (message === undefined) return;
    if (message.t === "offer" && (message.thread === null || message.thread === threadId)) {
      clearTimeout(unanswered);
      adopt(message);
    } else if (message.t === "none" && message.thread === threadId && producer === null) {
      clearTimeout(unanswered);
      release();
    } else if (message.t === "end") {
      release();
    }
  };
  channel.postMessage({ t: "want", thread: threadId } satisfies StreamLinkMessage);
  // A worker that ends while its question is still unanswered (a script that records and never
  // yields to its event loop): its waiting values leave with it in a ring of its own, made here,
  // which the main thread attaches as if it had offered it (or drops, as it would have answered
  // `none`, when it does not stream). Not possible after terminate(), which runs no exit.
  registerDrain({
    name: `worker thread ${threadId} raw values`,
    stage: "producer",
    exit: () => {
      if (producer !== null || (pending.entries.length === 0 && pending.dropped === 0)) return;
      clearTimeout(unanswered);
      adopt({ control: createControl(0), capacity: pending.entries.length, values: 0, step: collector.step });
    },
  });
}
