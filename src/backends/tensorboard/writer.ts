/**
 * One tfevents file: `events.out.tfevents.{10-digit seconds}.{host}.{pid}.{n}` in a directory,
 * starting with the `file_version` record, written in the background through `AppendFile`.
 *
 * Events are either staged (`stage`, written as one framed buffer at the next `flush`, so a
 * step's scalars, histograms and text cost one write) or queued at once (`write`, for stream
 * batches that arrive off the flush path). A write error is reported once by `AppendFile`,
 * counted, and never thrown.
 */
import { hostname } from "node:os";
import { join } from "node:path";
import { AppendFile } from "../append-file.js";
import { fileVersionEvent } from "./events.js";
import { frameRecords } from "./record.js";

/** Per-process sequence number of event files (the `{n}` of the name), as TensorFlow's writer keeps one. */
let fileSequence = 0;

/** The name TensorBoard's own writers give an event file. */
export function eventFileName(wallTimeMs: number, host: string, pid: number, sequence: number): string {
  const seconds = String(Math.floor(wallTimeMs / 1000)).padStart(10, "0");
  return `events.out.tfevents.${seconds}.${host}.${pid}.${sequence}`;
}

/** Options of a `TfEventsWriter`. */
export interface TfEventsWriterOptions {
  /** The clock, in ms since the epoch (default `Date.now`): names the file and stamps `file_version`. */
  now?: () => number;
}

/** Writes framed `Event` records to one new event file in `dir`. */
export class TfEventsWriter {
  /** The event file's full path. */
  readonly path: string;
  private readonly file: AppendFile;
  private staged: Uint8Array[] = [];

  constructor(dir: string, options: TfEventsWriterOptions = {}) {
    const now = options.now ?? Date.now;
    const started = now();
    this.path = join(dir, eventFileName(started, hostname(), process.pid, fileSequence++));
    this.file = new AppendFile(this.path);
    this.file.append(frameRecords([fileVersionEvent(started)]));
  }

  /** Keep encoded events for the next `flush`. */
  stage(events: readonly Uint8Array[]): void {
    for (const e of events) this.staged.push(e);
  }

  /** Queue encoded events for the file now (written in the background). */
  write(events: readonly Uint8Array[]): void {
    if (events.length > 0) this.file.append(frameRecords(events));
  }

  /** Write what is staged and wait until everything queued so far is on disk (or failed and counted). */
  async flush(): Promise<void> {
    if (this.staged.length > 0) {
      const events = this.staged;
      this.staged = [];
      this.write(events);
    }
    await this.file.drain();
  }

  /** Write errors seen so far. */
  get errors(): number {
    return this.file.errors;
  }

  /** Bytes that could not be written (write errors, or the queue bound while the disk lagged). */
  get lostBytes(): number {
    return this.file.lostChars;
  }
}
