/**
 * The stream's file thread: it makes the writer's `write(2)` calls, so the writer formats the next
 * batch of lines while this one goes to the file. On this project's VM a write into memory the
 * guest has never touched costs about as much as formatting the lines, so the two overlap.
 *
 * One write is in flight at a time, in order. The writer owns the file (opens, checks, closes it)
 * and hands over a buffer index, a length and the descriptor; it submits the next write only after
 * it has taken the result of this one, so a descriptor it closes after an error is never written
 * again. Written records are counted here (`COUNTERS.WRITTEN`); a failure is posted on `errors`
 * and flagged for the writer, which counts and reports it.
 */
import { writeSync } from "node:fs";
import { parentPort, receiveMessageOnPort, workerData, type MessagePort } from "node:worker_threads";
import { COUNTERS, SharedCounters } from "./ring.js";
import { describeError } from "../core/diagnostics.js";

/** Int32 indices of the file thread's shared state. */
export const FILE_STATE = {
  /** Writes submitted (a counter): the writer bumps it, then notifies. */
  REQUEST: 0,
  /** Writes finished (a counter): this thread sets it to REQUEST, then notifies. */
  DONE: 1,
  /** The write's descriptor, buffer index, byte length and record count. */
  FD: 2,
  BUFFER: 3,
  LENGTH: 4,
  RECORDS: 5,
  /** 1 when the last write failed (its error is on the `errors` port). */
  FAILED: 6,
  /** 1: finish the write in flight, then end. */
  STOP: 7,
  /** 1 while the thread runs: until then (and if it ever ends early) the writer writes itself. */
  READY: 8,
} as const;
/** Int32 words of the state. */
export const FILE_STATE_WORDS = 10;

/** What the file thread is started with. */
export interface FileThreadData {
  readonly fileState: Int32Array;
  /** The writer's control buffer: this thread adds to `COUNTERS.WRITTEN` and wakes the writer on an error. */
  readonly control: Int32Array;
  /** The writer's line buffers, by index (a buffer that grows is sent again on `buffers`). */
  readonly initialBuffers: readonly SharedArrayBuffer[];
  /** `{ index, buffer }` when the writer replaced a buffer by a larger one. */
  readonly buffers: MessagePort;
  /** `{ code, message }` of a failed write, posted before the write is flagged done. */
  readonly errors: MessagePort;
  /** The writer's wake word in `control`, bumped and notified at start and after a failure. */
  readonly wakeIndex: number;
}

/** A buffer the writer replaced by a larger one, by index (posted on `buffers`). */
export interface FileThreadBuffer {
  readonly index: number;
  readonly buffer: SharedArrayBuffer;
}

/** A failed write, posted on `errors` before the write is flagged done. */
interface FileThreadError {
  readonly code: string;
  readonly message: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object";
}

function isFileThreadData(value: unknown): value is FileThreadData {
  return (
    isRecord(value) &&
    value["fileState"] instanceof Int32Array &&
    value["control"] instanceof Int32Array &&
    Array.isArray(value["initialBuffers"])
  );
}

function isFileThreadBuffer(value: unknown): value is FileThreadBuffer {
  return isRecord(value) && typeof value["index"] === "number" && value["buffer"] instanceof SharedArrayBuffer;
}

export function isFileThreadError(value: unknown): value is FileThreadError {
  return isRecord(value) && typeof value["code"] === "string" && typeof value["message"] === "string";
}

function run(data: FileThreadData): void {
  const state = data.fileState;
  const counters = new SharedCounters(data.control);
  const views = data.initialBuffers.map((b) => new Uint8Array(b));
  let done = Atomics.load(state, FILE_STATE.DONE);
  for (;;) {
    const request = Atomics.load(state, FILE_STATE.REQUEST);
    if (request === done) {
      if (Atomics.load(state, FILE_STATE.STOP) === 1) break;
      Atomics.wait(state, FILE_STATE.REQUEST, request);
      continue;
    }
    for (let m = receiveMessageOnPort(data.buffers); m !== undefined; m = receiveMessageOnPort(data.buffers)) {
      const replaced: unknown = m.message;
      if (isFileThreadBuffer(replaced)) views[replaced.index] = new Uint8Array(replaced.buffer);
    }
    const buffer = Atomics.load(state, FILE_STATE.BUFFER);
    const length = Atomics.load(state, FILE_STATE.LENGTH);
    const fd = Atomics.load(state, FILE_STATE.FD);
    const records = Atomics.load(state, FILE_STATE.RECORDS);
    const bytes = views[buffer];
    let failed = 0;
    try {
      if (bytes === undefined)
        throw new RangeError(`the writer named line buffer ${buffer}, which this thread was never given`);
      let offset = 0;
      while (offset < length) offset += writeSync(fd, bytes, offset, length - offset);
      counters.add(COUNTERS.WRITTEN, records);
    } catch (error) {
      const failure: FileThreadError = {
        code: isRecord(error) && typeof error["code"] === "string" ? error["code"] : "",
        message: describeError(error),
      };
      data.errors.postMessage(failure);
      failed = 1;
    }
    state[FILE_STATE.FAILED] = failed;
    done = request;
    Atomics.store(state, FILE_STATE.DONE, done);
    Atomics.notify(state, FILE_STATE.DONE);
    if (failed === 1) {
      Atomics.add(data.control, data.wakeIndex, 1);
      Atomics.notify(data.control, data.wakeIndex);
    }
  }
  data.buffers.close();
  data.errors.close();
}

const data: unknown = workerData;
if (parentPort !== null && isFileThreadData(data)) {
  Atomics.store(data.fileState, FILE_STATE.READY, 1);
  // Let the writer notice now rather than at its next interval.
  Atomics.add(data.control, data.wakeIndex, 1);
  Atomics.notify(data.control, data.wakeIndex);
  try {
    run(data);
  } finally {
    // Ended (stopped, or by an error of its own): a writer waiting on a write stops waiting.
    Atomics.store(data.fileState, FILE_STATE.READY, 0);
    Atomics.notify(data.fileState, FILE_STATE.DONE);
  }
}
