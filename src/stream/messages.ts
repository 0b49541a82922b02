/**
 * What the stream's threads say to each other: the writer's start data, its commands from the
 * stream's thread, its events back, and key registrations from each ring's producer. Messages
 * cross a thread boundary, so each is checked by a guard where it arrives.
 */
import { MessagePort } from "node:worker_threads";
import type { StreamRecord } from "../core/metric.js";
import type { Recorder } from "../core/rank-identity.js";
import type { StreamCounts } from "./format.js";
import type { RingShape } from "./ring.js";

/** A ring as the writer is told about it. */
export interface RingAttachment {
  readonly shape: RingShape;
  /** Carries `KeyRegistration`s from the ring's producer. */
  readonly keys: MessagePort;
  /** Who records into this ring, when not the writer's own recorder (a user's worker thread). */
  readonly recorder?: Recorder;
}

/** What the writer is started with. */
export interface WriterData {
  readonly control: Int32Array;
  readonly rings: readonly RingAttachment[];
  /** Batches, errors and acknowledgements to the main thread. */
  readonly events: MessagePort;
  readonly file: string;
  readonly flushMs: number;
  /** Make the writes on a file thread (the `fileThread` option). */
  readonly fileThread: boolean;
  /** Whose ring the writer drains first: the thread that started it (its lines' and records' identity). */
  readonly recorder: Recorder;
  /** Batches the main thread may have untaken before further ones are dropped (and counted). */
  readonly maxBatchesInFlight: number;
}

/** A command to the running writer: drain one more ring (another producing thread's). */
export interface WriterCommand {
  readonly type: "ring";
  readonly ring: RingAttachment;
}

/** Messages the writer posts on `events`. */
export type WriterEvent =
  | { readonly type: "batch"; readonly records: StreamRecord[] }
  | { readonly type: "error"; readonly code: string; readonly message: string }
  | { readonly type: "flushed"; readonly request: number }
  | { readonly type: "done"; readonly counts: StreamCounts };

/** A key's ring id and name, posted by a producer before the first slot that uses the id. */
export interface KeyRegistration {
  readonly id: number;
  readonly name: string;
}

/** Where a thread's key names go (its writer's port, or the main thread for a worker linked by its collector). */
export interface KeyPoster {
  postMessage(registration: KeyRegistration): void;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object";
}

/** Is `value` the writer's start data? (A worker module runs only when its data says it is its own.) */
export function isWriterData(value: unknown): value is WriterData {
  return (
    isRecord(value) &&
    value["control"] instanceof Int32Array &&
    Array.isArray(value["rings"]) &&
    typeof value["file"] === "string" &&
    isRecorder(value["recorder"])
  );
}

/** Is `value` a `Recorder` (a structured clone of one)? */
export function isRecorder(value: unknown): value is Recorder {
  return (
    isRecord(value) &&
    (value["role"] === "controller" || value["role"] === "rank") &&
    typeof value["rank"] === "number" &&
    typeof value["rankName"] === "string" &&
    typeof value["thread"] === "number"
  );
}

/** Is `value` a ring's shape and key port (a structured clone of a `RingAttachment`)? */
export function isRingAttachment(value: unknown): value is RingAttachment {
  if (!isRecord(value)) return false;
  const shape = value["shape"];
  return (
    value["keys"] instanceof MessagePort &&
    isRingShape(shape) &&
    (value["recorder"] === undefined || isRecorder(value["recorder"]))
  );
}

/** Is `value` a ring's shape (a structured clone of a `RingShape`)? */
export function isRingShape(value: unknown): value is RingShape {
  return (
    isRecord(value) &&
    value["buffer"] instanceof SharedArrayBuffer &&
    typeof value["capacity"] === "number" &&
    typeof value["values"] === "number"
  );
}

export function isWriterCommand(value: unknown): value is WriterCommand {
  return isRecord(value) && value["type"] === "ring" && isRingAttachment(value["ring"]);
}

const COUNT_NAMES = ["written", "dropped", "ringFull", "writeFailed", "backendDropped"] as const;

function isStreamCounts(value: unknown): value is StreamCounts {
  return isRecord(value) && COUNT_NAMES.every((name) => typeof value[name] === "number");
}

export function isWriterEvent(value: unknown): value is WriterEvent {
  if (!isRecord(value)) return false;
  switch (value["type"]) {
    case "batch":
      return Array.isArray(value["records"]);
    case "error":
      return typeof value["code"] === "string" && typeof value["message"] === "string";
    case "flushed":
      return typeof value["request"] === "number";
    case "done":
      return isStreamCounts(value["counts"]);
    default:
      return false;
  }
}

export function isKeyRegistration(value: unknown): value is KeyRegistration {
  return isRecord(value) && typeof value["id"] === "number" && typeof value["name"] === "string";
}
