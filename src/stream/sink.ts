/**
 * Handing the writer's decoded metric batches to the `logStream` backends (`StreamBatchSink`), on
 * the stream's thread, off any recording call. The sink queues them per backend (in order, one call
 * at a time, bounded: src/pipeline/stream-queue.ts); a failure is reported and the stream goes on.
 */
import { describeError, reportError } from "../core/diagnostics.js";
import type { StreamRecord } from "../core/metric.js";

/** Receives decoded metric records for `logStream` backends, on the main thread. */
export interface StreamBatchSink {
  /** Take one batch (queued for the backends; a synchronous backend gets it now). Never waits. */
  deliver(batch: readonly StreamRecord[]): void;
  /** Resolve once every batch taken so far was handed to the backends, or after `waitMs`. */
  settle(waitMs: number): Promise<void>;
}

export class BatchDelivery {
  private sink: StreamBatchSink | null = null;

  /** Batches go to `sink` from now on (null: nowhere). */
  setSink(sink: StreamBatchSink | null): void {
    this.sink = sink;
  }

  /** Hand one batch to the sink (if any); never throws. */
  deliver(records: readonly StreamRecord[]): void {
    try {
      this.sink?.deliver(records);
    } catch (error) {
      reportError("stream.sink", `stream: a logStream backend failed: ${describeError(error)}`);
    }
  }

  /** Wait until every batch delivered so far was handed to the backends (not those delivered meanwhile), at most `waitMs`. */
  async settle(waitMs: number): Promise<void> {
    await this.sink?.settle(Math.max(0, waitMs));
  }
}
