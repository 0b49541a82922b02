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
import { COUNTERS } from "./ring.js";

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

function run(data: FileThreadData): void {
  const state = data.fileState;
  const counters = new Float64Array(data.control.buffer);
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
      const { index, buffer } = m.message as { index: number; buffer: SharedArrayBuffer };
      views[index] = new Uint8Array(buffer);
    }
    const bytes = views[state[FILE_STATE.BUFFER] as number] as Uint8Array;
    const length = state[FILE_STATE.LENGTH] as number;
    const fd = state[FILE_STATE.FD] as number;
    let failed = 0;
    try {
      let offset = 0;
      while (offset < length) offset += writeSync(fd, bytes, offset, length - offset);
      counters[COUNTERS.WRITTEN] = (counters[COUNTERS.WRITTEN] as number) + (state[FILE_STATE.RECORDS] as number);
    } catch (error) {
      const e = error as { code?: unknown; message?: unknown } | null;
      data.errors.postMessage({ code: typeof e?.code === "string" ? e.code : "", message: typeof e?.message === "string" ? e.message : String(error) });
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

if (parentPort !== null && workerData !== null && typeof workerData === "object" && "fileState" in workerData) {
  const data = workerData as FileThreadData;
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
