/**
 * An append-only text file written in the background: `append(text)` queues, one write at a
 * time goes to disk, `drain()` waits for the queue. A write error (disk full, a vanished
 * directory) is reported once with the file's path and counted; the text it held is counted as
 * lost, and nothing is ever thrown to the caller.
 *
 * The queue is bounded in bytes: while the disk is failing or slow, text beyond the bound is
 * dropped and counted instead of growing memory without limit.
 */
import { appendFileSync, mkdirSync } from "node:fs";
import { appendFile, mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { describeError, reportError } from "../core/diagnostics.js";

/** Default bound on queued bytes per file. */
export const DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024;

export class AppendFile {
  private queue: string[] = [];
  private queuedBytes = 0;
  private writing: Promise<void> | null = null;
  private dirReady = false;
  /** Characters that could not be written (write errors or the queue bound). */
  lostChars = 0;
  /** Write errors seen. */
  errors = 0;

  constructor(
    readonly path: string,
    private readonly maxQueuedBytes = DEFAULT_MAX_QUEUED_BYTES,
  ) {}

  /** Queue text for the file; never throws, never waits. */
  append(text: string): void {
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

  /**
   * Write what is queued (not the batch already in flight), then `more`, synchronously: for
   * `process.on("exit")`, where nothing asynchronous runs any more. Errors are counted and
   * reported like async ones.
   */
  writeQueuedSync(more = ""): void {
    if (this.queue.length === 0 && more.length === 0) return;
    const text = this.queue.join("") + more;
    this.queue = [];
    this.queuedBytes = 0;
    try {
      mkdirSync(dirname(this.path), { recursive: true });
      appendFileSync(this.path, text);
    } catch (error) {
      this.errors++;
      this.lostChars += text.length;
      reportError(`file.write:${this.path}`, `could not write ${this.path}: ${describeError(error)}; the lines are dropped and counted, the job goes on`);
    }
  }

  private async writeLoop(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const text = this.queue.join("");
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
