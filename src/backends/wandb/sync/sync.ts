/**
 * `rankscope wandb sync RUN`: replay spooled W&B requests to the server, idempotently.
 *
 * For each spool directory under `{RUN}/wandb/`: create or resume the run (`UpsertBucket`, same
 * variables the writer would have used), then send each client's history lines from where the
 * server is. The server's own line count (`RunResumeStatus.historyLineCount`) and the offsets in
 * the spool decide what is sent, so lines the server already has are never sent again, and a
 * second sync sends nothing. Progress is also kept in `sync.json` beside the spool (needed for
 * shared runs, whose per-client counts the server does not report, and for offline spools whose
 * offsets count from 0).
 *
 * A run of its own whose spool holds no completion (its process was killed) is ended as W&B's own
 * `wandb sync` ends such an offline run: summary, run files, exit code 1 (`run-end.ts`).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { resolveSetting, textKind } from "../../../core/settings.js";
import { writeFileAtomicSync } from "../../../io/atomic-write.js";
import { basename, join } from "node:path";
import {
  createRunFiles,
  fileStreamBody,
  PRIMARY_CLIENT_ID,
  runResumeStatus,
  sendFileStream,
  sharedModeHeaders,
  splitByBytes,
  upsertRun,
} from "../client/api.js";
import { isRecord } from "../../../core/json.js";
import { completionKey, completionOf, runFiles, summaryOf } from "./run-end.js";
import { putFile, withRetry, type Endpoint } from "../client/http.js";
import { DEFAULT_LIMITS, normaliseBaseUrl, type SenderLimits } from "../options.js";
import { findSpools, readSpool, SPOOL_INFO_FILE, type SpooledClient, type SpooledRun } from "../spool/spool.js";

/** Progress of a sync, reported after every request. */
export interface SyncProgress {
  readonly runId: string;
  /** History lines done (sent now, or found on the server already) over all spools so far. */
  readonly done: number;
  readonly total: number;
}

/** Options of `syncSpool`. */
export interface SyncOptions {
  /** Server base URL; default the one the spool was written for. */
  baseUrl?: string;
  /** API key; default `WANDB_API_KEY`. Never written anywhere. */
  apiKey?: string;
  /** Sender limits (timeouts, retry); defaults as the backend's, with a 10-minute retry budget. */
  limits?: Partial<SenderLimits>;
  onProgress?: (progress: SyncProgress) => void;
}

/** What a sync did, per spooled run. */
export interface SyncResult {
  readonly runs: readonly {
    readonly dir: string;
    readonly runId: string;
    /** History lines sent by this sync. */
    readonly linesSent: number;
    /** History lines the server had already. */
    readonly linesSkipped: number;
    /** Whether this sync marked the run complete. */
    readonly completed: boolean;
    /** Requests made to the file-stream endpoint. */
    readonly requests: number;
  }[];
}

interface SyncState {
  /** Per client key: base added to relative offsets (fixed at the first sync). */
  bases: Record<string, number>;
  /** Per client key: absolute offset up to which the server has acknowledged lines. */
  sent: Record<string, number>;
  /** Per client key: the summary line last acknowledged. */
  summaries: Record<string, string>;
  completed: boolean;
  /** The completion sent (`completionKey`); a later attempt's lines need their own. */
  completedAs: string | undefined;
  /** Run files uploaded: name → sha256 of the content uploaded. */
  files: Record<string, string>;
}

function clientKey(client: SpooledClient): string {
  return client.clientId ?? "_";
}

function readState(dir: string): SyncState {
  const path = join(dir, "sync.json");
  if (!existsSync(path))
    return { bases: {}, sent: {}, summaries: {}, completed: false, completedAs: undefined, files: {} };
  const parsed: unknown = JSON.parse(readFileSync(path, "utf8"));
  const raw = isRecord(parsed) ? parsed : {};
  return {
    bases: numberFields(raw["bases"]),
    sent: numberFields(raw["sent"]),
    summaries: stringFields(raw["summaries"]),
    completed: raw["completed"] === true,
    completedAs: typeof raw["completedAs"] === "string" ? raw["completedAs"] : undefined,
    files: stringFields(raw["files"]),
  };
}

/** The numeric fields of a JSON object (a `sync.json` written by an older version may lack some). */
function numberFields(value: unknown): Record<string, number> {
  const out: Record<string, number> = {};
  if (isRecord(value))
    for (const [key, field] of Object.entries(value)) if (typeof field === "number") out[key] = field;
  return out;
}

/** The string fields of a JSON object. */
function stringFields(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (isRecord(value))
    for (const [key, field] of Object.entries(value)) if (typeof field === "string") out[key] = field;
  return out;
}

/** True when `sync.json` says this completion was sent (an older `sync.json` says only `completed`). */
function completionSent(state: SyncState, spool: SpooledRun, exitcode: number): boolean {
  return state.completedAs === undefined ? state.completed : state.completedAs === completionKey(spool, exitcode);
}

/** The run files not uploaded yet (or changed since), with their content and its sha256. */
function pendingFiles(spool: SpooledRun, state: SyncState): { name: string; content: string; sha256: string }[] {
  return [...runFiles(spool)]
    .map(([name, content]) => ({ name, content, sha256: createHash("sha256").update(content).digest("hex") }))
    .filter((f) => state.files[f.name] !== f.sha256);
}

function writeState(dir: string, state: SyncState): void {
  const path = join(dir, "sync.json");
  // A unique temporary file: two syncs of one spool must not write into each other's.
  writeFileAtomicSync(path, `${JSON.stringify(state, null, 2)}\n`);
}

/**
 * Sync every spool under `path` (a run directory, its `wandb/` folder, or one spool directory).
 * Throws an Error that says what to fix (no API key, a damaged spool, a resume policy conflict, a
 * server that keeps failing); what was sent before the error stays sent and is not sent again.
 */
export async function syncSpool(path: string, options: SyncOptions = {}): Promise<SyncResult> {
  const dirs = findSpools(path);
  if (dirs.length === 0)
    throw new Error(`no W&B spool under ${path}: expected ${join(path, "wandb", "<runId>", SPOOL_INFO_FILE)}`);
  const apiKey = resolveSetting<string | undefined>(
    { owner: "syncSpool", option: "apiKey", env: "WANDB_API_KEY", kind: textKind(), fallback: undefined, secret: true },
    options.apiKey,
  );
  if (apiKey === undefined)
    throw new Error("no W&B API key: set WANDB_API_KEY (the key is never written to the spool)");
  const limits: SenderLimits = { ...DEFAULT_LIMITS, retryBudgetMs: 600_000, ...options.limits };
  const spools = dirs.map((d) => readSpool(d));
  const progress = {
    done: 0,
    total: spools.reduce((n, s) => n + s.clients.reduce((m, c) => m + c.lines.length, 0), 0),
  };
  const runs: SyncResult["runs"][number][] = [];
  for (const spool of spools) runs.push(await syncOneSpool(spool, apiKey, limits, options, progress));
  return { runs };
}

/** What a result of the W&B API is when it succeeded; throws, naming `what`, when it failed. */
type Must = <T>(result: { ok: true; value: T } | { ok: false; reason: string }, what: string) => T;

/** One spool's sync, and the counts of it `syncSpool` returns. */
class SpoolSync {
  linesSent = 0;
  linesSkipped = 0;
  requests = 0;
  completed = false;
  readonly state: SyncState;
  readonly must: Must;

  constructor(
    readonly spool: SpooledRun,
    readonly endpoint: Endpoint,
    readonly limits: SenderLimits,
    private readonly options: SyncOptions,
    private readonly progress: { done: number; total: number },
  ) {
    this.state = readState(spool.dir);
    this.must = (result, what) => {
      if (!result.ok)
        throw new Error(
          `sync of ${basename(spool.dir)}: ${what} failed: ${result.reason}; nothing after it was sent, run sync again`,
        );
      return result.value;
    };
  }

  get runId(): string {
    return this.spool.info.upsert.name;
  }

  /** Count `lines` more as done (sent or already on the server) and tell the caller. */
  advance(lines: number): void {
    this.progress.done += lines;
    this.options.onProgress?.({ runId: this.runId, done: this.progress.done, total: this.progress.total });
  }

  save(): void {
    writeState(this.spool.dir, this.state);
  }

  result(): SyncResult["runs"][number] {
    const { linesSent, linesSkipped, completed, requests } = this;
    return { dir: this.spool.dir, runId: this.runId, linesSent, linesSkipped, completed, requests };
  }
}

/** Sync one spool: resume checks, then each client's history lines, the run files, and the run's end. */
async function syncOneSpool(
  spool: SpooledRun,
  apiKey: string,
  limits: SenderLimits,
  options: SyncOptions,
  progress: { done: number; total: number },
): Promise<SyncResult["runs"][number]> {
  const { info } = spool;
  const endpoint: Endpoint = { baseUrl: normaliseBaseUrl(options.baseUrl ?? info.baseUrl), apiKey };
  const sync = new SpoolSync(spool, endpoint, limits, options, progress);
  const { state, must } = sync;
  const status = must(
    await withRetry(
      () =>
        runResumeStatus(
          endpoint,
          { name: sync.runId, project: info.upsert.project, entity: info.upsert.entity },
          limits.requestTimeoutMs,
        ),
      limits,
    ),
    "RunResumeStatus",
  );
  checkResumePolicy(sync, status);
  const files = pendingFiles(spool, state);
  if (files.length === 0 && isOnServer(spool, state, status.historyLineCount)) {
    // Everything is on the server already: a second sync is a no-op.
    sync.linesSkipped = spool.clients.reduce((n, c) => n + c.lines.length, 0);
    sync.advance(sync.linesSkipped);
    return sync.result();
  }
  const upsertHeaders = info.shared ? sharedModeHeaders(PRIMARY_CLIENT_ID) : {};
  const upserted = must(
    await withRetry(() => upsertRun(endpoint, info.upsert, limits.requestTimeoutMs, upsertHeaders), limits),
    "UpsertBucket",
  );
  const run = { entity: upserted.entity, project: upserted.project, name: upserted.name };
  for (const client of spool.clients) await sendClientLines(sync, run, client, status.historyLineCount);
  if (files.length > 0) await uploadRunFiles(sync, run, files);
  const completion = completionOf(spool);
  if (completion !== undefined && !completionSent(state, spool, completion.exitcode)) {
    const { clientId, exitcode } = completion;
    const body = JSON.stringify({ complete: true, exitcode });
    must(
      await withRetry(() => sendFileStream(endpoint, run, body, limits.requestTimeoutMs, clientId), limits),
      "file_stream complete",
    );
    sync.requests++;
    state.completed = true;
    state.completedAs = completionKey(spool, exitcode);
    sync.completed = true;
    sync.save();
  }
  return sync.result();
}

/** On a first sync of relative offsets into a run of its own, the spool's resume policy against what the server holds. */
function checkResumePolicy(sync: SpoolSync, status: { exists: boolean; historyLineCount: number }): void {
  const { spool, state, endpoint, runId } = sync;
  const { info } = spool;
  const firstSync = Object.keys(state.bases).length === 0 && Object.keys(state.sent).length === 0;
  const relative = spool.clients.some((c) => !c.absoluteOffsets);
  if (!firstSync || !relative || info.shared) return;
  if (status.exists && status.historyLineCount > 0 && info.resume === "never") {
    throw new Error(
      `run ${runId} already exists on ${endpoint.baseUrl} and the spool says resume "never"; sync into another run by editing runId in ${join(spool.dir, SPOOL_INFO_FILE)}`,
    );
  }
  if (!status.exists && info.resume === "must") {
    throw new Error(`run ${runId} does not exist on ${endpoint.baseUrl} and the spool says resume "must"`);
  }
}

/** True when the sync state says every line, summary and the run's end were sent, and the server holds the lines. */
function isOnServer(spool: SpooledRun, state: SyncState, historyLineCount: number): boolean {
  const endOf = (c: SpooledClient): number => (state.bases[clientKey(c)] ?? 0) + c.firstOffset + c.lines.length;
  const completion = completionOf(spool);
  const allSent =
    (completion === undefined ? !state.completed : completionSent(state, spool, completion.exitcode)) &&
    spool.clients.every((c) => {
      const summary = summaryOf(c);
      return (
        (state.sent[clientKey(c)] ?? -1) >= endOf(c) &&
        (summary === undefined || state.summaries[clientKey(c)] === summary)
      );
    });
  return allSent && (spool.info.shared || historyLineCount >= Math.max(...spool.clients.map(endOf)));
}

/** Send one client's history lines the server lacks (and its summary), a request of at most `maxRequestBytes` at a time. */
async function sendClientLines(
  sync: SpoolSync,
  run: { entity: string; project: string; name: string },
  client: SpooledClient,
  historyLineCount: number,
): Promise<void> {
  const { state, endpoint, limits, must, runId } = sync;
  const key = clientKey(client);
  let base = state.bases[key];
  if (base === undefined) {
    base = client.absoluteOffsets ? 0 : client.clientId === null ? historyLineCount : 0;
    state.bases[key] = base;
    sync.save();
  }
  const start = base + client.firstOffset;
  const serverHas = Math.max(client.clientId === null ? historyLineCount : 0, state.sent[key] ?? 0);
  if (serverHas < start && client.absoluteOffsets && client.firstOffset > 0) {
    throw new Error(
      `sync of ${runId}: the server has ${serverHas} history lines but the spool starts at line ${start}; lines in between were lost on the server`,
    );
  }
  let next = Math.max(start, serverHas);
  const skipped = Math.min(client.lines.length, next - start);
  sync.linesSkipped += skipped;
  sync.advance(skipped);
  const end = start + client.lines.length;
  const summary = summaryOf(client);
  while (next < end || (summary !== undefined && state.summaries[key] !== summary)) {
    const from = next - start;
    const count = (splitByBytes(client.lines, limits.maxRequestBytes, from, 1)[0] ?? from) - from;
    const last = next + count >= end;
    const parts = {
      lines: client.lines.slice(from, from + count),
      offset: next,
      summary: last ? summary : undefined,
    };
    const body = JSON.stringify(fileStreamBody(parts) ?? { files: {} });
    must(
      await withRetry(() => sendFileStream(endpoint, run, body, limits.requestTimeoutMs, client.clientId), limits),
      "file_stream",
    );
    sync.requests++;
    next += count;
    sync.linesSent += count;
    state.sent[key] = next;
    if (last && summary !== undefined) state.summaries[key] = summary;
    sync.save();
    sync.advance(count);
  }
}

/** Upload run files (tables, config.yaml, version.json, the summary) as the SDK does, then tell the run they were uploaded. */
async function uploadRunFiles(
  sync: SpoolSync,
  run: { entity: string; project: string; name: string },
  files: ReturnType<typeof pendingFiles>,
): Promise<void> {
  const { state, endpoint, limits, must, spool } = sync;
  const uploads = must(
    await withRetry(
      () =>
        createRunFiles(
          endpoint,
          run,
          files.map((f) => f.name),
          limits.requestTimeoutMs,
        ),
      limits,
    ),
    "CreateRunFiles",
  );
  const uploaded: string[] = [];
  for (const f of files) {
    const url = uploads.urls.get(f.name);
    if (url === undefined)
      throw new Error(`sync of ${basename(spool.dir)}: the server gave no upload URL for ${f.name}; run sync again`);
    must(
      await withRetry(() => putFile(url, f.content, limits.requestTimeoutMs, uploads.headers), limits),
      `upload of ${f.name}`,
    );
    uploaded.push(f.name);
  }
  const body = JSON.stringify({ uploaded });
  must(
    await withRetry(
      () => sendFileStream(endpoint, run, body, limits.requestTimeoutMs, spool.info.shared ? PRIMARY_CLIENT_ID : null),
      limits,
    ),
    "file_stream uploaded",
  );
  sync.requests++;
  for (const f of files) state.files[f.name] = f.sha256;
  sync.save();
}
