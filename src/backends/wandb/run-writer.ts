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
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describeError, reportError, warn } from "../../core/diagnostics.js";
import { rankscopeVersion } from "../../run/run-files.js";
import { registerDrain } from "../../core/lifecycle.js";
import {
  createRunFiles,
  HISTORY_FILE,
  SUMMARY_FILE,
  runResumeStatus,
  sendFileStream,
  sharedModeHeaders,
  upsertRun,
  type FileStreamBody,
  type UpsertVariables,
} from "./api.js";
import { putFile, sleep, withRetry, type Endpoint } from "./http.js";
import type { SenderLimits, WandbResume } from "./options.js";
import { exportSpoolAsOfflineRun } from "./offline-run.js";
import { parseHistoryJson } from "./history.js";
import { readSpool, spoolFileName, SpoolWriter, type SpoolRunInfo, SPOOL_FORMAT } from "./spool.js";
import { syncSpool } from "./sync.js";

/** What a writer writes to. */
export interface RunTarget {
  readonly upsert: UpsertVariables;
  readonly resume: WandbResume;
  /** W&B shared mode: this writer's client id (the rank name); null for a run of its own. */
  readonly clientId: string | null;
  /** Whether the run is shared by ranks (all writers of it use shared mode). */
  readonly shared: boolean;
  /** Whether this writer marks the run complete at the end (false for ranks of a shared run). */
  readonly sendsComplete: boolean;
  /** Create the run only when there is a first row (ranks: one that logs nothing leaves no empty run). */
  readonly lazy: boolean;
  /** The run directory, for messages (`rankscope wandb sync {runDir}`). */
  readonly runDir: string;
  readonly spoolDir: string;
}

/** Counters a test or a status line can read. */
export interface WriterStats {
  /** History lines the server acknowledged. */
  linesSent: number;
  /** History lines written to the spool. */
  linesSpooled: number;
  /** Requests retried. */
  retries: number;
  /** Most bytes ever waiting in the queue. */
  maxQueuedBytes: number;
}

type State = "connecting" | "live" | "spooling" | "finished";

/** The start of every history line: `historyLine` always writes `_step` first. */
const STEP_PREFIX = /^\{"_step":(\d+)/;

/** Smallest bound of the spool's disk-write buffer (it is `max(maxQueuedBytes, this)`). */
export const SPOOL_BUFFER_MIN_BYTES = 16 * 1024 * 1024;

/**
 * What earlier offline attempts of a run left in its spool: the next offset and the last `_step`
 * (-1 and 0 when there is none, or when its offsets are absolute, i.e. it had reached the server).
 */
function previousOfflineAttempts(spoolDir: string, clientId: string | null, label: string): { nextOffset: number; lastStep: number } {
  const none = { nextOffset: 0, lastStep: -1 };
  if (!existsSync(join(spoolDir, spoolFileName(clientId))) || !existsSync(join(spoolDir, "run.json"))) return none;
  try {
    const client = readSpool(spoolDir).clients.find((c) => c.clientId === clientId);
    if (client === undefined || client.absoluteOffsets || client.lines.length === 0) return none;
    const last = parseHistoryJson(client.lines[client.lines.length - 1] as string) as Record<string, unknown>;
    return { nextOffset: client.firstOffset + client.lines.length, lastStep: typeof last["_step"] === "number" ? last["_step"] : -1 };
  } catch (error) {
    reportError(`wandb.spool.previous:${spoolDir}`, `W&B run ${label}: the spool of earlier attempts in ${spoolDir} cannot be read (${describeError(error)}); this attempt starts its own offsets at 0`);
    return none;
  }
}

export class RunWriter {
  private lines: string[] = [];
  private head = 0;
  private queuedBytes = 0;
  /** Offset of `lines[head]` (absolute once connected; from 0 in offline mode). */
  private offset = 0;
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
  /** Run files waiting to be uploaded (name → content; a newer content of a name replaces the older). */
  private files = new Map<string, string>();
  /** Files uploaded and not yet reported `uploaded` in the file stream. */
  private uploadedNames: string[] = [];
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
    this.spool = new SpoolWriter(target.spoolDir, target.clientId, Math.max(limits.maxQueuedBytes, SPOOL_BUFFER_MIN_BYTES));
    if (offline) {
      this.state = "spooling";
      // A resumed offline run continues the spool of its earlier attempts: offsets and `_step` go on from there.
      const previous = previousOfflineAttempts(target.spoolDir, target.clientId, label);
      this.offset = previous.nextOffset;
      this.resumedLastStep = previous.lastStep;
      this.attemptStartOffset = previous.nextOffset;
    } else {
      this.state = "connecting";
    }
    // The process may end before finish() (process.exit(), an uncaught exception, a signal whose
    // drain deadline cut finish() short): what was not sent goes to the spool, synchronously.
    this.unregisterDrain = registerDrain({
      name: `W&B run ${label}`,
      stage: "logger",
      exit: ({ reason }) => this.spoolAtExit(reason),
    });
  }

  private readonly unregisterDrain: () => void;

  /** Spool every unsent line (and the run's completion, as failed) now; for the exit path. */
  private spoolAtExit(reason: string): void {
    if (this.state === "finished") {
      // finish() ran but its spool writes had not reached the disk yet.
      this.spool.writeSync();
      return;
    }
    if (this.target.lazy && !this.everEnqueued && this.connecting === null) return;
    this.toSpool(`the process ended (${reason}) before everything was sent`, true);
    if (this.target.sendsComplete) this.spool.append([{ complete: true, exitcode: this.exitcode ?? 1 }], this.absoluteOffsets);
    this.state = "finished";
    this.spool.writeSync();
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
    return this.queuedBytes;
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
    if (this.queuedBytes + bytes > this.limits.maxQueuedBytes) {
      this.toSpool(`more than ${this.limits.maxQueuedBytes} bytes of history are waiting for the server`, true);
      this.spoolLines(lines);
      return;
    }
    for (const line of lines) this.lines.push(line);
    this.queuedBytes += bytes;
    if (this.queuedBytes > this.stats.maxQueuedBytes) this.stats.maxQueuedBytes = this.queuedBytes;
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
      return;
    }
    // Files count against the same memory bound as history: past it, they go to the spool.
    const waiting = this.queuedBytes + this.filesBytes() - (this.files.get(name)?.length ?? 0);
    if (waiting + content.length > this.limits.maxQueuedBytes) {
      this.toSpool(`more than ${this.limits.maxQueuedBytes} bytes of history and run files are waiting for the server`, true);
      this.spool.writeFile(name, content);
      return;
    }
    this.files.set(name, content);
    if (this.state === "connecting") this.startConnect();
    this.kick();
  }

  private filesBytes(): number {
    let bytes = 0;
    for (const content of this.files.values()) bytes += content.length;
    return bytes;
  }

  /** The run's config changed: upsert it again (queued behind what is in flight). */
  updateConfig(config: string): void {
    this.upsert = { ...this.upsert, config };
    if (this.state === "spooling") {
      this.spool.writeRunInfo(this.runInfo());
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
      const bodies: FileStreamBody[] = [];
      if (this.summarySource !== null) bodies.push({ files: { [SUMMARY_FILE]: { offset: 0, content: [this.summarySource()] } } });
      if (this.target.sendsComplete) bodies.push({ complete: true, exitcode });
      this.spool.writeRunInfo(this.runInfo());
      this.spool.append(bodies, this.absoluteOffsets);
      this.stop.abort();
      await this.sending;
    }
    this.state = "finished";
    // The exit drain stays until the spool is on disk: a finish() cut short by its deadline, then
    // process.exit(), still gets the run files and lines written synchronously.
    await this.spool.drain();
    this.unregisterDrain();
    if (this.spool.entries > 0 && (await this.recover(finishStarted + this.limits.finishTimeoutMs))) return;
    if (this.spool.entries > 0) {
      const offlineRun = this.writeOfflineRun();
      warn(
        `wandb.spooled:${this.target.spoolDir}`,
        `W&B run ${this.label}: ${this.stats.linesSpooled} history line(s)${this.target.sendsComplete ? " and the run's completion" : ""} are in the spool ${this.target.spoolDir}; ` +
          `run "rankscope wandb sync ${this.target.runDir}" to send them` +
          (offlineRun === null ? "" : `, or W&B's own "wandb sync ${offlineRun}"`),
      );
    }
  }

  /**
   * After an outage that ended before the run did: send the spool now (what `rankscope wandb sync`
   * would do), within the time left. Runs shared by ranks are left to `sync`: their clients finish
   * at different times, and the run's completion must come after all of them.
   */
  private async recover(deadline: number): Promise<boolean> {
    const left = deadline - Date.now();
    if (!this.recoverable || this.target.shared || left <= 0) return false;
    try {
      const result = await syncSpool(this.target.spoolDir, {
        apiKey: this.endpoint.apiKey,
        baseUrl: this.endpoint.baseUrl,
        limits: { ...this.limits, retryBudgetMs: left, requestTimeoutMs: Math.min(this.limits.requestTimeoutMs, left) },
      });
      const sent = result.runs.reduce((n, r) => n + r.linesSent, 0);
      warn(
        `wandb.recovered:${this.target.spoolDir}`,
        `W&B run ${this.label}: the server is back; ${sent} spooled history line(s) were sent at finish (the spool ${this.target.spoolDir} stays; syncing it again is a no-op)`,
      );
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The spool as a W&B offline run directory beside it, for the official `wandb sync` (a run of
   * its own only: shared runs have several writers). Returns its path, or null.
   */
  private writeOfflineRun(): string | null {
    if (this.target.shared) return null;
    try {
      return exportSpoolAsOfflineRun(this.target.spoolDir, `rankscope ${rankscopeVersion()}`, this.absoluteOffsets ? 0 : this.attemptStartOffset);
    } catch (error) {
      reportError(`wandb.offlineRun:${this.target.spoolDir}`, `W&B run ${this.label}: could not write the offline run for "wandb sync": ${describeError(error)}; the spool is intact`);
      return null;
    }
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
      this.head >= this.lines.length &&
      !this.summaryDirty &&
      !this.configDirty &&
      this.files.size === 0 &&
      this.uploadedNames.length === 0 &&
      !completeDue &&
      this.sending === null
    );
  }

  /** Start connecting once (resume status, then upsert), in the background. */
  private startConnect(): void {
    this.connecting ??= this.runConnect().catch((error: unknown) => this.toSpool(`unexpected failure while connecting: ${String(error)}`));
  }

  /** Move queued lines whose `_step` is not above `lastStep` up (AReaL's rule), in place. */
  private restep(lastStep: number): void {
    let next = lastStep + 1;
    let moved = 0;
    for (let i = this.head; i < this.lines.length; i++) {
      const line = this.lines[i] as string;
      const match = STEP_PREFIX.exec(line);
      if (match === null) continue;
      const step = Number(match[1]);
      if (step < next) {
        const replaced = `{"_step":${next}${line.slice((match[0] as string).length)}`;
        this.queuedBytes += replaced.length - line.length;
        this.lines[i] = replaced;
        moved++;
        next++;
      } else {
        next = step + 1;
      }
    }
    if (moved > 0) {
      warn(
        `wandb.stepBackwards:${this.label}`,
        `W&B run ${this.label}: the run already has rows up to _step ${lastStep}; ${moved} queued row(s) are logged above it, with their global_step unchanged (AReaL's rule)`,
      );
      this.onRestepped?.(next - 1);
    }
  }

  private async runConnect(): Promise<void> {
    if (this.endpoint.apiKey === undefined) {
      this.toSpool("no API key: set WANDB_API_KEY or the backend's apiKey option");
      return;
    }
    const run = { name: this.upsert.name, project: this.project, entity: this.entity };
    const status = await withRetry(() => runResumeStatus(this.endpoint, run, this.limits.requestTimeoutMs, this.stop.signal), this.limits, this.stop.signal, this.observer);
    if (this.state !== "connecting") return;
    if (!status.ok) return this.toSpool(status.reason, status.retryable);
    const { exists, historyLineCount, lastStep } = status.value;
    // Shared-mode clients keep their own offsets on the server, starting at 0.
    const base = this.target.clientId === null ? historyLineCount : 0;
    if (exists && this.target.resume === "never" && !this.target.shared) {
      return this.toSpool(`run ${this.upsert.name} already exists and resume is "never"; pick another runId or trial, or set resume: "allow"`);
    }
    if (!exists && this.target.resume === "must") {
      return this.toSpool(`run ${this.upsert.name} does not exist and resume is "must"; check runId/entity/project, or set resume: "allow"`);
    }
    this.resumedLastStep = exists ? lastStep : -1;
    if (this.resumedLastStep >= 0) this.restep(this.resumedLastStep);
    const upserted = await this.sendUpsert();
    if (this.state !== "connecting") return;
    if (!upserted) return;
    this.offset = base;
    this.absoluteOffsets = true;
    this.state = "live";
    this.kick();
  }

  private readonly observer = {
    onRetry: (reason: string, delayMs: number): void => {
      this.stats.retries++;
      warn(`wandb.retry:${this.label}`, `W&B run ${this.label}: ${reason}; retrying in ${Math.round(delayMs)} ms (retries are counted)`);
    },
  };

  private async sendUpsert(): Promise<boolean> {
    this.configDirty = false;
    const variables = this.upsert;
    const headers = this.target.shared ? sharedModeHeaders(this.target.clientId ?? "rankscope-primary") : {};
    const result = await withRetry(() => upsertRun(this.endpoint, variables, this.limits.requestTimeoutMs, headers, this.stop.signal), this.limits, this.stop.signal, this.observer);
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
      const body: FileStreamBody = {};
      let count = 0;
      let bytes = 0;
      while (this.head + count < this.lines.length) {
        const line = this.lines[this.head + count] as string;
        if (count > 0 && bytes + line.length > this.limits.maxRequestBytes) break;
        bytes += line.length;
        count++;
      }
      const files: NonNullable<FileStreamBody["files"]> = {};
      if (count > 0) files[HISTORY_FILE] = { offset: this.offset, content: this.lines.slice(this.head, this.head + count) };
      const last = this.head + count >= this.lines.length;
      const summary = last && this.summaryDirty && this.summarySource !== null ? this.summarySource() : null;
      if (summary !== null) files[SUMMARY_FILE] = { offset: 0, content: [summary] };
      if (count > 0 || summary !== null) body.files = files;
      const completing = last && this.exitcode !== null && this.target.sendsComplete && !this.completeSent;
      if (completing) {
        body.complete = true;
        body.exitcode = this.exitcode as number;
      }
      const uploaded = this.uploadedNames.slice();
      if (uploaded.length > 0) body.uploaded = uploaded;
      if (body.files === undefined && !completing && uploaded.length === 0) return;
      if (summary !== null) this.summaryDirty = false;
      const run = { entity: this.entity as string, project: this.project, name: this.upsert.name };
      const text = JSON.stringify(body);
      this.lastSendAt = Date.now();
      const result = await withRetry(() => sendFileStream(this.endpoint, run, text, this.limits.requestTimeoutMs, this.target.clientId, this.stop.signal), this.limits, this.stop.signal, this.observer);
      if (this.state !== "live") return; // spooled meanwhile: the spool holds these lines too
      if (!result.ok) {
        if (summary !== null) this.summaryDirty = true;
        this.toSpool(result.reason, result.retryable);
        return;
      }
      this.ack(count);
      this.uploadedNames.splice(0, uploaded.length);
      if (completing) this.completeSent = true;
    }
  }

  /** Upload the waiting files: `CreateRunFiles`, then a PUT per file. False when the writer spooled. */
  private async uploadFiles(): Promise<boolean> {
    const batch = [...this.files];
    this.files = new Map();
    const run = { entity: this.entity as string, project: this.project, name: this.upsert.name };
    const created = await withRetry(
      () => createRunFiles(this.endpoint, run, batch.map(([name]) => name), this.limits.requestTimeoutMs, this.stop.signal),
      this.limits,
      this.stop.signal,
      this.observer,
    );
    const giveBack = (from: number): void => {
      for (const [name, content] of batch.slice(from)) if (!this.files.has(name)) this.files.set(name, content);
    };
    if (this.state !== "live") {
      giveBack(0);
      this.spoolFiles();
      return false;
    }
    if (!created.ok) {
      giveBack(0);
      this.toSpool(created.reason, created.retryable);
      return false;
    }
    for (let i = 0; i < batch.length; i++) {
      const [name, content] = batch[i] as [string, string];
      const url = created.value.urls.get(name);
      if (url === undefined) {
        reportError(`wandb.upload:${this.label}:${name}`, `W&B run ${this.label}: the server gave no upload URL for ${name}; it is written to the spool ${this.target.spoolDir}/files instead`);
        this.spool.writeFile(name, content);
        continue;
      }
      const put = await withRetry(() => putFile(url, content, this.limits.requestTimeoutMs, created.value.headers, this.stop.signal), this.limits, this.stop.signal, this.observer);
      if (this.state !== "live" || !put.ok) {
        giveBack(i);
        if (this.state === "live" && !put.ok) this.toSpool(put.reason, put.retryable);
        else this.spoolFiles();
        return false;
      }
      this.uploadedNames.push(name);
    }
    return true;
  }

  /** Files not uploaded go to the spool's `files/`. */
  private spoolFiles(): void {
    for (const [name, content] of this.files) this.spool.writeFile(name, content);
    this.files.clear();
  }

  private ack(count: number): void {
    for (let i = 0; i < count; i++) this.queuedBytes -= (this.lines[this.head + i] as string).length;
    this.head += count;
    this.offset += count;
    this.stats.linesSent += count;
    // Compact now and then instead of shifting per request.
    if (this.head > 4096 && this.head * 2 > this.lines.length) {
      this.lines = this.lines.slice(this.head);
      this.head = 0;
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
    this.spoolFiles();
    const pending = this.lines.slice(this.head);
    this.lines = [];
    this.head = 0;
    this.queuedBytes = 0;
    this.spool.writeRunInfo(this.runInfo());
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
    const bodies: FileStreamBody[] = [];
    let start = 0;
    while (start < lines.length) {
      let end = start;
      let bytes = 0;
      while (end < lines.length && (end === start || bytes + (lines[end] as string).length <= this.limits.maxRequestBytes)) {
        bytes += (lines[end] as string).length;
        end++;
      }
      bodies.push({ files: { [HISTORY_FILE]: { offset: this.offset, content: lines.slice(start, end) } } });
      this.offset += end - start;
      start = end;
    }
    this.stats.linesSpooled += lines.length;
    this.spool.append(bodies, this.absoluteOffsets);
  }
}
