/**
 * The three W&B API calls rankscope makes, with their exact shapes (see docs/wandb.md):
 *
 * - `POST {base}/graphql` — `RunResumeStatus` (does the run exist, how many history lines does it
 *   have) and `UpsertBucket` (create or update the run: entity, project, name, display name, group,
 *   job type, config, tags, notes).
 * - `POST {base}/files/{entity}/{project}/{run}/file_stream` — history lines at contiguous
 *   offsets, the summary, and at the end `complete` with the exit code.
 */
import { isRecord, jsonText } from "../../../core/json.js";
import { parseHistoryJson } from "./history.js";
import { postJson, type Attempt, type Endpoint } from "./http.js";

const CREATE_RUN_FILES = `mutation CreateRunFiles($entity: String!, $project: String!, $run: String!, $files: [String!]!) {
  createRunFiles(input: {entityName: $entity, projectName: $project, runName: $run, files: $files}) {
    runID
    uploadHeaders
    files { name uploadUrl }
  }
}`;

/** Where to upload run files: per file name its URL, and the headers to send with every upload. */
interface RunFileUploads {
  readonly urls: ReadonlyMap<string, string>;
  readonly headers: Readonly<Record<string, string>>;
}

/** The variables of `UpsertBucket`: what a run is created or resumed with. */
export interface UpsertVariables {
  /** The run id (W&B calls it the bucket `name`). */
  readonly name: string;
  readonly project: string;
  readonly entity: string | null;
  readonly displayName: string;
  readonly groupName: string | null;
  readonly jobType: string | null;
  readonly notes: string | null;
  readonly tags: readonly string[] | null;
  /** W&B's config format, as a JSON string: `{"lr": {"value": 0.001}, ...}`. */
  readonly config: string;
}

const UPSERT_BUCKET = `mutation UpsertBucket($name: String, $project: String, $entity: String, $displayName: String, $groupName: String, $jobType: String, $notes: String, $tags: [String!], $config: JSONString) {
  upsertBucket(input: {name: $name, modelName: $project, entityName: $entity, displayName: $displayName, groupName: $groupName, jobType: $jobType, notes: $notes, tags: $tags, config: $config}) {
    bucket { id name displayName project { name entity { name } } }
    inserted
  }
}`;

const RUN_RESUME_STATUS = `query RunResumeStatus($project: String, $entity: String, $name: String!) {
  model(name: $project, entityName: $entity) {
    bucket(name: $name, missingOk: true) { id name historyLineCount historyTail }
  }
}`;

/** What the server said about an upserted run. */
interface UpsertedRun {
  /** The server's storage id of the run. */
  readonly storageId: string;
  /** The run id (URL segment). */
  readonly name: string;
  readonly project: string;
  readonly entity: string;
  readonly inserted: boolean;
}

/** A run as found before resuming it. */
export interface ResumeStatus {
  readonly exists: boolean;
  readonly historyLineCount: number;
  /** The `_step` of the last history line on the server, or -1. */
  readonly lastStep: number;
}

function fail<T>(reason: string): Attempt<T> {
  return { ok: false, retryable: false, retryAfterMs: undefined, reason, status: undefined };
}

async function graphql(
  endpoint: Endpoint,
  query: string,
  variables: object,
  timeoutMs: number,
  headers: Readonly<Record<string, string>>,
  stop?: AbortSignal,
): Promise<Attempt<Record<string, unknown>>> {
  const answer = await postJson(endpoint, "/graphql", JSON.stringify({ query, variables }), timeoutMs, headers, stop);
  if (!answer.ok) return answer;
  const body = record(answer.value);
  const errors = body?.["errors"];
  if (Array.isArray(errors) && errors.length > 0) {
    const messages = errors.map((e: unknown) => {
      const message = record(e)?.["message"];
      return message === undefined ? String(e) : String(message);
    });
    return fail(`W&B GraphQL error: ${messages.join("; ")}`);
  }
  const data = record(body?.["data"]);
  if (data === undefined) return fail("W&B GraphQL answer has no data");
  return { ok: true, value: data };
}

function record(value: unknown): Record<string, unknown> | undefined {
  return isRecord(value) ? value : undefined;
}

/** True for `UpsertVariables` as handed between processes (a shared run's primary metadata). */
export function isUpsertVariables(value: unknown): value is UpsertVariables {
  if (!isRecord(value)) return false;
  const text = (key: string): boolean => typeof value[key] === "string";
  const textOrNull = (key: string): boolean => value[key] === null || typeof value[key] === "string";
  const tags = value["tags"];
  return (
    text("name") &&
    text("project") &&
    text("displayName") &&
    text("config") &&
    textOrNull("entity") &&
    textOrNull("groupName") &&
    textOrNull("jobType") &&
    textOrNull("notes") &&
    (tags === null || (Array.isArray(tags) && tags.every((t) => typeof t === "string")))
  );
}

/** Create or update a run. */
export async function upsertRun(
  endpoint: Endpoint,
  variables: UpsertVariables,
  timeoutMs: number,
  headers: Readonly<Record<string, string>> = {},
  stop?: AbortSignal,
): Promise<Attempt<UpsertedRun>> {
  const answer = await graphql(endpoint, UPSERT_BUCKET, variables, timeoutMs, headers, stop);
  if (!answer.ok) return answer;
  const upsert = record(answer.value["upsertBucket"]);
  const bucket = record(upsert?.["bucket"]);
  const project = record(bucket?.["project"]);
  const entity = record(project?.["entity"]);
  if (
    bucket === undefined ||
    typeof bucket["name"] !== "string" ||
    typeof project?.["name"] !== "string" ||
    typeof entity?.["name"] !== "string"
  ) {
    return fail("W&B upsertBucket answer lacks bucket { name project { name entity { name } } }");
  }
  return {
    ok: true,
    value: {
      storageId: String(bucket["id"]),
      name: bucket["name"],
      project: project["name"],
      entity: entity["name"],
      inserted: upsert?.["inserted"] === true,
    },
  };
}

/**
 * Register run files (`CreateRunFiles`, as W&B's SDK does before uploading `config.yaml`,
 * `wandb-summary.json`, media…): the answer gives each file's upload URL and the headers
 * (`"Name:Value"` strings) to PUT it with.
 */
export async function createRunFiles(
  endpoint: Endpoint,
  run: { readonly entity: string; readonly project: string; readonly name: string },
  files: readonly string[],
  timeoutMs: number,
  stop?: AbortSignal,
): Promise<Attempt<RunFileUploads>> {
  const answer = await graphql(
    endpoint,
    CREATE_RUN_FILES,
    { entity: run.entity, project: run.project, run: run.name, files },
    timeoutMs,
    {},
    stop,
  );
  if (!answer.ok) return answer;
  const created = record(answer.value["createRunFiles"]);
  const list = created?.["files"];
  if (created === undefined || !Array.isArray(list))
    return fail("W&B createRunFiles answer lacks files { name uploadUrl }");
  const urls = new Map<string, string>();
  for (const entry of list) {
    const f = record(entry);
    if (typeof f?.["name"] === "string" && typeof f["uploadUrl"] === "string") urls.set(f["name"], f["uploadUrl"]);
  }
  const headers: Record<string, string> = {};
  for (const h of Array.isArray(created["uploadHeaders"]) ? created["uploadHeaders"] : []) {
    const text = String(h);
    const colon = text.indexOf(":");
    if (colon > 0) headers[text.slice(0, colon).trim()] = text.slice(colon + 1).trim();
  }
  return { ok: true, value: { urls, headers } };
}

/** Ask whether a run exists and how far its history goes. */
export async function runResumeStatus(
  endpoint: Endpoint,
  run: { readonly name: string; readonly project: string; readonly entity: string | null },
  timeoutMs: number,
  stop?: AbortSignal,
): Promise<Attempt<ResumeStatus>> {
  const answer = await graphql(endpoint, RUN_RESUME_STATUS, run, timeoutMs, {}, stop);
  if (!answer.ok) return answer;
  const bucket = record(record(answer.value["model"])?.["bucket"]);
  if (bucket === undefined) return { ok: true, value: { exists: false, historyLineCount: 0, lastStep: -1 } };
  const count = typeof bucket["historyLineCount"] === "number" ? bucket["historyLineCount"] : 0;
  return { ok: true, value: { exists: true, historyLineCount: count, lastStep: lastStepOf(bucket["historyTail"]) } };
}

/** `_step` of the last line of a `historyTail` (a JSON string holding an array of line strings; lines may hold NaN/±Infinity). */
export function lastStepOf(tail: unknown): number {
  if (typeof tail !== "string") return -1;
  try {
    const lines: unknown = JSON.parse(tail);
    if (!Array.isArray(lines) || lines.length === 0) return -1;
    const last = lines[lines.length - 1];
    const row = typeof last === "string" ? parseHistoryJson(last) : last;
    const step = record(row)?.["_step"];
    return typeof step === "number" ? step : -1;
  } catch {
    return -1;
  }
}

/** One file-stream request body, as sent and as spooled. */
export interface FileStreamBody {
  files?: Record<string, { offset: number; content: string[] }>;
  /** Run files uploaded since the last request (W&B lists them as uploaded). */
  uploaded?: string[];
  complete?: boolean;
  exitcode?: number;
}

/** What one file-stream request carries; absent parts are left out of its body. */
interface FileStreamParts {
  /** History lines, the first at `offset`. */
  readonly lines?: readonly string[];
  readonly offset?: number;
  /** The summary line (the whole summary: W&B keeps the last one). */
  readonly summary?: string | null;
  /** Run files uploaded since the last request. */
  readonly uploaded?: readonly string[];
  /** Marks the run complete with this exit code. */
  readonly exitcode?: number | null;
}

/**
 * The one rule for cutting history lines into file-stream requests, for what is sent and what is
 * spooled alike: `lines` from `from` on, cut into consecutive runs of at most `maxBytes` characters each (a line
 * longer than that is a run of its own). Returns the end index (exclusive) of each run, at most
 * `maxRuns` of them.
 */
export function splitByBytes(lines: readonly string[], maxBytes: number, from = 0, maxRuns = Infinity): number[] {
  const ends: number[] = [];
  let bytes = 0;
  let count = 0;
  for (let i = from; i < lines.length; i++) {
    const length = lines[i]?.length ?? 0;
    if (count > 0 && bytes + length > maxBytes) {
      ends.push(i);
      if (ends.length >= maxRuns) return ends;
      bytes = 0;
      count = 0;
    }
    bytes += length;
    count++;
  }
  if (count > 0) ends.push(lines.length);
  return ends;
}

/** The body of one file-stream request, or null when it would carry nothing. */
export function fileStreamBody(parts: FileStreamParts): FileStreamBody | null {
  const body: FileStreamBody = {};
  const files: NonNullable<FileStreamBody["files"]> = {};
  if (parts.lines !== undefined && parts.lines.length > 0)
    files[HISTORY_FILE] = { offset: parts.offset ?? 0, content: [...parts.lines] };
  if (parts.summary !== undefined && parts.summary !== null)
    files[SUMMARY_FILE] = { offset: 0, content: [parts.summary] };
  if (Object.keys(files).length > 0) body.files = files;
  if (parts.exitcode !== undefined && parts.exitcode !== null) {
    body.complete = true;
    body.exitcode = parts.exitcode;
  }
  if (parts.uploaded !== undefined && parts.uploaded.length > 0) body.uploaded = [...parts.uploaded];
  return body.files === undefined && body.uploaded === undefined && body.complete === undefined ? null : body;
}

export const HISTORY_FILE = "wandb-history.jsonl";
export const SUMMARY_FILE = "wandb-summary.json";

/** Client id the primary of a shared run uses (ranks use their rank names). */
export const PRIMARY_CLIENT_ID = "rankscope-primary";

/** Headers of W&B's shared mode: the server keeps offsets per client of a run shared by ranks. */
export function sharedModeHeaders(clientId: string | null): Record<string, string> {
  return clientId === null ? {} : { "X-WANDB-USE-ASYNC-FILESTREAM": "true", "X-WANDB-ASYNC-CLIENT-ID": clientId };
}

/** Send one file-stream request. */
export function sendFileStream(
  endpoint: Endpoint,
  run: { readonly entity: string; readonly project: string; readonly name: string },
  body: string,
  timeoutMs: number,
  clientId: string | null,
  stop?: AbortSignal,
): Promise<Attempt<unknown>> {
  const path = `/files/${encodeURIComponent(run.entity)}/${encodeURIComponent(run.project)}/${encodeURIComponent(run.name)}/file_stream`;
  return postJson(endpoint, path, body, timeoutMs, sharedModeHeaders(clientId), stop);
}

/**
 * W&B's config format: every key wrapped as `{ value }`. Non-finite numbers as the strings
 * "NaN", "Infinity", "-Infinity"; bigints exactly (an integer literal within int64, else a string).
 */
export function configJson(config: Readonly<Record<string, unknown>>): string {
  const wrapped: Record<string, { value: unknown }> = {};
  for (const [key, value] of Object.entries(config)) wrapped[key] = { value };
  return jsonText(wrapped, "string");
}
