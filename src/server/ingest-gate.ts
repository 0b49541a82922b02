/**
 * How many ingest batches a server works on at once: as many as its ingest pool has connections.
 * A batch past them waits here, before its body is read (an unread body costs the server neither
 * memory nor CPU: TCP holds it back), in a queue of bounded length and for a bounded time; past
 * either it is refused with a 503 and `Retry-After`, which the jobs' sync retries. So ingest never
 * takes more than its own connections, and however many jobs send at once, the dashboard's reads
 * on the other pool never wait behind them.
 */
import { HttpError } from "../ui/security.js";

/** Seconds a batch refused for a full queue is told to wait. */
const BUSY_RETRY_S = 1;

/** The gate is full: a 503 with `Retry-After`. */
export class IngestBusy extends HttpError {
  readonly retryAfterS = BUSY_RETRY_S;

  constructor(why: string) {
    super(503, `${why}; send again in ${BUSY_RETRY_S} s`);
  }
}

/** Slots for batches being worked on, and a bounded queue of those waiting for one. */
export class IngestGate {
  /** Batches being worked on now. */
  active = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    /** Batches at once (the ingest pool's connections). */
    readonly slots: number,
    /** Batches waiting at most; past it: 503. */
    readonly maxWaiting: number,
    /** Longest a batch waits for a slot; past it: 503. */
    readonly maxWaitMs: number,
  ) {}

  /** Batches waiting for a slot now. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Run `work` in a slot, once one is free; `IngestBusy` when the queue is full or the wait too long. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active >= this.slots) await this.wait();
    else this.active++;
    try {
      return await work();
    } finally {
      const next = this.queue.shift();
      // The slot passes to the next waiter as it is (active unchanged), or is given back.
      if (next !== undefined) next();
      else this.active--;
    }
  }

  private wait(): Promise<void> {
    if (this.queue.length >= this.maxWaiting)
      return Promise.reject(new IngestBusy(`this server has ${this.maxWaiting} batches waiting already`));
    return new Promise<void>((resolve, reject) => {
      const entry = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const at = this.queue.indexOf(entry);
        if (at >= 0) this.queue.splice(at, 1);
        reject(new IngestBusy(`no ingest slot came free within ${this.maxWaitMs} ms`));
      }, this.maxWaitMs);
      this.queue.push(entry);
    });
  }
}
