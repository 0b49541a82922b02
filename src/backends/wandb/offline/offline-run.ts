/**
 * W&B offline run directories, as the official SDK writes them and `wandb sync` reads them:
 *
 * ```
 * wandb/offline-run-YYYYMMDD_HHMMSS-{runId}/run-{runId}.wandb
 * ```
 *
 * The `.wandb` file is W&B's transaction log (wandb-core `core/pkg/leveldb/record.go`,
 * `core/internal/transactionlog/`): LevelDB-log framing in 32 KiB blocks — the file starts with the
 * 7-byte W&B header (`:W&B`, magic 0xBEE1 little-endian, store version 0); every record is split
 * into chunks, each with a 7-byte header (CRC-32 (IEEE, as `transactionlog` uses; not masked) of the
 * chunk type and data, little-endian; data length, u16 LE; type: 1 full, 2 first, 3 middle, 4
 * last); a block with fewer than 7 bytes left is zero-padded. Each record is a protobuf `Record` of
 * `wandb/proto/wandb_internal.proto`; only the fields written here are declared (same numbers).
 *
 * Records written, in the order the SDK writes them: header, run (id, entity, project, name,
 * group, job type, notes, tags, config, start time), config, one history record per history line
 * (every top-level key an item with its JSON, `_step` also as the step number) and, after each
 * flush's, a summary record of their latest values (as wandb-core writes one with each row), then
 * the full summary, exit, final. Values keep W&B's JSON, with NaN and ±Infinity as the bare tokens its SDK writes.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import protobuf from "protobufjs/light.js";
import { isRecord, jsonText } from "../../../core/json.js";
import { writeFileAtomicSync } from "../../../io/atomic-write.js";
import { parseHistoryObject } from "../client/history.js";
import type { SpoolRunInfo } from "../spool/spool.js";

const item = {
  fields: {
    key: { type: "string", id: 1 },
    nested_key: { rule: "repeated", type: "string", id: 2 },
    value_json: { type: "string", id: 16 },
  },
};

const descriptor = {
  nested: {
    wandb_internal: {
      nested: {
        Record: {
          oneofs: {
            record_type: {
              oneof: ["history", "summary", "config", "files", "metric", "run", "exit", "final", "header"],
            },
          },
          fields: {
            num: { type: "int64", id: 1 },
            history: { type: "HistoryRecord", id: 2 },
            summary: { type: "SummaryRecord", id: 3 },
            config: { type: "ConfigRecord", id: 5 },
            files: { type: "FilesRecord", id: 6 },
            metric: { type: "MetricRecord", id: 12 },
            run: { type: "RunRecord", id: 17 },
            exit: { type: "RunExitRecord", id: 18 },
            final: { type: "FinalRecord", id: 20 },
            header: { type: "HeaderRecord", id: 21 },
          },
        },
        // Read only (`rankscope import wandb`): `define_metric`'s declarations, custom x-axes among them.
        MetricRecord: {
          fields: {
            name: { type: "string", id: 1 },
            glob_name: { type: "string", id: 2 },
            step_metric: { type: "string", id: 4 },
          },
        },
        FilesRecord: { fields: { files: { rule: "repeated", type: "FilesItem", id: 1 } } },
        // policy (NOW 0, END 1, LIVE 2) and type (OTHER 0, WANDB 1, MEDIA 2, ARTIFACT 3) are enums there: same varint on the wire.
        FilesItem: {
          fields: { path: { type: "string", id: 1 }, policy: { type: "int32", id: 2 }, type: { type: "int32", id: 3 } },
        },
        HistoryStep: { fields: { num: { type: "int64", id: 1 } } },
        HistoryRecord: {
          fields: { item: { rule: "repeated", type: "HistoryItem", id: 1 }, step: { type: "HistoryStep", id: 2 } },
        },
        HistoryItem: item,
        SummaryRecord: { fields: { update: { rule: "repeated", type: "SummaryItem", id: 1 } } },
        SummaryItem: item,
        ConfigRecord: { fields: { update: { rule: "repeated", type: "ConfigItem", id: 1 } } },
        ConfigItem: item,
        Timestamp: { fields: { seconds: { type: "int64", id: 1 }, nanos: { type: "int32", id: 2 } } },
        RunRecord: {
          fields: {
            run_id: { type: "string", id: 1 },
            entity: { type: "string", id: 2 },
            project: { type: "string", id: 3 },
            config: { type: "ConfigRecord", id: 4 },
            run_group: { type: "string", id: 6 },
            job_type: { type: "string", id: 7 },
            display_name: { type: "string", id: 8 },
            notes: { type: "string", id: 9 },
            tags: { rule: "repeated", type: "string", id: 10 },
            start_time: { type: "Timestamp", id: 17 },
          },
        },
        RunExitRecord: { fields: { exit_code: { type: "int32", id: 1 }, runtime: { type: "int32", id: 2 } } },
        FinalRecord: { fields: {} },
        VersionInfo: { fields: { producer: { type: "string", id: 1 }, min_consumer: { type: "string", id: 2 } } },
        HeaderRecord: { fields: { version_info: { type: "VersionInfo", id: 1 } } },
      },
    },
  },
};

const root = protobuf.Root.fromJSON(descriptor);
/** The `wandb_internal.Record` message (the subset written here). */
export const WandbRecord = root.lookupType("wandb_internal.Record");

/** The W&B header at the start of a `.wandb` file: ident, magic 0xBEE1 (LE), store version 0. */
const WANDB_HEADER = Buffer.from([0x3a, 0x57, 0x26, 0x42, 0xe1, 0xbe, 0x00]);
const BLOCK_SIZE = 32 * 1024;
const CHUNK_HEADER = 7;
const FULL = 1;
const FIRST = 2;
const MIDDLE = 3;
const LAST = 4;

/**
 * Frames records as a `.wandb` transaction log, continuing where the last call ended: the file
 * can be written a piece at a time (each piece whole records), so what is on disk after any
 * append is a valid log (`offline-run-log.ts` writes a run's log as it goes).
 */
export class TransactionLogFramer {
  /** Position within the current 32 KiB block. */
  private offset = 0;

  /** The 7-byte W&B header: the first bytes of the file. */
  header(): Buffer {
    this.offset = WANDB_HEADER.length;
    return WANDB_HEADER;
  }

  /** The bytes that append `records` to the log written so far. */
  frame(records: readonly Uint8Array[]): Buffer {
    const parts: Buffer[] = [];
    for (const record of records) {
      let at = 0;
      let first = true;
      do {
        const left = BLOCK_SIZE - this.offset;
        if (left < CHUNK_HEADER) {
          parts.push(Buffer.alloc(left));
          this.offset = 0;
          continue;
        }
        const take = Math.min(record.length - at, left - CHUNK_HEADER);
        const end = at + take === record.length;
        const type = first ? (end ? FULL : FIRST) : end ? LAST : MIDDLE;
        const chunk = Buffer.alloc(CHUNK_HEADER + take);
        chunk[6] = type;
        chunk.set(record.subarray(at, at + take), CHUNK_HEADER);
        chunk.writeUInt32LE(crc32(chunk.subarray(6)), 0);
        chunk.writeUInt16LE(take, 4);
        parts.push(chunk);
        this.offset += chunk.length;
        at += take;
        first = false;
        if (end) break;
      } while (at <= record.length);
    }
    return Buffer.concat(parts);
  }
}

/** The records of a `.wandb` transaction log, or where it stops being one. */
export interface ReadTransactionLog {
  readonly records: Buffer[];
  /** The first fault (a bad header, a CRC, a file ending inside a record), with its byte offset. */
  readonly fault?: { readonly offset: number; readonly reason: string };
}

/** Read a transaction log back (`TransactionLogFramer`'s inverse, as wandb-core's reader checks it). */
export function readTransactionLog(data: Buffer): ReadTransactionLog {
  const records: Buffer[] = [];
  if (data.length < WANDB_HEADER.length || !data.subarray(0, WANDB_HEADER.length).equals(WANDB_HEADER))
    return { records, fault: { offset: 0, reason: "it does not start with the W&B header (:W&B, 0xBEE1, version 0)" } };
  let pos = WANDB_HEADER.length;
  let pending: Buffer[] | null = null;
  let start = pos;
  while (pos < data.length) {
    const left = BLOCK_SIZE - (pos % BLOCK_SIZE);
    if (left < CHUNK_HEADER) {
      pos += left;
      continue;
    }
    if (pos + CHUNK_HEADER > data.length)
      return { records, fault: { offset: pos, reason: "the file ends inside a chunk's header (truncated)" } };
    const length = data.readUInt16LE(pos + 4);
    const type = data[pos + 6];
    if (type === 0 && length === 0 && data.readUInt32LE(pos) === 0) break; // a preallocated, zeroed tail
    if (CHUNK_HEADER + length > left)
      return { records, fault: { offset: pos, reason: "a chunk runs past its 32 KiB block (corrupt)" } };
    if (pos + CHUNK_HEADER + length > data.length)
      return { records, fault: { offset: pos, reason: "the file ends inside a record (truncated)" } };
    if (crc32(data.subarray(pos + 6, pos + CHUNK_HEADER + length)) !== data.readUInt32LE(pos))
      return { records, fault: { offset: pos, reason: "a chunk's CRC does not match (corrupt)" } };
    const body = data.subarray(pos + CHUNK_HEADER, pos + CHUNK_HEADER + length);
    if (pending === null) start = pos;
    pos += CHUNK_HEADER + length;
    if (type === FULL && pending === null) records.push(body);
    else if (type === FIRST && pending === null) pending = [body];
    else if (type === MIDDLE && pending !== null) pending.push(body);
    else if (type === LAST && pending !== null) {
      records.push(Buffer.concat([...pending, body]));
      pending = null;
    } else return { records, fault: { offset: start, reason: `a chunk of type ${type} where none fits (corrupt)` } };
  }
  if (pending !== null)
    return { records, fault: { offset: start, reason: "the file ends inside a record (truncated)" } };
  return { records };
}

/** Frame encoded records as a `.wandb` transaction log (header, 32 KiB blocks, CRC-framed chunks). */
export function frameTransactionLog(records: readonly Uint8Array[]): Buffer {
  const framer = new TransactionLogFramer();
  return Buffer.concat([framer.header(), framer.frame(records)]);
}

/**
 * A value as W&B's JSON: numbers as `historyNumber` writes them (NaN/±Infinity as bare tokens),
 * bigints exactly (`jsonText`: an integer literal within int64, else a string of its digits).
 */
export function wandbValueJson(value: unknown): string {
  return jsonText(value, "token");
}

/** What an offline run holds. */
interface OfflineRun {
  readonly runId: string;
  readonly entity: string | null;
  readonly project: string;
  readonly displayName: string;
  readonly groupName: string | null;
  readonly jobType: string | null;
  readonly notes: string | null;
  readonly tags: readonly string[] | null;
  /** The run config, plain (not W&B's `{value}` wrapping). */
  readonly config: Readonly<Record<string, unknown>>;
  /** History lines as W&B JSON text (`{"_step":…}`), in order. */
  readonly history: readonly string[];
  /** The summary line, if any. */
  readonly summary: string | undefined;
  /** The exit code, when the run finished. */
  readonly exitcode: number | undefined;
  /** Run files (relative paths, `/`-separated) to upload with the run, and the directory holding them. */
  readonly files?: { readonly dir: string; readonly names: readonly string[] };
}

function items(object: Readonly<Record<string, unknown>>): { key: string; value_json: string }[] {
  return Object.entries(object).map(([key, value]) => ({ key, value_json: wandbValueJson(value) }));
}

/** What an offline run's log starts with: the run, its config, when it started. */
export type OfflineRunHead = Omit<OfflineRun, "history" | "summary" | "exitcode" | "files">;

/** One `Record` of the log (a plain object of `wandb_internal.Record`'s fields), encoded with its number. */
export function encodeRecord(num: number, record: Record<string, unknown>): Uint8Array {
  return WandbRecord.encode(WandbRecord.fromObject({ num, ...record })).finish();
}

/** The records a log starts with, as the SDK writes them: header, run, config. */
export function headRecords(run: OfflineRunHead, producer: string, startSeconds: number): Record<string, unknown>[] {
  const config = items(run.config);
  return [
    { header: { version_info: { producer } } },
    {
      run: {
        run_id: run.runId,
        entity: run.entity ?? "",
        project: run.project,
        config: { update: config },
        run_group: run.groupName ?? "",
        job_type: run.jobType ?? "",
        display_name: run.displayName,
        notes: run.notes ?? "",
        tags: [...(run.tags ?? [])],
        start_time: { seconds: Math.floor(startSeconds), nanos: Math.round((startSeconds % 1) * 1e9) },
      },
    },
    { config: { update: config } },
  ];
}

/** A history record of one history line (every key an item, `_step` also as the step number). */
export function historyRecord(row: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const step = row["_step"];
  return { history: { item: items(row), ...(typeof step === "number" ? { step: { num: step } } : {}) } };
}

/**
 * A summary record of the latest value of every key of `rows` (later rows win), as the SDK's
 * wandb-core writes one with each history row: `wandb sync` builds the run's summary from these,
 * so a log cut short by SIGKILL still gives the run its summary.
 */
export function summaryRecord(rows: readonly Readonly<Record<string, unknown>>[]): Record<string, unknown> {
  const latest = new Map<string, unknown>();
  for (const row of rows) for (const [key, value] of Object.entries(row)) latest.set(key, value);
  return { summary: { update: [...latest].map(([key, value]) => ({ key, value_json: wandbValueJson(value) })) } };
}

/** A `files` record: run files to upload with the run (tables are media). */
export function filesRecord(names: readonly string[]): Record<string, unknown> {
  return { files: { files: names.map((path) => ({ path, policy: 0, type: path.startsWith("media/") ? 2 : 0 })) } };
}

/** The records a finished run's log ends with: its summary, its exit (code and runtime), final. */
export function endRecords(
  summary: string | undefined,
  exitcode: number | undefined,
  runtimeSeconds: number,
): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  if (summary !== undefined) out.push({ summary: { update: items(parseHistoryObject(summary)) } });
  if (exitcode !== undefined)
    out.push({
      exit: { exit_code: exitcode, runtime: Math.round(Number.isFinite(runtimeSeconds) ? runtimeSeconds : 0) },
    });
  out.push({ final: {} });
  return out;
}

/** rankscope's note in an offline run directory: which attempt of the spool it holds (its first history offset). */
export const ATTEMPT_FILE = "rankscope-attempt.json";

/** The attempt an offline run directory holds (its first history offset), from rankscope's note. */
export function attemptOf(dir: string): number | undefined {
  try {
    const note: unknown = JSON.parse(readFileSync(join(dir, ATTEMPT_FILE), "utf8"));
    const value = isRecord(note) ? note["firstOffset"] : undefined;
    return typeof value === "number" ? value : undefined;
  } catch {
    return undefined;
  }
}

/** `offline-run-YYYYMMDD_HHMMSS-{runId}`, the time in UTC. */
function offlineRunDirName(runId: string, startMs: number): string {
  const d = new Date(startMs);
  const pad = (n: number): string => String(n).padStart(2, "0");
  return `offline-run-${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}_${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}-${runId}`;
}

/**
 * Create the offline run directory of one attempt (`offline-run-{time of its first row}-{runId}`)
 * with rankscope's note of the attempt; a directory of the same second holding another attempt is
 * kept, this one takes the next second. Returns its path.
 */
export function makeAttemptDir(wandbDir: string, runId: string, startMs: number, attempt: number): string {
  let dir = join(wandbDir, offlineRunDirName(runId, startMs));
  for (let k = 1; existsSync(dir) && attemptOf(dir) !== attempt; k++)
    dir = join(wandbDir, offlineRunDirName(runId, startMs + k * 1000));
  writeFileAtomicSync(join(dir, ATTEMPT_FILE), `${JSON.stringify({ firstOffset: attempt })}\n`);
  return dir;
}

/**
 * The offline run directories of `runId` under `wandbDir`, one per attempt, in attempt order (the
 * order `wandb sync` must replay them in). Directories without rankscope's note come first, by name.
 */
export function offlineRunDirs(wandbDir: string, runId: string): string[] {
  if (!existsSync(wandbDir)) return [];
  const suffix = `-${runId}`;
  return readdirSync(wandbDir)
    .filter(
      (name) =>
        name.startsWith("offline-run-") && name.endsWith(suffix) && name.length === offlineRunDirName(runId, 0).length,
    )
    .map((name) => ({ dir: join(wandbDir, name), attempt: attemptOf(join(wandbDir, name)) ?? -1, name }))
    .sort((a, b) => a.attempt - b.attempt || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((d) => d.dir);
}

/** The run an offline run describes, from the spool's `run.json` (W&B's `{"key": {"value": v}}` config unwrapped). */
export function offlineRunHeadOf(info: SpoolRunInfo): OfflineRunHead {
  const config: Record<string, unknown> = {};
  for (const [key, entry] of Object.entries(parseHistoryObject(info.upsert.config)))
    config[key] = isRecord(entry) ? entry["value"] : undefined;
  return {
    runId: info.upsert.name,
    entity: info.upsert.entity,
    project: info.upsert.project,
    displayName: info.upsert.displayName,
    groupName: info.upsert.groupName,
    jobType: info.upsert.jobType,
    notes: info.upsert.notes,
    tags: info.upsert.tags,
    config,
  };
}
