/**
 * The worker thread the `store` backend writes through: it owns the `StoreWriter` (SQLite calls
 * are synchronous), so the user's thread only posts batches. Messages are handled in order;
 * each gets a reply with its id, carrying the error message when it failed.
 */
import { parentPort } from "node:worker_threads";
import { describeError } from "../../core/diagnostics.js";
import { StoreWriter, type StoreWriterOptions, type WriteBatch, type WriterStatus } from "./writer.js";

/** A request to the writer thread. */
export type WorkerRequest =
  | { readonly id: number; readonly op: "open"; readonly options: StoreWriterOptions }
  | { readonly id: number; readonly op: "write"; readonly batch: WriteBatch }
  | { readonly id: number; readonly op: "finish"; readonly status: WriterStatus };

/** The writer thread's answer to one request. */
export interface WorkerReply {
  readonly id: number;
  readonly error?: string;
}

let writer: StoreWriter | null = null;

function handle(request: WorkerRequest): void {
  switch (request.op) {
    case "open":
      writer = StoreWriter.open(request.options);
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

parentPort?.on("message", (request: WorkerRequest) => {
  let reply: WorkerReply;
  try {
    handle(request);
    reply = { id: request.id };
  } catch (error) {
    reply = { id: request.id, error: describeError(error) };
  }
  parentPort?.postMessage(reply);
});
