/**
 * The worker thread the `store` backend writes through: it owns the `StoreWriter` (SQLite calls
 * are synchronous), so the user's thread only posts batches. Messages are handled in order;
 * each gets a reply with its id, carrying the error message when it failed.
 */
import { parentPort, workerData } from "node:worker_threads";
import { describeError } from "../../core/diagnostics.js";
import { StoreWriter, type StoreWriterOptions, type WriteBatch, type WriterStatus } from "../../store/writer.js";

/** A request to the writer thread. */
export type WorkerRequest =
  | {
      readonly id: number;
      readonly op: "open";
      readonly options: StoreWriterOptions;
      readonly commitIntervalMs: number;
    }
  | { readonly id: number; readonly op: "write"; readonly batch: WriteBatch }
  | { readonly id: number; readonly op: "finish"; readonly status: WriterStatus };

/** The writer thread's answer to one request. */
export interface WorkerReply {
  readonly id: number;
  readonly error?: string;
}

/** What the writer thread is started with. */
export interface WriterThreadData {
  /** `[0]`: the id of the last request handled, so the main thread can wait for it synchronously at exit. */
  readonly progress?: Int32Array;
}

let writer: StoreWriter | null = null;
/** `workerData.progress`, when the backend passed it (a structured clone of `WriterThreadData`). */
const progress = isThreadData(workerData) ? workerData.progress : undefined;

function isThreadData(data: unknown): data is WriterThreadData {
  return (
    typeof data === "object" &&
    data !== null &&
    (!("progress" in data) || data.progress === undefined || data.progress instanceof Int32Array)
  );
}

function handle(request: WorkerRequest): void {
  switch (request.op) {
    case "open":
      writer = StoreWriter.open(request.options);
      commitIntervalMs = request.commitIntervalMs;
      return;
    case "write":
      if (writer === null) throw new Error("the store was not opened (its init failed)");
      writer.write(request.batch);
      return;
    case "finish":
      writer?.finish(request.status);
      writer = null;
      return;
  }
}

const queue: WorkerRequest[] = [];
let scheduled = false;
/** At most one write transaction per this many ms; batches arriving in between join the next one. */
let commitIntervalMs = 0;
let lastCommit = 0;

/**
 * Handle what has arrived, in order. Writes queued back to back (the user's loop flushed faster
 * than one transaction each) go in one transaction: every page a key touches is written once.
 */
function drainQueue(): void {
  scheduled = false;
  for (let head = queue.shift(); head !== undefined; head = queue.shift()) {
    const requests = [head];
    const batches: WriteBatch[] = [];
    if (head.op === "write") {
      batches.push(head.batch);
      for (let next = queue[0]; next?.op === "write"; next = queue[0]) {
        batches.push(next.batch);
        requests.push(next);
        queue.shift();
      }
    }
    let error: string | undefined;
    try {
      if (head.op === "write") {
        if (writer === null) throw new Error("the store was not opened (its init failed)");
        writer.writeAll(batches);
      } else handle(head);
    } catch (e) {
      error = describeError(e);
    }
    for (const r of requests)
      parentPort?.postMessage((error === undefined ? { id: r.id } : { id: r.id, error }) satisfies WorkerReply);
    if (progress !== undefined) {
      Atomics.store(progress, 0, requests[requests.length - 1]?.id ?? head.id);
      Atomics.notify(progress, 0);
    }
  }
  lastCommit = performance.now();
}

parentPort?.on("message", (request: WorkerRequest) => {
  queue.push(request);
  if (scheduled) return;
  scheduled = true;
  // A key's rows share pages, so fewer, larger transactions write each page once for many flushes.
  const wait = request.op === "write" ? lastCommit + commitIntervalMs - performance.now() : 0;
  if (wait > 0) setTimeout(drainQueue, wait);
  else setImmediate(drainQueue);
});
