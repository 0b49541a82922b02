/**
 * One writer of one W&B run: a queue of history lines bounded in bytes, a background sender, and
 * the spool for what cannot be sent.
 *
 * The caller's side (`enqueue`, `setSummary`, `updateConfig`) is synchronous and never waits on
 * the network. The sender, one request at a time, first asks whether the run exists
 * (`RunResumeStatus`, which also gives the offset to continue at), creates or resumes it
 * (`UpsertBucket`), then sends the queued lines as file-stream requests at contiguous offsets,
 * retrying network errors, timeouts, 429 and 5xx with exponential backoff and jitter.
 *
 * When a request keeps failing past the retry budget, the server refuses for good, or the queue
 * would grow past its bound, the writer switches to spooling: everything unsent, and everything
 * after, goes to `wandb/{runId}/` as the request bodies it would have sent, for
 * `rankscope wandb sync`. Offline mode spools from the start.
 */
import { reportError, warn } from "../../../core/diagnostics.js";
import { registerDrain } from "../../../core/lifecycle.js";
import {
  fileStreamBody,
  PRIMARY_CLIENT_ID,
  runResumeStatus,
  sendFileStream,
  sharedModeHeaders,
  upsertRun,
  type UpsertVariables,
} from "../client/api.js";
import { PendingFiles, uploadPendingFiles } from "./file-uploads.js";
import { HistoryQueue } from "./history-queue.js";
import { sleep, withRetry, type Endpoint } from "../client/http.js";
import type { SenderLimits } from "../options.js";
import { decideResume, type RunTarget, type WriterStats } from "./run-target.js";
import { previousOfflineAttempts, settleSpool } from "./spool-recovery.js";
import { SpoolWriter, type SpoolRunInfo, SPOOL_FORMAT } from "../spool/spool.js";
import { dirname } from "node:path";
import { rankscopeVersion } from "../../../run/run-files.js";
import { OfflineRunLog } from "../offline/offline-run-log.js";
import { offlineRunHeadOf } from "../offline/offline-run.js";

export type { RunTarget, WriterStats } from "./run-target.js";

/**
 * The exit code a process ending for `reason` has, as W&B is told it: 128 + the signal's number
 * after SIGINT (130) or SIGTERM (143), 1 after an uncaught exception, else 0 (a normal end).
 */
export function exitCodeOf(reason: string | null): number {
  if (reason === "SIGINT") return 130;
  if (reason === "SIGTERM") return 143;
  return reason === "uncaughtException" ? 1 : 0;
}

type State = "connecting" | "live" | "spooling" | "finished";

/** Smallest bound of the spool's disk-write buffer (it is `max(maxQueuedBytes, this)`). */
const SPOOL_BUFFER_MIN_BYTES = 16 * 1024 * 1024;

export class RunWriter {
  /** Unsent history lines and the offset of the first (absolute once connected; from 0 in offline mode). */
  private readonly queue = new HistoryQueue();
  /** Offset of this attempt's first spooled line (offline mode): its offline run holds the lines from here. */
  private attemptStartOffset = 0;
  private absoluteOffsets = false;
  private state: State;
  private sending: Promise<void> | null = null;
  private readonly stop = new AbortController();
  /** Aborted by `finish()` (and by spooling): stop waiting out the send interval. */
  private readonly hurry = new AbortController();
  private lastSendAt = 0;
  private readonly spool: SpoolWriter;
  /**
   * While spooling a run of its own: the attempt's offline run for W&B's own `wandb sync`, written
   * as it goes (readable at every flush boundary, even after a `kill -9`).
   */
  private offlineLog: OfflineRunLog | null = null;
  /** Builds the summary line when a request carries it (not at every flush: it grows with the keys). */
  private summarySource: (() => string) | null = null;
  private summaryDirty = false;
  private configDirty = false;
  private upsert: UpsertVariables;
  private entity: string | null;
  private project: string;
  private completeSent = false;
  private exitcode: number | null = null;
  private connecting: Promise<void> | null = null;
  /** Run files waiting to be uploaded, and those uploaded but not yet reported in the file stream. */
  private readonly files = new PendingFiles();
  /** The last `_step` of the run on the server when resumed, or -1. */
  resumedLastStep = -1;
  /**
   * Told the last `_step` of the queued lines after they were moved above the server's last step
   * (a resumed run learned about after lines were queued), so later lines continue from there.
   */
  onRestepped: ((lastStep: number) => void) | null = null;
  private everEnqueued = false;
  private recoverable = false;
  readonly stats: WriterStats = { linesSent: 0, linesSpooled: 0, retries: 0, maxQueuedBytes: 0 };

  /** Characters the disk could not take in time (counted and reported, never silent). */
  get spoolLostChars(): number {
    return this.spool.lostChars;
  }

  constructor(
    readonly target: RunTarget,
    private readonly endpoint: Endpoint,
    private readonly limits: SenderLimits,
    offline: boolean,
    private readonly label: string,
  ) {
    this.upsert = target.upsert;
    this.entity = target.upsert.entity;
    this.project = target.upsert.project;
    // The disk buffer has its own bound: a disk slower than the job loses (and counts) what is past it.
    this.spool = new SpoolWriter(
      target.spoolDir,
      target.clientId,
      Math.max(limits.maxQueuedBytes, SPOOL_BUFFER_MIN_BYTES),
    );
    if (offline) {
      this.state = "spooling";
      // A resumed offline run continues the spool of its earlier attempts: offsets and `_step` go on from there.
      const previous = previousOfflineAttempts(target.spoolDir, target.clientId, label);
      this.queue.offset = previous.nextOffset;
      this.resumedLastStep = previous.lastStep;
      this.attemptStartOffset = previous.nextOffset;
      this.startOfflineLog();
    } else {
      this.state = "connecting";
    }
    // The process may end before finish() (process.exit(), an uncaught exception, a signal whose
    // drain deadline cut finish() short): what was not sent goes to the spool, synchronously.
    this.unregisterDrain = registerDrain({
      name: `W&B run ${label}`,
      stage: "logger",
      exit: ({ reason }) => this.spoolAtExit(reason, exitCodeOf(reason)),
    });
  }

  private readonly unregisterDrain: () => void;

  /**
   * Spool every unsent line and the run's completion now (for the exit path): with the exit code
   * `finish()` was given, else the one the process ends with (`exitcode`: 143 after SIGTERM, 1
   * after an uncaught exception).
   */
  private spoolAtExit(reason: string, exitcode: number): void {
    if (this.state === "finished") {
      // finish() ran but its spool writes had not reached the disk yet.
      this.spool.writeSync();
      this.offlineLog?.writeSync();
      return;
    }
    if (this.target.lazy && !this.everEnqueued && this.connecting === null) return;
    this.toSpool(`the process ended (${reason}) before everything was sent`, true);
    const code = this.exitcode ?? exitcode;
    if (this.target.sendsComplete) this.spool.append([{ complete: true, exitcode: code }], this.absoluteOffsets);
    this.offlineLog?.end(this.summarySource?.(), code);
    this.state = "finished";
    this.spool.writeSync();
    this.offlineLog?.writeSync();
  }

  /** Start the attempt's offline run log (a run of its own only: a shared run has several writers). */
  private startOfflineLog(): void {
    if (this.target.shared || this.offlineLog !== null) return;
    const attempt = this.absoluteOffsets ? 0 : this.attemptStartOffset;
    this.offlineLog = new OfflineRunLog(
      dirname(this.target.spoolDir),
      offlineRunHeadOf(this.runInfo()),
      `rankscope ${rankscopeVersion()}`,
      attempt,
      Math.max(this.limits.maxQueuedBytes, SPOOL_BUFFER_MIN_BYTES),
    );
  }

  /**
   * While spooling: a promise that resolves once what was spooled so far (the spool, and the
   * offline run) is on disk — a flush boundary a `kill -9` cannot undo. Otherwise undefined.
   */
  persisted(): Promise<void> | undefined {
    if (this.state !== "spooling") return undefined;
    const log = this.offlineLog;
    return this.spool.drain().then(() => log?.drain());
  }

  /** False for a lazy writer (a rank's) that has had nothing to write: it creates no run, not even for run files. */
  get started(): boolean {
    return !this.target.lazy || this.everEnqueued || this.connecting !== null;
  }

  /** True once the writer spools instead of sending (offline, or after giving up on the server). */
  get spooling(): boolean {
    return this.state === "spooling";
  }

  /** Bytes of history waiting to be sent. */
  get pendingBytes(): number {
    return this.queue.bytes;
  }

  /**
   * Start talking to the server: resume status, then upsert. Resolves when connected, or after
   * `waitMs` (the connection goes on in the background), so `init` can learn the server's last
   * step without ever hanging on a server that is down.
   */
  async connect(waitMs: number): Promise<void> {
    if (this.state !== "connecting") return;
    this.startConnect();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.connecting, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  /** Queue history lines (one flush or one stream batch). Never blocks. */
  enqueue(lines: readonly string[]): void {
    if (lines.length === 0 || this.state === "finished") return;
    this.everEnqueued = true;
    if (this.state === "spooling") {
      this.spoolLines(lines);
      return;
    }
    let bytes = 0;
    for (const line of lines) bytes += line.length;
    if (this.queue.bytes + bytes > this.limits.maxQueuedBytes) {
      this.toSpool(`more than ${this.limits.maxQueuedBytes} bytes of history are waiting for the server`, true);
      this.spoolLines(lines);
      return;
    }
    this.queue.push(lines, bytes);
    if (this.queue.bytes > this.stats.maxQueuedBytes) this.stats.maxQueuedBytes = this.queue.bytes;
    if (this.state === "connecting") this.startConnect();
    this.kick();
  }

  /** The summary changed; `source` builds its line when the next request is sent. */
  summaryChanged(source: () => string): void {
    this.summarySource = source;
    this.summaryDirty = true;
  }

  /**
   * A run file to upload (`config.yaml`, `wandb-summary.json`, a table's `media/table/….table.json`),
   * as W&B's SDK does: `CreateRunFiles`, a PUT to the URL it gives, then `uploaded` in the file
   * stream. While spooling, the file goes to the spool's `files/` (and the offline run's).
   */
  queueFile(name: string, content: string): void {
    if (this.state === "finished") return;
    if (this.state === "spooling") {
      this.spool.writeFile(name, content);
      this.offlineLog?.runFile(name, content);
      return;
    }
    // Files count against the same memory bound as history: past it, they go to the spool.
    const waiting = this.queue.bytes + this.files.bytesWithout(name);
    if (waiting + content.length > this.limits.maxQueuedBytes) {
      this.toSpool(
        `more than ${this.limits.maxQueuedBytes} bytes of history and run files are waiting for the server`,
        true,
      );
      this.spool.writeFile(name, content);
      return;
    }
    this.files.set(name, content);
    if (this.state === "connecting") this.startConnect();
    this.kick();
  }

  /** The run's config changed: upsert it again (queued behind what is in flight). */
  updateConfig(config: string): void {
    this.upsert = { ...this.upsert, config };
    if (this.state === "spooling") {
      this.spool.writeRunInfo(this.runInfo());
      this.offlineLog?.setHead(offlineRunHeadOf(this.runInfo()));
      return;
    }
    this.configDirty = true;
    this.kick();
  }

  /**
   * Send what is queued and, if this writer completes the run, `complete` with the exit code.
   * Waits at most `finishTimeoutMs`; what is still unsent then goes to the spool.
   */
  async finish(exitcode = 0): Promise<void> {
    if (this.state === "finished") return;
    const finishStarted = Date.now();
    this.exitcode = exitcode;
    this.hurry.abort();
    if (this.target.lazy && !this.everEnqueued && this.connecting === null) {
      // A rank that never logged anything creates nothing, on the server or in the spool.
      this.state = "finished";
      return;
    }
    if (this.state !== "spooling") {
      this.startConnect();
      this.kick();
      const drained = await this.waitIdle(this.limits.finishTimeoutMs);
      if (!drained && !this.spooling) {
        this.toSpool(`the server did not take everything within ${this.limits.finishTimeoutMs} ms of finishing`, true);
      }
    }
    if (this.spooling) {
      // The summary and the completion as two requests, as a live writer's last ones.
      const summaryLine = this.summarySource?.();
      const summary = fileStreamBody({ summary: summaryLine ?? null });
      const complete = fileStreamBody({ exitcode: this.target.sendsComplete ? exitcode : null });
      this.spool.writeRunInfo(this.runInfo());
      this.spool.append(
        [summary, complete].filter((body) => body !== null),
        this.absoluteOffsets,
      );
      this.offlineLog?.end(summaryLine, exitcode);
      this.stop.abort();
      await this.sending;
    }
    this.state = "finished";
    // The exit drain stays until the spool is on disk: a finish() cut short by its deadline, then
    // process.exit(), still gets the run files and lines written synchronously.
    await this.spool.drain();
    await this.offlineLog?.drain();
    this.unregisterDrain();
    if (this.spool.entries === 0) return;
    await settleSpool({
      target: this.target,
      endpoint: this.endpoint,
      limits: this.limits,
      label: this.label,
      deadline: finishStarted + this.limits.finishTimeoutMs,
      recoverable: this.recoverable,
      linesSpooled: this.stats.linesSpooled,
      offlineRun: this.offlineLog?.dir ?? null,
    });
  }

  private runInfo(): SpoolRunInfo {
    return {
      format: SPOOL_FORMAT,
      version: 1,
      baseUrl: this.endpoint.baseUrl,
      resume: this.target.resume,
      shared: this.target.shared,
      upsert: { ...this.upsert, entity: this.entity, project: this.project },
    };
  }

  private async waitIdle(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (this.state === "spooling") return true;
      if (this.idle()) return true;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      const wake = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(left, 50))));
      await Promise.race([this.sending ?? this.connecting ?? wake, wake]);
      clearTimeout(timer);
    }
  }

  private idle(): boolean {
    const completeDue = this.exitcode !== null && this.target.sendsComplete && !this.completeSent;
    return (
      this.state === "live" &&
      this.queue.empty &&
      !this.summaryDirty &&
      !this.configDirty &&
      this.files.size === 0 &&
      this.files.uploadedNames.length === 0 &&
      !completeDue &&
      this.sending === null
    );
  }

  /** Start connecting once (resume status, then upsert), in the background. */
  private startConnect(): void {
    this.connecting ??= this.runConnect().catch((error: unknown) =>
      this.toSpool(`unexpected failure while connecting: ${String(error)}`),
    );
  }

  /** Move queued lines whose `_step` is not above `lastStep` up (AReaL's rule). */
  private restep(lastStep: number): void {
    const { moved, lastStep: newLast } = this.queue.restep(lastStep);
    if (moved === 0) return;
    warn(
      `wandb.stepBackwards:${this.label}`,
      `W&B run ${this.label}: the run already has rows up to _step ${lastStep}; ${moved} queued row(s) are logged above it, with their global_step unchanged (AReaL's rule)`,
    );
    this.onRestepped?.(newLast);
  }

  private async runConnect(): Promise<void> {
    if (this.endpoint.apiKey === undefined) {
      this.toSpool("no API key: set WANDB_API_KEY or the backend's apiKey option");
      return;
    }
    const run = { name: this.upsert.name, project: this.project, entity: this.entity };
    const status = await withRetry(
      () => runResumeStatus(this.endpoint, run, this.limits.requestTimeoutMs, this.stop.signal),
      this.limits,
      this.stop.signal,
      this.observer,
    );
    if (this.state !== "connecting") return;
    if (!status.ok) return this.toSpool(status.reason, status.retryable);
    const decision = decideResume({ ...this.target, upsert: this.upsert }, status.value);
    if (!decision.ok) return this.toSpool(decision.reason);
    this.resumedLastStep = decision.lastStep;
    if (this.resumedLastStep >= 0) this.restep(this.resumedLastStep);
    const upserted = await this.sendUpsert();
    if (this.state !== "connecting") return;
    if (!upserted) return;
    this.queue.offset = decision.offset;
    this.absoluteOffsets = true;
    this.state = "live";
    this.kick();
  }

  private readonly observer = {
    onRetry: (reason: string, delayMs: number): void => {
      this.stats.retries++;
      warn(
        `wandb.retry:${this.label}`,
        `W&B run ${this.label}: ${reason}; retrying in ${Math.round(delayMs)} ms (retries are counted)`,
      );
    },
  };

  private async sendUpsert(): Promise<boolean> {
    this.configDirty = false;
    const variables = this.upsert;
    const headers = this.target.shared ? sharedModeHeaders(this.target.clientId ?? PRIMARY_CLIENT_ID) : {};
    const result = await withRetry(
      () => upsertRun(this.endpoint, variables, this.limits.requestTimeoutMs, headers, this.stop.signal),
      this.limits,
      this.stop.signal,
      this.observer,
    );
    if (this.state === "spooling" || this.state === "finished") return false;
    if (!result.ok) {
      this.toSpool(result.reason, result.retryable);
      return false;
    }
    this.entity = result.value.entity;
    this.project = result.value.project;
    return true;
  }

  private kick(): void {
    if (this.state !== "live" || this.sending !== null) return;
    this.sending = this.sendLoop()
      .catch((error: unknown) => this.toSpool(`unexpected failure while sending: ${String(error)}`))
      .finally(() => {
        this.sending = null;
      });
  }

  private async sendLoop(): Promise<void> {
    while (this.state === "live") {
      // Let lines batch up between requests, as W&B's own clients do; finishing sends at once.
      const wait = this.lastSendAt + this.limits.sendIntervalMs - Date.now();
      if (wait > 0 && !this.hurry.signal.aborted) {
        await sleep(wait, this.hurry.signal);
        continue;
      }
      if (this.configDirty) {
        if (!(await this.sendUpsert())) return;
        continue;
      }
      if (this.files.size > 0) {
        if (!(await this.uploadFiles())) return;
        continue;
      }
      const run = this.runOnServer();
      if (run === null) return;
      const lines = this.queue.peekRequest(this.limits.maxRequestBytes);
      const count = lines.length;
      const last = count >= this.queue.length;
      const summary = last && this.summaryDirty && this.summarySource !== null ? this.summarySource() : null;
      const exitcode = last && this.target.sendsComplete && !this.completeSent ? this.exitcode : null;
      const uploaded = this.files.uploadedNames.slice();
      const body = fileStreamBody({ lines, offset: this.queue.offset, summary, uploaded, exitcode });
      if (body === null) return;
      if (summary !== null) this.summaryDirty = false;
      const text = JSON.stringify(body);
      this.lastSendAt = Date.now();
      const result = await withRetry(
        () =>
          sendFileStream(
            this.endpoint,
            run,
            text,
            this.limits.requestTimeoutMs,
            this.target.clientId,
            this.stop.signal,
          ),
        this.limits,
        this.stop.signal,
        this.observer,
      );
      if (this.state !== "live") return; // spooled meanwhile: the spool holds these lines too
      if (!result.ok) {
        if (summary !== null) this.summaryDirty = true;
        this.toSpool(result.reason, result.retryable);
        return;
      }
      this.queue.ack(count);
      this.stats.linesSent += count;
      this.files.uploadedNames.splice(0, uploaded.length);
      if (exitcode !== null) this.completeSent = true;
    }
  }

  /** The run as the server named it (after the upsert), or null before that. */
  private runOnServer(): { entity: string; project: string; name: string } | null {
    return this.entity === null ? null : { entity: this.entity, project: this.project, name: this.upsert.name };
  }

  /** Upload the waiting files (see `uploadPendingFiles`). False when the writer spooled. */
  private async uploadFiles(): Promise<boolean> {
    const run = this.runOnServer();
    if (run === null) return false;
    const outcome = await uploadPendingFiles(this.files, {
      endpoint: this.endpoint,
      run,
      limits: this.limits,
      stop: this.stop.signal,
      observer: this.observer,
      live: () => this.state === "live",
      noUploadUrl: (name, content) => {
        reportError(
          `wandb.upload:${this.label}:${name}`,
          `W&B run ${this.label}: the server gave no upload URL for ${name}; it is written to the spool ${this.target.spoolDir}/files instead`,
        );
        this.spool.writeFile(name, content);
      },
    });
    if (outcome.kind === "uploaded") return true;
    if (outcome.kind === "failed") this.toSpool(outcome.reason, outcome.retryable);
    else this.spoolFiles();
    return false;
  }

  /** Files not uploaded go to the spool's `files/` (and the offline run's). */
  private spoolFiles(): void {
    for (const [name, content] of this.files.takeAll()) {
      this.spool.writeFile(name, content);
      this.offlineLog?.runFile(name, content);
    }
  }

  /**
   * Switch to spooling: what is queued goes to disk now, what comes later goes there too.
   * `recoverable` says the server was unreachable or slow (not refusing): `finish()` then tries to
   * send the spool itself if the server is back.
   */
  private toSpool(reason: string, recoverable = false): void {
    if (this.state === "spooling" || this.state === "finished") return;
    this.state = "spooling";
    this.recoverable = recoverable;
    this.stop.abort();
    this.hurry.abort();
    this.startOfflineLog();
    this.spoolFiles();
    const pending = this.queue.takeAll();
    this.spool.writeRunInfo(this.runInfo());
    // The summary so far: a process killed later leaves the spool's lines after it, and sync
    // sends this summary updated by them (lines on the server before the spool are not in it).
    const summary = this.absoluteOffsets ? fileStreamBody({ summary: this.summarySource?.() ?? null }) : null;
    if (summary !== null) this.spool.append([summary], this.absoluteOffsets);
    this.spoolLines(pending);
    reportError(
      `wandb.spooling:${this.label}`,
      `W&B run ${this.label}: ${reason}; history is now spooled to ${this.target.spoolDir} (nothing is dropped); ` +
        `run "rankscope wandb sync ${this.target.runDir}" when the server is reachable`,
    );
  }

  private spoolLines(lines: readonly string[]): void {
    if (lines.length === 0) return;
    this.spool.writeRunInfo(this.runInfo());
    this.spool.appendHistory(lines, this.queue.offset, this.limits.maxRequestBytes, this.absoluteOffsets);
    this.offlineLog?.history(lines);
    this.queue.offset += lines.length;
    this.stats.linesSpooled += lines.length;
  }
}
