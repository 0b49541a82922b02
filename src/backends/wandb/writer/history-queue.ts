/**
 * The history lines a W&B run writer has not sent yet: a queue bounded by its caller in bytes,
 * with the file-stream offset of its first line, cut into requests of at most `maxRequestBytes`.
 *
 * Requests are cut by the client's one rule (`splitByBytes`), used both for what is sent and for
 * what is spooled, so a spooled body is always a request the server would have taken.
 */
import { splitByBytes } from "../client/api.js";

/** The start of every history line: `historyLine` always writes `_step` first. */
const STEP_PREFIX = /^\{"_step":(\d+)/;

/** Queued history lines, the offset of the first, and the bytes they hold. */
export class HistoryQueue {
  private lines: string[] = [];
  private head = 0;
  private queued = 0;
  /** File-stream offset of the next line to send (absolute once connected; from 0 in offline mode). */
  offset: number;

  constructor(offset = 0) {
    this.offset = offset;
  }

  /** Characters waiting to be sent. */
  get bytes(): number {
    return this.queued;
  }

  /** Lines waiting to be sent. */
  get length(): number {
    return this.lines.length - this.head;
  }

  /** True when every queued line was sent. */
  get empty(): boolean {
    return this.head >= this.lines.length;
  }

  /** Queue lines whose total length is `bytes`. */
  push(lines: readonly string[], bytes: number): void {
    for (const line of lines) this.lines.push(line);
    this.queued += bytes;
  }

  /** The next request's lines: as many as fit in `maxBytes` (at least one when any is queued). */
  peekRequest(maxBytes: number): string[] {
    const end = splitByBytes(this.lines, maxBytes, this.head, 1)[0] ?? this.head;
    return this.lines.slice(this.head, end);
  }

  /** The first `count` queued lines were acknowledged: drop them and advance the offset. */
  ack(count: number): void {
    for (let i = this.head; i < this.head + count; i++) this.queued -= this.lines[i]?.length ?? 0;
    this.head += count;
    this.offset += count;
    // Compact now and then instead of shifting per request.
    if (this.head > 4096 && this.head * 2 > this.lines.length) {
      this.lines = this.lines.slice(this.head);
      this.head = 0;
    }
  }

  /** Take every unsent line out of the queue (to spool them); the offset stays where it is. */
  takeAll(): string[] {
    const pending = this.lines.slice(this.head);
    this.lines = [];
    this.head = 0;
    this.queued = 0;
    return pending;
  }

  /**
   * Move queued lines whose `_step` is not above `lastStep` up (AReaL's rule), in place. Returns
   * how many lines moved and the last `_step` of the queue afterwards.
   */
  restep(lastStep: number): { moved: number; lastStep: number } {
    let next = lastStep + 1;
    let moved = 0;
    for (let i = this.head; i < this.lines.length; i++) {
      const line = this.lines[i] ?? "";
      const match = STEP_PREFIX.exec(line);
      if (match === null) continue;
      const step = Number(match[1]);
      if (step < next) {
        const replaced = `{"_step":${next}${line.slice(match[0].length)}`;
        this.queued += replaced.length - line.length;
        this.lines[i] = replaced;
        moved++;
        next++;
      } else {
        next = step + 1;
      }
    }
    return { moved, lastStep: next - 1 };
  }
}
