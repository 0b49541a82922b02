/** Start one of the stream's worker modules (the writer, its file thread) from this folder. */
import type { TransferListItem, Worker } from "node:worker_threads";
import { packageModule, startModuleWorker } from "../core/module-worker.js";

export function startStreamWorker(
  module: "writer" | "file-thread",
  workerData: unknown,
  transferList: readonly TransferListItem[],
): Worker {
  return startModuleWorker(packageModule(`stream/${module}`), {
    workerData,
    transferList: [...transferList],
    stdout: false,
    stderr: false,
  });
}
