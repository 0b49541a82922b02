/**
 * The stream file, as the writer sees it: two line buffers (one filled while the other is
 * written), the descriptor (opened, checked, reopened after a fault, closed), and the file thread
 * that makes long writes while the writer formats the next batch (file-thread.ts).
 *
 * Faults never throw: a failed write counts its records (`COUNTERS.WRITE_FAILED`), is reported
 * once per file through `report`, and closes the file, which is reopened at most once per flush
 * interval. Nothing is retained, so a failing disk costs no memory.
 */
import { closeSync, fstatSync, mkdirSync, openSync, unlinkSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from "node:worker_threads";
import {
  FILE_STATE,
  FILE_STATE_WORDS,
  isFileThreadError,
  type FileThreadBuffer,
  type FileThreadData,
} from "./file-thread.js";
import { LineBuffer } from "./line-buffer.js";
import { CLOCK_TICK_MS, CONTROL, COUNTERS, type SharedCounters } from "./ring.js";
import { startStreamWorker } from "./workers.js";
import { describeError } from "../core/diagnostics.js";

/** Bytes after which a write is made whatever the line count (probes of many values are long). */
export const BYTES_PER_WRITE = 1 << 20;
/**
 * Writes at least this long go to the file thread; shorter ones (a steady trickle, drained every
 * millisecond) are made here, which costs less than waking the file thread for each.
 */
const FILE_THREAD_BYTES = 128 * 1024;

/** What the file output is given by the writer. */
interface FileOutputOptions {
  readonly file: string;
  /** The shortest time between two attempts to open the file, ms (the writer's flush interval). */
  readonly reopenMs: number;
  readonly control: Int32Array;
  readonly counters: SharedCounters;
  /** Report a fault once per code (the main thread prints it and counts it). */
  readonly report: (code: string, message: string) => void;
}

export class FileOutput {
  private readonly control: Int32Array;
  private readonly counters: SharedCounters;
  /**
   * Two buffers of lines: one is filled while the file thread writes the other. Shared memory, so
   * the file thread reads them in place.
   */
  private readonly buffers: readonly [LineBuffer, LineBuffer] = [
    new LineBuffer(BYTES_PER_WRITE + (1 << 16), true),
    new LineBuffer(BYTES_PER_WRITE + (1 << 16), true),
  ];
  /** The buffer being filled (an index of `buffers`). */
  private current: 0 | 1 = 0;
  /** The file thread, once started; its state; what it knows of each buffer. */
  private fileThread: Worker | null = null;
  private readonly fileState = new Int32Array(new SharedArrayBuffer(FILE_STATE_WORDS * 4));
  private readonly sentBuffers: ArrayBufferLike[] = [];
  private bufferPort: MessagePort | null = null;
  private errorPort: MessagePort | null = null;
  /** Writes submitted to the file thread; the records of the one in flight (-1: none). */
  private requests = 0;
  private inFlightRecords = -1;
  private fd = -1;
  private lastOpenAttempt = -Infinity;
  /** The file is a pipe or device, whose writes may block for long. */
  private blockingSink = false;
  /** One code for every write fault of the file, so a failing disk is one clear error, then counts. */
  private readonly errorCode: string;

  constructor(private readonly options: FileOutputOptions) {
    this.control = options.control;
    this.counters = options.counters;
    this.errorCode = `stream.write:${options.file}`;
  }

  /** The buffer being filled: the writer formats lines into it, then calls `write`. */
  get out(): LineBuffer {
    return this.buffers[this.current];
  }

  /** Start the file thread; without it (it could not start) every write is made here. */
  startFileThread(): void {
    try {
      const buffers = new MessageChannel();
      const errors = new MessageChannel();
      const initialBuffers = this.buffers.map((b) => b.sharedBuffer());
      const data: FileThreadData = {
        fileState: this.fileState,
        control: this.control,
        initialBuffers,
        buffers: buffers.port2,
        errors: errors.port2,
        wakeIndex: CONTROL.WAKE,
      };
      this.fileThread = startStreamWorker("file-thread", data, [buffers.port2, errors.port2]);
      this.fileThread.unref();
      this.sentBuffers.push(...initialBuffers);
      this.bufferPort = buffers.port1;
      this.errorPort = errors.port1;
    } catch {
      this.fileThread = null;
    }
  }

  /** Is the file thread running? Published in CONTROL.FILE_THREAD (`streamStats().fileThread`). */
  noteFileThread(): boolean {
    const running = this.fileThread !== null && Atomics.load(this.fileState, FILE_STATE.READY) === 1;
    if (running !== (this.control[CONTROL.FILE_THREAD] === 1))
      Atomics.store(this.control, CONTROL.FILE_THREAD, running ? 1 : 0);
    return running;
  }

  /** Take the result of the write in flight if it has finished (without waiting). */
  pollWrite(): void {
    if (this.inFlightRecords >= 0 && Atomics.load(this.fileState, FILE_STATE.DONE) === this.requests)
      this.completeWrite();
  }

  /**
   * Write the lines in `out` (`lines` records): hand a long write to the file thread and go on
   * filling the other buffer; make a short one (or any, until the file thread runs) here, after
   * the one in flight, so lines stay in order. `clockLive`: the writer ticks the producers' clock.
   */
  write(lines: number, clockLive: boolean): void {
    this.completeWrite();
    const out = this.out;
    if (this.fd < 0 && !this.open(false)) {
      this.counters.add(COUNTERS.WRITE_FAILED, lines);
      out.clear();
      return;
    }
    if (out.length >= FILE_THREAD_BYTES && this.noteFileThread()) {
      this.submit(lines);
      return;
    }
    // A write to a pipe or device can block for long: meanwhile the clock would stand still, so
    // the producers read Date.now() until it returns. Regular files are written to the page
    // cache and return quickly; the clock stays live (Date.now() allocates on the hot path).
    const pausesClock = clockLive && this.blockingSink;
    if (pausesClock) Atomics.store(this.control, CONTROL.CLOCK_LIVE, 0);
    try {
      let offset = 0;
      while (offset < out.length) offset += writeSync(this.fd, out.bytes, offset, out.length - offset);
      this.counters.add(COUNTERS.WRITTEN, lines);
    } catch (error) {
      this.counters.add(COUNTERS.WRITE_FAILED, lines);
      this.writeFailed(error);
    }
    out.clear();
    this.counters.set(COUNTERS.CLOCK, Date.now());
    if (pausesClock) Atomics.store(this.control, CONTROL.CLOCK_LIVE, 1);
  }

  /** Hand the current buffer to the file thread and switch to the other (free: see completeWrite). */
  private submit(lines: number): void {
    const out = this.out;
    const state = this.fileState;
    const buffer = out.sharedBuffer();
    if (this.sentBuffers[this.current] !== buffer) {
      this.sentBuffers[this.current] = buffer;
      const message: FileThreadBuffer = { index: this.current, buffer };
      this.bufferPort?.postMessage(message);
    }
    state[FILE_STATE.FD] = this.fd;
    state[FILE_STATE.BUFFER] = this.current;
    state[FILE_STATE.LENGTH] = out.length;
    state[FILE_STATE.RECORDS] = lines;
    this.requests = (this.requests + 1) | 0;
    this.inFlightRecords = lines;
    Atomics.store(state, FILE_STATE.REQUEST, this.requests);
    Atomics.notify(state, FILE_STATE.REQUEST);
    this.current = this.current === 0 ? 1 : 0;
    this.out.clear();
  }

  /**
   * Wait for the write in flight (if any) and take its result: a failure is counted and reported
   * here, and the file closed, before anything else is written. The producers' clock keeps
   * ticking while this waits (a slow pipe can take long).
   */
  completeWrite(): void {
    if (this.inFlightRecords < 0) return;
    const state = this.fileState;
    for (;;) {
      const done = Atomics.load(state, FILE_STATE.DONE);
      if (done === this.requests) break;
      if (Atomics.load(state, FILE_STATE.READY) !== 1 && Atomics.load(state, FILE_STATE.DONE) !== this.requests) {
        // The thread ended with the write unfinished (it cannot, short of a fault of its own):
        // count the records as not written and write here from now on. (DONE is read again: the
        // thread may have finished the write just before it ended.)
        const lost = this.inFlightRecords;
        this.fileThread = null;
        this.inFlightRecords = -1;
        this.counters.add(COUNTERS.WRITE_FAILED, lost);
        this.options.report(
          "stream.fileThread",
          `stream: the stream's file thread stopped; its last ${lost} records are counted as not written, and the writer writes the file itself from now on`,
        );
        return;
      }
      Atomics.wait(state, FILE_STATE.DONE, done, CLOCK_TICK_MS);
      this.counters.set(COUNTERS.CLOCK, Date.now());
    }
    const records = this.inFlightRecords;
    this.inFlightRecords = -1;
    if (state[FILE_STATE.FAILED] === 1) {
      this.counters.add(COUNTERS.WRITE_FAILED, records);
      const posted: unknown = this.errorPort === null ? undefined : receiveMessageOnPort(this.errorPort)?.message;
      const { code, message } = isFileThreadError(posted) ? posted : { code: "", message: "write failed" };
      this.writeFailed(Object.assign(new Error(message), { code }));
    }
  }

  private writeFailed(error: unknown): void {
    this.options.report(
      this.errorCode,
      `stream: could not write ${this.options.file}: ${describeError(error)}; stream records are dropped and counted (rankscope/stream_dropped), the job goes on`,
    );
    // A descriptor closed under us may already be reused by someone else: never close it again.
    if (errorCode(error) === "EBADF") this.fd = -1;
    else this.close();
  }

  /** Open the file (creating its directory only at start); retried at most once per reopen interval. */
  open(first: boolean): boolean {
    const now = Date.now();
    if (!first && now - this.lastOpenAttempt < this.options.reopenMs) return false;
    this.lastOpenAttempt = now;
    try {
      if (first) mkdirSync(dirname(this.options.file), { recursive: true });
      this.fd = openSync(this.options.file, "a");
      this.blockingSink = !fstatSync(this.fd).isFile();
      return true;
    } catch (error) {
      this.options.report(
        this.errorCode,
        `stream: could not open ${this.options.file}: ${describeError(error)}; stream records are dropped and counted (rankscope/stream_dropped) until it can be opened, the job goes on`,
      );
      return false;
    }
  }

  /** A file deleted under us (its directory removed) takes writes silently: notice it. */
  checkFile(): void {
    this.completeWrite();
    if (this.fd < 0) return;
    try {
      if (fstatSync(this.fd).nlink === 0) {
        this.options.report(
          this.errorCode,
          `stream: ${this.options.file} was deleted (or its directory removed) while being written; stream records are dropped and counted (rankscope/stream_dropped) until it can be reopened, the job goes on`,
        );
        this.close();
        this.lastOpenAttempt = -Infinity;
      }
    } catch (error) {
      this.writeFailed(error);
    }
  }

  /**
   * The end: finish the write in flight, stop the file thread, then append the line `finalLine()`
   * gives (none for undefined; it is asked once every write is counted) and close the file.
   */
  finish(finalLine: () => string | undefined): void {
    this.completeWrite();
    this.stopFileThread();
    if (this.fd >= 0) this.checkFile();
    const line = finalLine();
    if (line === undefined) {
      this.removeIfEmpty();
      return;
    }
    if (this.fd >= 0 || this.open(false)) {
      try {
        writeSync(this.fd, line);
      } catch (error) {
        this.writeFailed(error);
      }
    }
    this.close();
  }

  /**
   * Close the file, and remove it when it is an empty regular file: a stream that took nothing
   * (a controller's own, opened in case its values come) leaves no file behind.
   */
  private removeIfEmpty(): void {
    let empty = false;
    try {
      if (this.fd >= 0) {
        const stat = fstatSync(this.fd);
        empty = stat.isFile() && stat.size === 0;
      }
    } catch {
      // Not ours to judge: leave it.
    }
    this.close();
    if (!empty) return;
    try {
      unlinkSync(this.options.file);
    } catch {
      // Gone already, or not ours to remove: an empty file either way.
    }
  }

  private stopFileThread(): void {
    if (this.fileThread === null) return;
    Atomics.store(this.fileState, FILE_STATE.STOP, 1);
    Atomics.notify(this.fileState, FILE_STATE.REQUEST);
    this.fileThread = null;
    this.noteFileThread();
    this.bufferPort?.close();
    this.errorPort?.close();
  }

  private close(): void {
    this.completeWrite();
    if (this.fd >= 0) {
      try {
        closeSync(this.fd);
      } catch {
        // Already closed (EBADF): it is reopened on a later cycle either way.
      }
    }
    this.fd = -1;
  }
}

/** The `code` of a Node system error (`EBADF`, `ENOSPC`), if it has one. */
function errorCode(error: unknown): unknown {
  return error !== null && typeof error === "object" && "code" in error ? error.code : undefined;
}
