/**
 * Handing the writer's decoded metric batches to the `logStream` backends (`StreamBatchSink`), on
 * the stream's thread, off any recording call. A backend's failure is reported and the stream
 * goes on; asynchronous deliveries are tracked so a flush can wait for them.
 */
import { describeError, reportError } from "../core/diagnostics.js";
import type { StreamRecord } from "../core/metric.js";

/** Receives decoded metric records for `logStream` backends, on the main thread. */
export type StreamBatchSink = (batch: readonly StreamRecord[]) => Promise<void> | void;

export class BatchDelivery {
  private sink: StreamBatchSink | null = null;
  private readonly pending = new Set<Promise<void>>();

  /** Batches go to `sink` from now on (null: nowhere). */
  setSink(sink: StreamBatchSink | null): void {
    this.sink = sink;
  }

  /** Hand one batch to the sink (if any); never throws. */
  deliver(records: readonly StreamRecord[]): void {
    const sink = this.sink;
    if (sink === null) return;
    try {
      const result = sink(records);
      if (result instanceof Promise) {
        const tracked: Promise<void> = result.catch((error: unknown) => reportError("stream.sink", `stream: a logStream backend failed: ${describeError(error)}`)).finally(() => this.pending.delete(tracked));
        this.pending.add(tracked);
      }
    } catch (error) {
      reportError("stream.sink", `stream: a logStream backend failed: ${describeError(error)}`);
    }
  }

  /** Wait until every delivery made so far (and any made meanwhile) has finished. */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
