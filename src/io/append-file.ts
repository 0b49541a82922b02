/**
 * The one file sink of rankscope (every part that appends to a file uses it: JSONL, TensorBoard,
 * the W&B spool, trace and session files). An append-only file written in the background: `append(text)` queues text (or bytes, for binary
 * formats such as tfevents), one write at a time goes to disk, `drain()` waits for the queue. A
 * write error (disk full, a vanished directory) is reported once with the file's path and counted;
 * the text it held is counted as lost, and nothing is ever thrown to the caller.
 *
 * The queue is bounded in bytes: while the disk is failing or slow, text beyond the bound is
 * dropped and counted instead of growing memory without limit.
 *
 * Every file with something queued is known to one drain of the process lifecycle
 * (src/core/lifecycle.ts): at a signal its queue is written (awaited, within the drain deadline), at
 * `exit` (`process.exit()`, an uncaught exception, after a signal's drains) synchronously — so no
 * part has to hook the process itself to finish its file.
 */
import { appendFileSync, closeSync, mkdirSync, openSync, statSync, writeSync } from "node:fs";
import { appendFile, mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { describeError, reportError } from "../core/diagnostics.js";
import { registerDrain } from "../core/lifecycle.js";
import { processWide } from "../core/process-wide.js";

/** Files with something queued or being written, in this process. */
const busyFiles = processWide("io.busyFiles", () => ({ files: new Set<AppendFile>(), drainRegistered: false }));

/** Note a file with work queued; the files' drain is registered on first use (importing us hooks nothing). */
function markBusy(file: AppendFile): void {
  const { files } = busyFiles;
  files.add(file);
  if (busyFiles.drainRegistered) return;
  busyFiles.drainRegistered = true;
  registerDrain({
    name: "files",
    stage: "sink",
    drain: () => (files.size === 0 ? undefined : Promise.all([...files].map((f) => f.drain())).then(() => undefined)),
    exit: () => {
      for (const f of [...files]) f.writeQueuedSync();
    },
  });
}

/** Default bound on queued bytes per file. */
const DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024;

export class AppendFile {
  private queue: (string | Uint8Array)[] = [];
  private queuedBytes = 0;
  private writing: Promise<void> | null = null;
  private dirReady = false;
  /** The descriptor `appendSync` writes through, kept open between calls. */
  private fd: number | null = null;
  /**
   * The batch being written: `issued` once its data write was handed to the OS, with the file's
   * size before it, so a write at exit can tell how much of it reached the file.
   */
  private inFlight: { text: string | Buffer; issued: boolean; sizeBefore: number; taken: boolean } | null = null;
  /** Characters that could not be written (write errors or the queue bound). */
  lostChars = 0;
  /** Write errors seen. */
  errors = 0;

  constructor(
    readonly path: string,
    private readonly maxQueuedBytes = DEFAULT_MAX_QUEUED_BYTES,
  ) {}

  /** Queue text (or encoded bytes) for the file; never throws, never waits. */
  append(text: string | Uint8Array): void {
    if (text.length === 0) return;
    if (this.queuedBytes + text.length > this.maxQueuedBytes) {
      this.lostChars += text.length;
      reportError(
        `file.queueFull:${this.path}`,
        `writes to ${this.path} are falling behind; text beyond ${this.maxQueuedBytes} queued bytes is dropped and counted`,
      );
      return;
    }
    this.queue.push(text);
    this.queuedBytes += text.length;
    if (this.writing === null) {
      markBusy(this);
      this.writing = this.writeLoop();
    }
  }

  /**
   * Write `text` now, synchronously (text logs: a line is in the file when the call returns, so a
   * crash right after it cannot lose it). Keeps the file open between calls; anything queued or in
   * flight is written first, so the order holds. Never throws: a failure is reported and counted.
   */
  appendSync(text: string | Uint8Array): void {
    if (text.length === 0) return;
    if (this.writing !== null || this.queue.length > 0) {
      this.writeQueuedSync(text);
      return;
    }
    try {
      if (this.fd === null) {
        mkdirSync(dirname(this.path), { recursive: true });
        this.fd = openSync(this.path, "a");
      }
      if (typeof text === "string") writeSync(this.fd, text);
      else writeSync(this.fd, text);
    } catch (error) {
      this.close();
      this.errors++;
      this.lostChars += text.length;
      reportError(
        `file.write:${this.path}`,
        `could not write ${this.path}: ${describeError(error)}; the lines are dropped and counted, the job goes on`,
      );
    }
  }

  /** Close the descriptor `appendSync` keeps (the next write opens it again). */
  close(): void {
    if (this.fd === null) return;
    try {
      closeSync(this.fd);
    } catch {
      // Already gone (closed by a test or the OS): nothing left to release.
    }
    this.fd = null;
  }

  /** Wait until everything queued so far has been written (or has failed and been counted). */
  async drain(): Promise<void> {
    while (this.writing !== null) await this.writing;
  }

  /**
   * Write what is queued, then `more`, synchronously: for the lifecycle's exit drain, where nothing
   * asynchronous runs any more. The part of the batch in flight that has not reached the file yet
   * is written first. Errors are counted and reported like async ones.
   */
  writeQueuedSync(more: string | Uint8Array = ""): void {
    let first: Buffer | undefined;
    const flight = this.inFlight;
    if (flight !== null && !flight.taken) {
      flight.taken = true;
      first = this.unwrittenPart(flight);
    }
    if ((first === undefined || first.length === 0) && this.queue.length === 0 && more.length === 0) return;
    this.queue.push(more);
    const rest = this.takeQueue();
    const text =
      first === undefined ? rest : Buffer.concat([first, typeof rest === "string" ? Buffer.from(rest) : rest]);
    try {
      mkdirSync(dirname(this.path), { recursive: true });
      appendFileSync(this.path, text);
    } catch (error) {
      this.errors++;
      this.lostChars += text.length;
      reportError(
        `file.write:${this.path}`,
        `could not write ${this.path}: ${describeError(error)}; the lines are dropped and counted, the job goes on`,
      );
    }
  }

  private async writeLoop(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const text = this.takeQueue();
        try {
          const flight = { text, issued: false, sizeBefore: 0, taken: false };
          this.inFlight = flight;
          if (!this.dirReady) {
            await mkdir(dirname(this.path), { recursive: true });
            this.dirReady = true;
          }
          flight.sizeBefore = await stat(this.path).then(
            (st) => st.size,
            () => 0,
          );
          if (flight.taken) continue;
          flight.issued = true;
          await appendFile(this.path, text);
          this.inFlight = null;
        } catch (error) {
          this.errors++;
          this.lostChars += text.length;
          this.dirReady = false;
          reportError(
            `file.write:${this.path}`,
            `could not write ${this.path}: ${describeError(error)}; the lines are dropped and counted, the job goes on`,
          );
        }
      }
    } finally {
      this.inFlight = null;
      this.writing = null;
      busyFiles.files.delete(this);
    }
  }

  /** Everything queued, as one string (or bytes, when any part was bytes); empties the queue. */
  private takeQueue(): string | Buffer {
    const parts = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    if (parts.every((p): p is string => typeof p === "string")) return parts.join("");
    return Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : p)));
  }

  /** What of an in-flight batch is not in the file yet (all of it when its write was not issued). */
  private unwrittenPart(flight: { text: string | Buffer; issued: boolean; sizeBefore: number }): Buffer {
    const bytes = typeof flight.text === "string" ? Buffer.from(flight.text) : flight.text;
    if (!flight.issued) return bytes;
    let size = flight.sizeBefore;
    try {
      size = statSync(this.path).size;
    } catch {
      // The file vanished: write the whole batch again.
    }
    const written = Math.max(0, size - flight.sizeBefore);
    return written >= bytes.length ? Buffer.alloc(0) : bytes.subarray(written);
  }
}
