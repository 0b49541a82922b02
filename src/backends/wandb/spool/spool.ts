/**
 * The offline spool: what could not be sent, on disk exactly as it would have been sent.
 *
 * Layout, one directory per W&B run under the run directory:
 *
 * ```
 * wandb/{runId}/run.json                  the run: UpsertBucket variables, base URL, resume policy
 * wandb/{runId}/file_stream.jsonl         file-stream request bodies of the run's writer, in order
 * wandb/{runId}/file_stream.{client}.jsonl  the same per rank, for a run shared by ranks
 * wandb/{runId}/sync.json                 written by `rankscope wandb sync`: offset bases it used
 * wandb/{runId}/files/…                   run files not uploaded (tables, config.yaml, the summary)
 * ```
 *
 * A `file_stream*.jsonl` starts with a header line `{"spool":1,"clientId":…,"absoluteOffsets":…}`;
 * every other line is a request body `{"files":{"wandb-history.jsonl":{"offset","content"}, …}}`
 * or `{"complete":true,"exitcode":0}`. Offsets are absolute (what the server expects) when the
 * writer had talked to the server; in offline mode they count from 0 and `sync` adds the server's
 * line count at the first sync. No file of the spool ever holds the API key.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describeError, reportError } from "../../../core/diagnostics.js";
import { AppendFile } from "../../../io/append-file.js";
import { writeFileAtomic, writeFileAtomicSync } from "../../../io/atomic-write.js";
import { LatestFileWrites } from "../../../io/latest-files.js";
import { isRecord } from "../../../core/json.js";
import {
  HISTORY_FILE,
  isUpsertVariables,
  splitByBytes,
  SUMMARY_FILE,
  type FileStreamBody,
  type UpsertVariables,
} from "../client/api.js";
import type { WandbResume } from "../options.js";

export const SPOOL_FORMAT = "rankscope-wandb-spool";

/** The spool's description of its run (not the run directory's `run.json`, `RUN_META_FILE`). */
export const SPOOL_INFO_FILE = "run.json";

/** `run.json`. */
export interface SpoolRunInfo {
  readonly format: typeof SPOOL_FORMAT;
  readonly version: 1;
  readonly baseUrl: string;
  readonly resume: WandbResume;
  /** True when ranks write to this run through W&B's shared mode (one file per client). */
  readonly shared: boolean;
  readonly upsert: UpsertVariables;
}

/** The header line of a `file_stream*.jsonl`. */
interface SpoolHeader {
  readonly spool: 1;
  readonly clientId: string | null;
  readonly absoluteOffsets: boolean;
}

/** Directory of a run's spool. */
export function spoolDirFor(runDir: string, runId: string): string {
  return join(runDir, "wandb", runId);
}

/** File name of a client's requests. */
export function spoolFileName(clientId: string | null): string {
  return clientId === null ? "file_stream.jsonl" : `file_stream.${clientId.replace(/[^A-Za-z0-9_.-]+/g, "-")}.jsonl`;
}

/** Appends one writer's unsent requests to its spool file, never blocking and never throwing. */
export class SpoolWriter {
  private readonly file: AppendFile;
  private headerWritten = false;
  private runInfoText: string | null = null;
  private runInfoWrite: Promise<void> = Promise.resolve();
  /** Request bodies written (for messages and tests). */
  entries = 0;

  constructor(
    readonly dir: string,
    readonly clientId: string | null,
    maxQueuedBytes: number,
  ) {
    this.file = new AppendFile(join(dir, spoolFileName(clientId)), maxQueuedBytes);
  }

  /** Characters that could not be written to disk (counted by the file). */
  get lostChars(): number {
    return this.file.lostChars;
  }

  /** Write (or rewrite) run.json; later calls replace earlier content, written atomically. */
  writeRunInfo(info: SpoolRunInfo): void {
    const text = `${JSON.stringify(info, null, 2)}\n`;
    if (text === this.runInfoText) return;
    this.runInfoText = text;
    const path = join(this.dir, SPOOL_INFO_FILE);
    this.runInfoWrite = this.runInfoWrite.then(async () => {
      try {
        await writeFileAtomic(path, text);
      } catch (error) {
        reportError(
          `wandb.spool.runInfo:${path}`,
          `could not write ${path}: ${describeError(error)}; "rankscope wandb sync" needs it to replay this run`,
        );
      }
    });
  }

  /**
   * The exit path (nothing can be awaited): write run.json, the run files not written yet and
   * everything appended so far synchronously (the one atomic write). Failures are reported and
   * counted like the async ones.
   */
  writeSync(): void {
    this.files.writeSync();
    if (this.runInfoText !== null) {
      const path = join(this.dir, SPOOL_INFO_FILE);
      try {
        writeFileAtomicSync(path, this.runInfoText);
      } catch (error) {
        reportError(
          `wandb.spool.runInfo:${path}`,
          `could not write ${path}: ${describeError(error)}; "rankscope wandb sync" needs it to replay this run`,
        );
      }
    }
    this.file.writeQueuedSync();
  }

  /**
   * Write a run file (a table, `config.yaml`, the summary…) to `{dir}/files/{name}`, replacing an
   * earlier one; the offline run for `wandb sync` carries these files. Written asynchronously; a
   * file not on disk yet when the process exits is written by `writeSync`. Failures are reported.
   */
  writeFile(name: string, content: string): void {
    this.files.write(join(this.dir, "files", ...name.split("/")), content);
  }

  /** Run files written in the background, the rest by `writeSync` at exit. */
  private readonly files = new LatestFileWrites((path, error) =>
    reportError(`wandb.spool.file:${path}`, `could not write ${path}: ${describeError(error)}; this run file is lost`),
  );

  /** Append request bodies (the header goes first, once). */
  append(bodies: readonly FileStreamBody[], absoluteOffsets: boolean): void {
    if (bodies.length === 0) return;
    let text = "";
    if (!this.headerWritten) {
      const header: SpoolHeader = { spool: 1, clientId: this.clientId, absoluteOffsets };
      text += `${JSON.stringify(header)}\n`;
      this.headerWritten = true;
    }
    for (const body of bodies) text += `${JSON.stringify(body)}\n`;
    this.entries += bodies.length;
    this.file.append(text);
  }

  /**
   * Append history lines from file-stream offset `offset` on, as the requests that would have sent
   * them (at most `maxRequestBytes` each: the same cut as sending, `splitByBytes`).
   */
  appendHistory(lines: readonly string[], offset: number, maxRequestBytes: number, absoluteOffsets: boolean): void {
    const bodies: FileStreamBody[] = [];
    let start = 0;
    for (const end of splitByBytes(lines, maxRequestBytes)) {
      bodies.push({ files: { [HISTORY_FILE]: { offset: offset + start, content: lines.slice(start, end) } } });
      start = end;
    }
    this.append(bodies, absoluteOffsets);
  }

  /** Wait for everything appended so far to reach the disk. */
  async drain(): Promise<void> {
    await this.runInfoWrite;
    await this.files.drain();
    await this.file.drain();
  }
}

/** One client's spooled data, flattened. */
export interface SpooledClient {
  readonly file: string;
  readonly clientId: string | null;
  readonly absoluteOffsets: boolean;
  /** Offset of `lines[0]`. */
  readonly firstOffset: number;
  /** Contiguous history lines from `firstOffset`. */
  readonly lines: readonly string[];
  /** The last summary line written, if any. */
  readonly summary: string | undefined;
  /** How many of `lines`, at the end, came after that summary (all when none: a killed process's). */
  readonly linesAfterSummary: number;
  /** The exit code, when the run was completed by this client. */
  readonly exitcode: number | undefined;
}

/** A spool directory, read back. */
export interface SpooledRun {
  readonly dir: string;
  readonly info: SpoolRunInfo;
  readonly clients: readonly SpooledClient[];
}

function parseJsonLine(file: string, n: number, line: string): unknown {
  try {
    const value: unknown = JSON.parse(line);
    return value;
  } catch {
    throw new Error(
      `${file}:${n}: not a JSON line; the spool is damaged (a crash mid-write leaves at most the last line incomplete)`,
    );
  }
}

const RESUMES: readonly WandbResume[] = ["allow", "must", "never"];

/** `run.json` as read back, checked field by field (an Error naming the file and the field otherwise). */
function spoolRunInfoOf(value: unknown, path: string): SpoolRunInfo {
  const bad = (what: string): Error =>
    new Error(`${path}: ${what}; the spool's run.json is damaged or from another program`);
  if (!isRecord(value)) throw bad("not a JSON object");
  const { format, version, baseUrl, resume, shared, upsert } = value;
  if (format !== SPOOL_FORMAT)
    throw new Error(`${path}: format is ${JSON.stringify(format)}, expected ${SPOOL_FORMAT}`);
  if (version !== 1) throw bad(`version is ${JSON.stringify(version)}, expected 1`);
  if (typeof baseUrl !== "string") throw bad("baseUrl is not a string");
  const policy = RESUMES.find((r) => r === resume);
  if (policy === undefined) throw bad(`resume is ${JSON.stringify(resume)}, expected one of ${RESUMES.join(", ")}`);
  if (typeof shared !== "boolean") throw bad("shared is not true or false");
  if (!isUpsertVariables(upsert)) throw bad("upsert is not the run's UpsertBucket variables");
  return { format, version, baseUrl, resume: policy, shared, upsert };
}

/** The header line of a spool file, checked. */
function spoolHeaderOf(value: Readonly<Record<string, unknown>>, path: string): SpoolHeader {
  const { spool, clientId, absoluteOffsets } = value;
  if (spool !== 1) throw new Error(`${path}: the first line must be the spool header {"spool":1,...}`);
  if (!(clientId === null || typeof clientId === "string") || typeof absoluteOffsets !== "boolean") {
    throw new Error(
      `${path}: the spool header needs "clientId" (a string or null) and "absoluteOffsets" (true or false)`,
    );
  }
  return { spool, clientId, absoluteOffsets };
}

/** A request body line of a spool file, checked (an Error naming the line otherwise). */
function fileStreamBodyOf(value: Readonly<Record<string, unknown>>, where: string): FileStreamBody {
  const bad = (what: string): Error => new Error(`${where}: ${what}; the spool is damaged`);
  const body: FileStreamBody = {};
  const { files, uploaded, complete, exitcode } = value;
  if (files !== undefined) {
    if (!isRecord(files)) throw bad("files is not an object");
    body.files = {};
    for (const [name, file] of Object.entries(files)) {
      const content = isRecord(file) ? file["content"] : undefined;
      const offset = isRecord(file) ? file["offset"] : undefined;
      if (
        typeof offset !== "number" ||
        !Array.isArray(content) ||
        !content.every((line): line is string => typeof line === "string")
      ) {
        throw bad(`files["${name}"] needs a numeric offset and content as an array of strings`);
      }
      body.files[name] = { offset, content };
    }
  }
  if (uploaded !== undefined) {
    if (!Array.isArray(uploaded) || !uploaded.every((name): name is string => typeof name === "string"))
      throw bad("uploaded is not an array of file names");
    body.uploaded = uploaded;
  }
  if (complete !== undefined) {
    if (typeof complete !== "boolean") throw bad("complete is not true or false");
    body.complete = complete;
  }
  if (exitcode !== undefined) {
    if (typeof exitcode !== "number") throw bad("exitcode is not a number");
    body.exitcode = exitcode;
  }
  return body;
}

/** Read one client file: history lines by offset (duplicates of the same offset must agree). */
function readClient(dir: string, name: string): SpooledClient {
  const path = join(dir, name);
  const rows = readFileSync(path, "utf8").split("\n");
  let header: SpoolHeader | undefined;
  const byOffset = new Map<number, string>();
  let summary: string | undefined;
  let exitcode: number | undefined;
  let highest = -1; // the highest history offset read so far; `summaryAfter`: at the last summary
  let summaryAfter = -1;
  let lastNonEmpty = rows.length - 1;
  while (lastNonEmpty >= 0 && (rows[lastNonEmpty] ?? "").trim() === "") lastNonEmpty--;
  rows.forEach((line, i) => {
    if (line.trim() === "") return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      // A crash can cut the last line short; everything before it is intact.
      if (i === lastNonEmpty) {
        reportError(
          `wandb.spool.truncated:${path}`,
          `${path}: the last line is incomplete (the writer stopped mid-line); it is skipped`,
        );
        return;
      }
      throw new Error(`${path}:${i + 1}: not a JSON line; the spool is damaged`);
    }
    if (!isRecord(parsed)) throw new Error(`${path}:${i + 1}: not a JSON object; the spool is damaged`);
    if (header === undefined) {
      header = spoolHeaderOf(parsed, path);
      return;
    }
    const body = fileStreamBodyOf(parsed, `${path}:${i + 1}`);
    const history = body.files?.[HISTORY_FILE];
    if (history !== undefined) {
      history.content.forEach((text, k) => {
        const offset = history.offset + k;
        const seen = byOffset.get(offset);
        if (seen !== undefined && seen !== text)
          throw new Error(`${path}: two different history lines at offset ${offset}; the spool is inconsistent`);
        byOffset.set(offset, text);
        if (offset > highest) highest = offset;
      });
    }
    const summaryFile = body.files?.[SUMMARY_FILE];
    if (summaryFile !== undefined && summaryFile.content.length > 0) {
      summary = summaryFile.content[summaryFile.content.length - 1];
      summaryAfter = highest;
    }
    if (body.complete === true) exitcode = body.exitcode ?? 0;
  });
  if (header === undefined) throw new Error(`${path}: empty spool file (no header)`);
  const offsets = [...byOffset.keys()].sort((a, b) => a - b);
  const first = offsets[0] ?? 0;
  const lines: string[] = [];
  offsets.forEach((o, i) => {
    const line = byOffset.get(o);
    if (o !== first + i || line === undefined)
      throw new Error(`${path}: history offsets jump from ${first + i - 1} to ${o}; lines are missing from the spool`);
    lines.push(line);
  });
  return {
    file: path,
    clientId: header.clientId,
    absoluteOffsets: header.absoluteOffsets,
    firstOffset: first,
    lines,
    summary,
    linesAfterSummary:
      summary === undefined
        ? lines.length
        : Math.max(0, Math.min(lines.length, first + lines.length - 1 - summaryAfter)),
    exitcode,
  };
}

/** Read a spool directory (`wandb/{runId}`). Throws an Error naming the file when it is damaged. */
export function readSpool(dir: string): SpooledRun {
  const infoPath = join(dir, SPOOL_INFO_FILE);
  if (!existsSync(infoPath)) throw new Error(`${dir} is not a W&B spool: it has no run.json`);
  const info = spoolRunInfoOf(parseJsonLine(infoPath, 1, readFileSync(infoPath, "utf8")), infoPath);
  const clients = readdirSync(dir)
    .filter((f) => f.startsWith("file_stream") && f.endsWith(".jsonl"))
    .sort()
    .map((f) => readClient(dir, f));
  return { dir, info, clients };
}

/** Every spool directory of a run directory (or the directory itself when it is one). */
export function findSpools(path: string): string[] {
  if (existsSync(join(path, SPOOL_INFO_FILE)) && readdirSync(path).some((f) => f.startsWith("file_stream")))
    return [path];
  const root = existsSync(join(path, "wandb")) ? join(path, "wandb") : path;
  if (!existsSync(root)) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(root, d.name, SPOOL_INFO_FILE)))
    .map((d) => join(root, d.name))
    .sort();
}

/** The run files a spool holds under `files/` (relative, `/`-separated, sorted). */
export function spooledFiles(spoolDir: string): string[] {
  const walk = (dir: string, prefix: string): string[] => {
    if (!existsSync(dir)) return [];
    const out: string[] = [];
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const name = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
      if (entry.isDirectory()) out.push(...walk(join(dir, entry.name), name));
      else out.push(name);
    }
    return out;
  };
  return walk(join(spoolDir, "files"), "").sort();
}
