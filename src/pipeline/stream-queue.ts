/**
 * One `per_rank_no_reduce` backend's queue of raw stream records (`BackendSet.logStream`): a slow
 * backend costs that backend, never the flush nor the other backends (issue 24 case 4).
 *
 * - Batches reach the backend in order, one `logStream` call at a time. Batches that arrive while a
 *   call runs wait here and go out together in the next call (up to `MAX_CALL_RECORDS`), so a
 *   backend with a fixed cost per call catches up instead of drowning in concurrent calls.
 * - The backlog (records queued or in the running call) is bounded: past `MAX_BACKLOG_RECORDS` a
 *   new batch is dropped for this backend, counted (`dropped`) and reported once. The stream file
 *   and the other backends still get it.
 * - A synchronous backend (every built-in one) gets each batch at once, within the `push` call.
 * - `settled(waitMs)` waits for what was pushed before it, never for what comes after, and at
 *   most `waitMs`: a flush, a `flushStream()` or a shutdown waits for the records recorded before
 *   it, bounded, while recording goes on.
 */
import { isPromiseLike } from "../core/deadline.js";
import { reportError } from "../core/diagnostics.js";
import type { StreamRecord } from "../core/metric.js";

/** Records a backend may have queued (or in its running call) before new batches are dropped for it. */
export const MAX_BACKLOG_RECORDS = 100_000;
/** At most this many queued records go out in one `logStream` call (a single larger batch goes alone). */
export const MAX_CALL_RECORDS = 10_000;

interface Waiter {
  /** Resolved once `settledTotal` reaches this. */
  readonly upTo: number;
  readonly resolve: (settled: boolean) => void;
}

/** The queue of one backend; `send` makes one `logStream` call (never throws; a promise while it runs). */
export class StreamQueue {
  private readonly batches: (readonly StreamRecord[])[] = [];
  private queued = 0;
  private inCall = 0;
  private pumping = false;
  /** Records accepted since the start (delivered, in the backlog, or dropped): a sequence number. */
  private pushedTotal = 0;
  /** Records whose call settled (delivered, or failed and counted by the caller) or that were dropped. */
  private settledTotal = 0;
  private waiters: Waiter[] = [];
  /** Records dropped at the backlog bound since the start. */
  dropped = 0;
  /** Dropped since the last `takeDropped`. */
  private droppedSinceTaken = 0;
  /** True once the backend had a backlog at a flush or dropped anything: its counts are logged from then on. */
  seen = false;

  constructor(
    private readonly backendName: string,
    private readonly send: (batch: readonly StreamRecord[]) => unknown,
    private readonly maxBacklog = MAX_BACKLOG_RECORDS,
  ) {}

  /** Records queued or in the running call, not yet delivered. */
  get backlog(): number {
    return this.queued + this.inCall;
  }

  /** Queue `batch` (dropped and counted past the backlog bound); a synchronous backend gets it now. */
  push(batch: readonly StreamRecord[]): void {
    if (batch.length === 0) return;
    this.pushedTotal += batch.length;
    if (this.backlog + batch.length > this.maxBacklog) {
      this.dropped += batch.length;
      this.droppedSinceTaken += batch.length;
      this.seen = true;
      this.settle(batch.length);
      reportError(
        `stream.backlogFull:${this.backendName}`,
        `stream: backend "${this.backendName}" is behind by ${this.backlog} records (logStream is slower than the stream); further records are dropped for it and counted (rankscope/stream_backend_dropped/${this.backendName}); the stream file and the other backends still get them`,
      );
      return;
    }
    this.batches.push(batch);
    this.queued += batch.length;
    if (!this.pumping) this.pump();
  }

  /**
   * Resolve true once every record pushed so far was handed to the backend (its call settled) or
   * dropped, false when `waitMs` passed first. Records pushed later are not waited for.
   */
  settled(waitMs: number): Promise<boolean> {
    const upTo = this.pushedTotal;
    if (this.settledTotal >= upTo) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = {
        upTo,
        resolve: (settled) => {
          clearTimeout(timer);
          resolve(settled);
        },
      };
      // Referenced: a bounded wait keeps the process alive until it ends.
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve(false);
      }, waitMs);
      this.waiters.push(waiter);
    });
  }

  /** Records dropped since the last call (for the per-flush count). */
  takeDropped(): number {
    const n = this.droppedSinceTaken;
    this.droppedSinceTaken = 0;
    return n;
  }

  /** Call the backend with what is queued, one call at a time, until the queue is empty. */
  private pump(): void {
    this.pumping = true;
    while (this.batches.length > 0) {
      const batch = this.take();
      this.inCall = batch.length;
      const result = this.send(batch);
      if (isPromiseLike(result)) {
        void Promise.resolve(result).then(
          () => this.called(batch.length, true),
          () => this.called(batch.length, true),
        );
        return;
      }
      this.called(batch.length, false);
    }
    this.pumping = false;
  }

  /** A call settled: count its records, wake the waiters it satisfies, and go on (after an async call). */
  private called(records: number, resume: boolean): void {
    this.inCall = 0;
    this.settle(records);
    if (resume) this.pump();
  }

  /** The queued batches for one call: the first, and the next ones while they fit in `MAX_CALL_RECORDS`. */
  private take(): readonly StreamRecord[] {
    const first = this.batches.shift() ?? [];
    let size = first.length;
    if (this.batches.length === 0 || size + (this.batches[0]?.length ?? 0) > MAX_CALL_RECORDS) {
      this.queued -= size;
      return first;
    }
    const joined = first.slice();
    for (
      let next = this.batches[0];
      next !== undefined && size + next.length <= MAX_CALL_RECORDS;
      next = this.batches[0]
    ) {
      this.batches.shift();
      for (const record of next) joined.push(record);
      size += next.length;
    }
    this.queued -= size;
    return joined;
  }

  private settle(records: number): void {
    this.settledTotal += records;
    if (this.waiters.length === 0) return;
    const ready = this.waiters.filter((w) => w.upTo <= this.settledTotal);
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.upTo > this.settledTotal);
    for (const w of ready) w.resolve(true);
  }
}
