/**
 * One tfevents file: `events.out.tfevents.{10-digit seconds}.{host}.{pid}.{n}` in a directory,
 * starting with the `file_version` record, written in the background through `AppendFile`.
 *
 * Events are either staged (`stage`, written as one framed buffer at the next `flush`, so a
 * step's scalars, histograms and text cost one write) or queued at once (`write`, for stream
 * batches that arrive off the flush path). A write error is reported once by `AppendFile`,
 * counted, and never thrown.
 *
 * After a write error the writer recovers before writing on: if the file holds bytes (it may end
 * in a torn record, and TensorBoard stops reading a file at a bad checksum), it continues in a
 * new file; if the file was never written (its directory could not be created), the header is
 * queued again, so the file starts with it once writing works.
 */
import { stat } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { AppendFile } from "../../io/append-file.js";
import { fileVersionEvent, sessionStartEvent } from "./events.js";
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
  /** The clock, in ms since the epoch (default `Date.now`): names the file and stamps the header. */
  now?: () => number;
}

/** Writes framed `Event` records to one new event file in `dir`. */
export class TfEventsWriter {
  private currentPath: string;
  private file: AppendFile;
  private staged: Uint8Array[] = [];
  private readonly now: () => number;
  /** The step of this attempt's `SessionLog START`, once written. */
  private startStep: number | undefined;
  /** Write errors of the current file already handled. */
  private errorsHandled = 0;
  /** While recovering from a write error: the bytes to write after it, in order. */
  private held: Uint8Array[] | null = null;
  private recovery: Promise<void> | null = null;
  private errorCount = 0;
  private lostByteCount = 0;

  constructor(
    readonly dir: string,
    options: TfEventsWriterOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    const started = this.now();
    this.currentPath = this.newPath(started);
    this.file = new AppendFile(this.currentPath);
    this.file.append(this.header(started, true));
  }

  /** The event file's full path (a new one after a write error left the previous one torn). */
  get path(): string {
    return this.currentPath;
  }

  /** Keep encoded events for the next `flush`. */
  stage(events: readonly Uint8Array[]): void {
    for (const e of events) this.staged.push(e);
  }

  /**
   * Queue `SessionLog START` at `step`: the first step this attempt logs (or resumes at). Written
   * before the attempt's data, it tells TensorBoard's Python reader to drop what an earlier attempt
   * logged at or after `step` (its first START in a run only marks the start).
   */
  startSession(step: number): void {
    this.startStep = step;
    this.write([sessionStartEvent(step, this.now())]);
  }

  /** Queue encoded events for the file now (written in the background). */
  write(events: readonly Uint8Array[]): void {
    if (events.length === 0) return;
    const bytes = frameRecords(events);
    this.checkErrors();
    if (this.held !== null) this.held.push(bytes);
    else this.file.append(bytes);
  }

  /** Write what is staged and wait until everything queued so far is on disk (or failed and counted). */
  async flush(): Promise<void> {
    if (this.staged.length > 0) {
      const events = this.staged;
      this.staged = [];
      this.write(events);
    }
    this.checkErrors();
    while (this.recovery !== null) await this.recovery;
    await this.file.drain();
  }

  /** Write errors seen so far (all files of this writer). */
  get errors(): number {
    return this.errorCount + this.file.errors;
  }

  /** Bytes that could not be written (write errors, or the queue bound while the disk lagged). */
  get lostBytes(): number {
    return this.lostByteCount + this.file.lostChars;
  }

  private newPath(wallTimeMs: number): string {
    return join(this.dir, eventFileName(wallTimeMs, hostname(), process.pid, fileSequence++));
  }

  /** `file_version`, and `SessionLog START` (if one was written) for the attempt's first file. */
  private header(wallTimeMs: number, withStart: boolean): Uint8Array {
    const events = [fileVersionEvent(wallTimeMs)];
    if (withStart && this.startStep !== undefined) events.push(sessionStartEvent(this.startStep, wallTimeMs));
    return frameRecords(events);
  }

  /** Start recovering if the file reported a write error since the last check. */
  private checkErrors(): void {
    if (this.held !== null || this.file.errors === this.errorsHandled) return;
    this.held = [];
    this.recovery = this.recover().finally(() => {
      this.recovery = null;
    });
  }

  private async recover(): Promise<void> {
    try {
      await this.file.drain();
      const written = await stat(this.currentPath).then(
        (s) => s.size > 0,
        () => false,
      );
      const now = this.now();
      if (written) {
        // The file may end in a torn record: go on in a new one. No second START here — a later
        // START in the same run would read as a restart and drop points of this attempt.
        this.errorCount += this.file.errors;
        this.lostByteCount += this.file.lostChars;
        this.currentPath = this.newPath(now);
        this.file = new AppendFile(this.currentPath);
        this.errorsHandled = 0;
        this.file.append(this.header(now, false));
      } else {
        this.errorsHandled = this.file.errors;
        this.file.append(this.header(now, true));
      }
    } finally {
      const held = this.held ?? [];
      this.held = null;
      for (const bytes of held) this.file.append(bytes);
    }
  }
}
