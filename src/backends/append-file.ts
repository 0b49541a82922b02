/**
 * An append-only file written in the background: `append(text)` queues text (or bytes, for binary
 * formats such as tfevents), one write at a time goes to disk, `drain()` waits for the queue. A
 * write error (disk full, a vanished directory) is reported once with the file's path and counted;
 * the text it held is counted as lost, and nothing is ever thrown to the caller.
 *
 * The queue is bounded in bytes: while the disk is failing or slow, text beyond the bound is
 * dropped and counted instead of growing memory without limit.
 */
import { appendFile, mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { describeError, reportError } from "../core/diagnostics.js";

/** Default bound on queued bytes per file. */
export const DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024;

export class AppendFile {
  private queue: (string | Uint8Array)[] = [];
  private queuedBytes = 0;
  private writing: Promise<void> | null = null;
  private dirReady = false;
  /** Characters (bytes, for binary chunks) that could not be written (write errors or the queue bound). */
  lostChars = 0;
  /** Write errors seen. */
  errors = 0;

  constructor(
    readonly path: string,
    private readonly maxQueuedBytes = DEFAULT_MAX_QUEUED_BYTES,
  ) {}

  /** Queue text or bytes for the file; never throws, never waits. */
  append(text: string | Uint8Array): void {
    if (text.length === 0) return;
    if (this.queuedBytes + text.length > this.maxQueuedBytes) {
      this.lostChars += text.length;
      reportError(`file.queueFull:${this.path}`, `writes to ${this.path} are falling behind; text beyond ${this.maxQueuedBytes} queued bytes is dropped and counted`);
      return;
    }
    this.queue.push(text);
    this.queuedBytes += text.length;
    if (this.writing === null) this.writing = this.writeLoop();
  }

  /** Wait until everything queued so far has been written (or has failed and been counted). */
  async drain(): Promise<void> {
    while (this.writing !== null) await this.writing;
  }

  private async writeLoop(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const text = joinChunks(this.queue);
        this.queue = [];
        this.queuedBytes = 0;
        try {
          if (!this.dirReady) {
            await mkdir(dirname(this.path), { recursive: true });
            this.dirReady = true;
          }
          await appendFile(this.path, text);
        } catch (error) {
          this.errors++;
          this.lostChars += text.length;
          this.dirReady = false;
          reportError(`file.write:${this.path}`, `could not write ${this.path}: ${describeError(error)}; the lines are dropped and counted, the job goes on`);
        }
      }
    } finally {
      this.writing = null;
    }
  }
}

/** One write's worth of queued chunks: a string when all are text, else the bytes of them all. */
function joinChunks(chunks: readonly (string | Uint8Array)[]): string | Uint8Array {
  if (chunks.length === 1) return chunks[0] as string | Uint8Array;
  if (chunks.every((c) => typeof c === "string")) return chunks.join("");
  return Buffer.concat(chunks.map((c) => (typeof c === "string" ? Buffer.from(c) : c)));
}
