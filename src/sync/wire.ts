/**
 * The ingest batch: what a job's sync (and `rankscope sync`) sends the team server, and the
 * server's check of it. Both sides use this file, so the contract is written once.
 *
 * A batch is `RSB1`, a little-endian u32 header length, the header (UTF-8 JSON), zero padding to a
 * multiple of 8, then the points of every series segment as float64 columns (each segment's steps,
 * walls, values, in header order), then the bytes of every file segment. It travels gzipped
 * (`Content-Encoding: gzip`). Numbers as float64 columns, not JSON text: parsing a million JSON
 * numbers a second would cost the server more CPU than storing them.
 *
 * Idempotency rides on positions, not on batch ids: each segment says from which cursor it
 * continues (`after`) and where it ends (`cursor`), in the job's store's own positions (a step for
 * scalars, an arrival number for streams and system metrics); records and alert events carry the
 * store's sequence numbers; file segments their byte offset. The server applies what lies past its own cursor, in
 * one transaction per batch, so a batch re-sent after a timeout, a restart or a crash changes
 * nothing the second time.
 */
import { createHash } from "node:crypto";
import { isRecord } from "../core/json.js";
import { MAX_ALERT_JSON, parseAlertEvent } from "../core/alert-json.js";
import type { LostRank } from "../store/read-types.js";
import { parseStragglerReport } from "../store/rank-timing.js";
import { pathSegmentProblem } from "../run/run-dir.js";
import { describeError } from "../core/diagnostics.js";
import { STRING_LIMITS, stringProblem } from "../core/string-limits.js";

/** Format version; the header's `v`. */
export const WIRE_VERSION = 1;
const MAGIC = 0x31425352; // "RSB1" little-endian

/** Caps a batch must respect (the server refuses more with a 413 or 400). */
export const WIRE_LIMITS = {
  /** Series segments per batch. */
  segments: 20_000,
  /** Points per batch, all segments together. */
  points: 2_000_000,
  records: 20_000,
  /** Alert events per batch. */
  alerts: 20_000,
  /** Flushes of per-rank timings per batch (one window), and the ranks it names. */
  timingFlushes: 2_000,
  timingRanks: 100_000,
  /** Characters of one flush's straggler report (JSON). */
  reportChars: 1_000_000,
  /** Characters of one record's JSON. */
  recordChars: 1_000_000,
  files: 1_000,
  /** Characters of a key, a tag, a group, a rank name (`STRING_LIMITS`, the same everywhere). */
  name: STRING_LIMITS.name,
  /** Header JSON bytes. */
  header: 64 * 1024 * 1024,
} as const;

/** A series kind as stored. */
export type WireSeriesKind = "scalar" | "stream" | "system";
/** A record kind as stored. */
type WireRecordKind = "sample" | "histogram";

/** Points of one series past `after`, up to `cursor` (positions of the job's store). */
export interface SegmentHeader {
  readonly kind: WireSeriesKind;
  readonly key: string;
  readonly reduce: string | null;
  readonly rank: number;
  /** The cursor this segment continues from (null: the series' start). */
  readonly after: number | null;
  /** The position of its last point. */
  readonly cursor: number;
  /** Points in the segment (its columns are `n` steps, `n` walls, `n` values). */
  readonly n: number;
  /**
   * Scalars only: the points replace what the server holds from the first step to the last (a
   * step the store wrote again after it was sent: two writers of one line, a late answer). Such a
   * segment never moves the cursor.
   */
  readonly replace?: boolean;
}

/** One sample or histogram entry, by the store's sequence number. */
export interface RecordHeader {
  readonly kind: WireRecordKind;
  readonly key: string;
  readonly rank: number;
  readonly seq: number;
  readonly step: number;
  readonly wall: number;
  /** The stored JSON (sample records, or the histogram). */
  readonly data: string;
}

/** One alert event (docs/alerts.md), by the store's sequence number among the run's events. */
export interface AlertHeader {
  readonly seq: number;
  /** The event as the store keeps it (JSON); the server checks it is one (`parseAlertEvent`). */
  readonly event: string;
}

/**
 * Per-rank timings of consecutive flushes (the store's `rank_timing`, docs/stragglers.md): the ranks
 * that appear in them as `[rank, rankName, host]`, and three ranks × flushes matrices, row-major
 * (`value[row * steps.length + column]`), ms, null where a rank has no figure.
 */
export interface TimingHeader {
  readonly ranks: Array<readonly [number, string, string]>;
  /** The flushes' steps, increasing. */
  readonly steps: number[];
  readonly walls: number[];
  /** Each flush's straggler report (JSON, as the store keeps it). */
  readonly reports: string[];
  readonly stepMs: Array<number | null>;
  readonly latenessMs: Array<number | null>;
  readonly waitMs: Array<number | null>;
}

/** Bytes of a run file (a text log, a trace) from `offset`; its bytes follow the columns. */
export interface FileSegment {
  /** Relative to the run directory: `logs/main.log`, `traces/rank-0.jsonl`. */
  readonly path: string;
  readonly offset: number;
  readonly length: number;
}

/** What the dashboard shows of a run besides its series. */
export interface RunMeta {
  readonly experiment: string;
  readonly trial: string;
  readonly status: string;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  readonly updatedAt: number | null;
  readonly resumeStep: number;
  readonly tags: string[];
  readonly group: string | null;
  /** The run config and hyperparameters, flattened (`a.b.c`), secrets redacted: what `/api/runs` filters on. */
  readonly params: Record<string, string | number | boolean | null>;
  /** The logged hyperparameters as the store keeps them (JSON text). */
  readonly hparamsJson: string;
  readonly rankNames: Record<string, string>;
  /** Ranks the run lost (the store's `lost_ranks`, and writers a reader saw die): the dashboard marks them. */
  readonly lostRanks: readonly LostRank[];
  readonly configYaml: string | null;
  readonly versionJson: string | null;
}

/** The JSON part of a batch. */
export interface BatchHeader {
  readonly v: number;
  /** `experiment/trial`: the run's id in its project. */
  readonly run: string;
  readonly meta?: RunMeta;
  readonly series: SegmentHeader[];
  readonly records: RecordHeader[];
  /** Alert events past the server's `alert` cursor (absent: none; a sync from before alerts sends none). */
  readonly alerts?: AlertHeader[];
  /** Per-rank timings of the flushes past the server's `timing` cursor (absent: none). */
  readonly timings?: TimingHeader;
  readonly files: FileSegment[];
}

/** A part of a batch the server left out (a string past `STRING_LIMITS`), and why; the rest lands. */
export interface RefusedPart {
  /** Where it was: `series[3] (scalar "loss…", rank 0)`, `meta.tags[1]`. */
  readonly part: string;
  readonly reason: string;
}

/** A decoded batch: the header, each segment's columns, each file segment's bytes. */
export interface Batch {
  readonly header: BatchHeader;
  readonly columns: { steps: Float64Array; walls: Float64Array; values: Float64Array }[];
  readonly fileBytes: Buffer[];
  /** Decoded only: the parts left out (absent or empty: none). */
  readonly refused?: readonly RefusedPart[];
}

/** A digest of a run's metadata: the server keeps the last one applied, so a sync resends it only when it changed. */
export function metaHash(meta: RunMeta): string {
  return createHash("sha256").update(JSON.stringify(meta)).digest("base64url");
}

/** What was wrong with a batch; the server answers 400 with the message. */
export class WireError extends Error {}

/** A string past `STRING_LIMITS`: only the part holding it is left out where the batch allows. */
class StringError extends WireError {}

/** Encode a batch (not yet compressed). */
export function encodeBatch(batch: Batch): Buffer {
  const header = Buffer.from(JSON.stringify(batch.header), "utf8");
  const headEnd = 8 + header.length;
  const pad = (8 - (headEnd % 8)) % 8;
  const floats = batch.columns.reduce((n, c) => n + c.steps.length * 3, 0);
  const bytes = batch.fileBytes.reduce((n, b) => n + b.length, 0);
  const out = Buffer.alloc(headEnd + pad + floats * 8 + bytes);
  out.writeUInt32LE(MAGIC, 0);
  out.writeUInt32LE(header.length, 4);
  header.copy(out, 8);
  let o = headEnd + pad;
  for (const c of batch.columns) {
    for (const a of [c.steps, c.walls, c.values]) {
      Buffer.from(a.buffer, a.byteOffset, a.byteLength).copy(out, o);
      o += a.byteLength;
    }
  }
  for (const b of batch.fileBytes) {
    b.copy(out, o);
    o += b.length;
  }
  return out;
}

function fail(message: string): never {
  throw new WireError(message);
}

function str(v: unknown, what: string, max: number = WIRE_LIMITS.name): string {
  if (typeof v !== "string") fail(`${what} must be a string`);
  // PostgreSQL text holds neither NUL nor half a surrogate pair: refused here, with a reason.
  const problem = stringProblem(v, max);
  if (problem !== undefined) throw new StringError(`${what} ${problem}`);
  return v;
}

/** `decode(v)`, or — for a string past the limits — `fallback`, the part named in `refused`. */
function orRefused<T>(refused: RefusedPart[], part: string, decode: () => T, fallback: T): T {
  try {
    return decode();
  } catch (error) {
    if (!(error instanceof StringError)) throw error;
    refused.push({ part, reason: error.message });
    return fallback;
  }
}

function nonEmpty(v: unknown, what: string): string {
  const s = str(v, what);
  if (s === "") fail(`${what} must not be empty`);
  return s;
}

function num(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isFinite(v)) fail(`${what} must be a finite number`);
  return v;
}

function int(v: unknown, what: string, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
    fail(`${what} must be an integer from ${min} to ${max}`);
  return v;
}

function nullableNum(v: unknown, what: string): number | null {
  return v === null ? null : num(v, what);
}

function nullableStr(v: unknown, what: string, max?: number): string | null {
  return v === null ? null : str(v, what, max);
}

/** A lost rank as `LostRank` (rankscope/store) describes it. */
function lostRank(v: unknown, what: string): LostRank {
  const l = rec(v, what);
  return {
    rank: int(l["rank"], `${what}.rank`, RANK_MIN, RANK_MAX),
    rankName: str(l["rankName"], `${what}.rankName`),
    step: l["step"] === null ? null : int(l["step"], `${what}.step`, 0, Number.MAX_SAFE_INTEGER),
    wall: num(l["wall"], `${what}.wall`),
    reason: str(l["reason"], `${what}.reason`, 10_000),
    backStep: l["backStep"] === null ? null : int(l["backStep"], `${what}.backStep`, 0, Number.MAX_SAFE_INTEGER),
  };
}

function list(v: unknown, what: string, max: number): unknown[] {
  if (!Array.isArray(v)) fail(`${what} must be an array`);
  if (v.length > max) fail(`${what} holds ${v.length} entries, at most ${max} per batch`);
  return v;
}

function rec(v: unknown, what: string): Record<string, unknown> {
  if (!isRecord(v)) fail(`${what} must be an object`);
  return v;
}

/** A run id: `experiment/trial`, each part a folder name as the store allows (`café`, `lr=3e-4`). */
export function checkRunId(run: string): string {
  const parts = run.split("/");
  if (parts.length < 1 || parts.length > 3 || parts.some((p) => pathSegmentProblem(p) !== null)) {
    fail(
      `run must be experiment/trial: one to three folder names joined by '/' (no '\\', NUL, control characters, '.' or '..'), got ${JSON.stringify(run.slice(0, 200))}`,
    );
  }
  return run;
}

/**
 * A series' line as the store numbers it, carried as an opaque integer: -1 the global line, r >= 0
 * rank r, and the store's other lines below -1 (the controller's own, user workers'). PostgreSQL
 * `integer` holds it.
 */
const RANK_MIN = -2_147_483_648;
const RANK_MAX = 2_147_483_647;
const SERIES_KIND = new Set(["scalar", "stream", "system"]);

function segment(v: unknown, i: number): SegmentHeader {
  const s = rec(v, `series[${i}]`);
  const kind = str(s["kind"], `series[${i}].kind`);
  if (kind !== "scalar" && kind !== "stream" && kind !== "system")
    fail(`series[${i}].kind must be one of ${[...SERIES_KIND].join(", ")}`);
  return {
    kind,
    key: nonEmpty(s["key"], `series[${i}].key`),
    reduce: nullableStr(s["reduce"], `series[${i}].reduce`),
    rank: int(s["rank"], `series[${i}].rank`, RANK_MIN, RANK_MAX),
    after: nullableNum(s["after"], `series[${i}].after`),
    cursor: num(s["cursor"], `series[${i}].cursor`),
    n: int(s["n"], `series[${i}].n`, 1, WIRE_LIMITS.points),
    ...(s["replace"] === true ? { replace: true } : {}),
  };
}

function record(v: unknown, i: number): RecordHeader {
  const r = rec(v, `records[${i}]`);
  const kind = str(r["kind"], `records[${i}].kind`);
  if (kind !== "sample" && kind !== "histogram") fail(`records[${i}].kind must be sample or histogram`);
  return {
    kind,
    key: nonEmpty(r["key"], `records[${i}].key`),
    rank: int(r["rank"], `records[${i}].rank`, RANK_MIN, RANK_MAX),
    seq: int(r["seq"], `records[${i}].seq`, 0, Number.MAX_SAFE_INTEGER),
    step: num(r["step"], `records[${i}].step`),
    wall: num(r["wall"], `records[${i}].wall`),
    data: str(r["data"], `records[${i}].data`, WIRE_LIMITS.recordChars),
  };
}

function alertHeader(v: unknown, i: number): AlertHeader {
  const a = rec(v, `alerts[${i}]`);
  const seq = int(a["seq"], `alerts[${i}].seq`, 1, Number.MAX_SAFE_INTEGER);
  const event = str(a["event"], `alerts[${i}].event`, MAX_ALERT_JSON);
  const checked = parseAlertEvent(event);
  if (typeof checked === "string") fail(`alerts[${i}].event: ${checked}`);
  // The id and rule become columns of their own (the rest stays in the JSON text, escaped).
  str(checked.id, `alerts[${i}].event's id`);
  str(checked.rule, `alerts[${i}].event's rule`);
  return { seq, event };
}

/** A timing matrix: ranks × flushes numbers or nulls. */
function timingMatrix(v: unknown, what: string, cells: number): Array<number | null> {
  const values = list(v, what, cells);
  if (values.length !== cells) fail(`${what} holds ${values.length} values; ranks × flushes is ${cells}`);
  return values.map((x, i) => nullableNum(x, `${what}[${i}]`));
}

function timingHeader(v: unknown): TimingHeader {
  const t = rec(v, "timings");
  const ranks = list(t["ranks"], "timings.ranks", WIRE_LIMITS.timingRanks).map(
    (entry, i): readonly [number, string, string] => {
      const what = `timings.ranks[${i}]`;
      const fields = list(entry, what, 3);
      if (fields.length !== 3) fail(`${what} must be [rank, rankName, host]`);
      return [
        int(fields[0], `${what}'s rank`, RANK_MIN, RANK_MAX),
        nonEmpty(fields[1], `${what}'s rankName`),
        str(fields[2], `${what}'s host`),
      ];
    },
  );
  if (new Set(ranks.map((r) => r[1])).size !== ranks.length) fail("timings.ranks names a rank twice");
  const steps = list(t["steps"], "timings.steps", WIRE_LIMITS.timingFlushes).map((x, i) =>
    num(x, `timings.steps[${i}]`),
  );
  for (let i = 1; i < steps.length; i++)
    if ((steps[i] ?? NaN) <= (steps[i - 1] ?? NaN)) fail("timings.steps must increase strictly");
  const walls = list(t["walls"], "timings.walls", steps.length).map((x, i) => num(x, `timings.walls[${i}]`));
  const reports = list(t["reports"], "timings.reports", steps.length).map((x, i) => {
    const report = str(x, `timings.reports[${i}]`, WIRE_LIMITS.reportChars);
    try {
      parseStragglerReport(report);
    } catch (error) {
      fail(`timings.reports[${i}] is not a straggler report (${describeError(error)})`);
    }
    return report;
  });
  if (walls.length !== steps.length || reports.length !== steps.length)
    fail("timings.walls and timings.reports must hold one entry per step");
  const cells = ranks.length * steps.length;
  if (cells > WIRE_LIMITS.points) fail(`timings hold ${cells} values, at most ${WIRE_LIMITS.points}`);
  return {
    ranks,
    steps,
    walls,
    reports,
    stepMs: timingMatrix(t["stepMs"], "timings.stepMs", cells),
    latenessMs: timingMatrix(t["latenessMs"], "timings.latenessMs", cells),
    waitMs: timingMatrix(t["waitMs"], "timings.waitMs", cells),
  };
}

function fileSegment(v: unknown, i: number): FileSegment {
  const f = rec(v, `files[${i}]`);
  const path = nonEmpty(f["path"], `files[${i}].path`);
  const parts = path.split("/");
  if (
    parts.length !== 2 ||
    !["logs", "traces", "sessions"].includes(parts[0] ?? "") ||
    pathSegmentProblem(parts[1] ?? "") !== null
  ) {
    fail(`files[${i}].path must be logs/NAME, traces/NAME or sessions/NAME`);
  }
  return {
    path,
    offset: int(f["offset"], `files[${i}].offset`, 0, Number.MAX_SAFE_INTEGER),
    length: int(f["length"], `files[${i}].length`, 1, 64 * 1024 * 1024),
  };
}

function scalarParams(v: unknown, refused: RefusedPart[]): Record<string, string | number | boolean | null> {
  const p = rec(v, "meta.params");
  const out: Record<string, string | number | boolean | null> = {};
  const entries = Object.entries(p);
  if (entries.length > 1000) fail("meta.params holds more than 1000 parameters");
  for (const [k, value] of entries) {
    const what = `meta.params[${JSON.stringify(k.slice(0, 40))}]`;
    if (!orRefused(refused, what, () => str(k, "a meta.params name"), null)) continue;
    if (value === null || typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value)))
      out[k] = value;
    else {
      const text = orRefused(refused, what, () => str(value, what, STRING_LIMITS.paramValue), null);
      if (text !== null) out[k] = text;
    }
  }
  return out;
}

function meta(v: unknown, refused: RefusedPart[]): RunMeta {
  const m = rec(v, "meta");
  const tags = list(m["tags"], "meta.tags", 1000).flatMap((t, i) =>
    orRefused(refused, `meta.tags[${i}]`, () => [str(t, `meta.tags[${i}]`)], []),
  );
  const names = rec(m["rankNames"], "meta.rankNames");
  const rankNames: Record<string, string> = {};
  for (const [k, name] of Object.entries(names).slice(0, 100_000)) {
    int(Number(k), "a meta.rankNames rank", RANK_MIN, RANK_MAX);
    const checked = orRefused(refused, `meta.rankNames[${k}]`, () => str(name, "a meta.rankNames name"), null);
    if (checked !== null) rankNames[k] = checked;
  }
  return {
    experiment: str(m["experiment"], "meta.experiment"),
    trial: str(m["trial"], "meta.trial"),
    status: str(m["status"], "meta.status", 20),
    startedAt: nullableNum(m["startedAt"], "meta.startedAt"),
    endedAt: nullableNum(m["endedAt"], "meta.endedAt"),
    updatedAt: nullableNum(m["updatedAt"], "meta.updatedAt"),
    resumeStep: num(m["resumeStep"], "meta.resumeStep"),
    tags,
    group: orRefused(refused, "meta.group", () => nullableStr(m["group"], "meta.group"), null),
    params: scalarParams(m["params"], refused),
    hparamsJson: str(m["hparamsJson"], "meta.hparamsJson", 10_000_000),
    rankNames,
    lostRanks:
      m["lostRanks"] === undefined
        ? []
        : list(m["lostRanks"], "meta.lostRanks", 100_000).map((l, i) => lostRank(l, `meta.lostRanks[${i}]`)),
    configYaml: nullableStr(m["configYaml"], "meta.configYaml", 10_000_000),
    versionJson: nullableStr(m["versionJson"], "meta.versionJson", 1_000_000),
  };
}

/** Decode and check a batch (already decompressed); a `WireError` saying what is wrong. */
export function decodeBatch(body: Buffer): Batch {
  if (body.length < 8 || body.readUInt32LE(0) !== MAGIC)
    fail("not a rankscope ingest batch (it does not start with RSB1)");
  const headerLength = body.readUInt32LE(4);
  if (headerLength > WIRE_LIMITS.header || 8 + headerLength > body.length)
    fail(`the header length ${headerLength} runs past the body (${body.length} bytes)`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8", 8, 8 + headerLength));
  } catch {
    fail("the header is not JSON");
  }
  const h = rec(parsed, "the header");
  if (h["v"] !== WIRE_VERSION)
    fail(`the header's v must be ${WIRE_VERSION} (this server's format), got ${JSON.stringify(h["v"])}`);
  const run = checkRunId(nonEmpty(h["run"], "run"));
  const refused: RefusedPart[] = [];
  // A segment or record holding a string past the limits is left out (named in `refused`); a
  // left-out segment's columns are skipped.
  const all = list(h["series"], "series", WIRE_LIMITS.segments).map((v, i) =>
    orRefused(
      refused,
      `series[${i}]`,
      (): SegmentHeader | number => segment(v, i),
      int(rec(v, `series[${i}]`)["n"], `series[${i}].n`, 1, WIRE_LIMITS.points),
    ),
  );
  const series = all.filter((s): s is SegmentHeader => typeof s !== "number");
  const records = list(h["records"], "records", WIRE_LIMITS.records).flatMap((v, i) =>
    orRefused(refused, `records[${i}]`, () => [record(v, i)], []),
  );
  const files = list(h["files"], "files", WIRE_LIMITS.files).map(fileSegment);
  const alerts =
    h["alerts"] === undefined ? undefined : list(h["alerts"], "alerts", WIRE_LIMITS.alerts).map(alertHeader);
  const timings = h["timings"] === undefined ? undefined : timingHeader(h["timings"]);
  const header: BatchHeader = {
    v: WIRE_VERSION,
    run,
    series,
    records,
    files,
    ...(alerts === undefined ? {} : { alerts }),
    ...(timings === undefined ? {} : { timings }),
    ...(h["meta"] !== undefined ? { meta: meta(h["meta"], refused) } : {}),
  };
  const points = all.reduce((n: number, s) => n + (typeof s === "number" ? s : s.n), 0);
  if (points > WIRE_LIMITS.points) fail(`the batch holds ${points} points, at most ${WIRE_LIMITS.points}`);
  const headEnd = 8 + headerLength;
  let o = headEnd + ((8 - (headEnd % 8)) % 8);
  const fileTotal = files.reduce((n, f) => n + f.length, 0);
  const expected = o + points * 24 + fileTotal;
  if (body.length !== expected)
    fail(
      `the body is ${body.length} bytes; its header announces ${expected} (${points} points, ${fileTotal} file bytes)`,
    );
  // One aligned copy of the columns; segments are views into it.
  const floats = new Float64Array(points * 3);
  new Uint8Array(floats.buffer).set(body.subarray(o, o + points * 24));
  const columns: Batch["columns"] = [];
  let f = 0;
  for (const s of all) {
    if (typeof s === "number") {
      f += 3 * s;
      continue;
    }
    const steps = floats.subarray(f, f + s.n);
    const walls = floats.subarray(f + s.n, f + 2 * s.n);
    const values = floats.subarray(f + 2 * s.n, f + 3 * s.n);
    f += 3 * s.n;
    checkSegment(s, steps, walls);
    columns.push({ steps, walls, values });
  }
  o += points * 24;
  const fileBytes: Buffer[] = [];
  for (const file of files) {
    fileBytes.push(body.subarray(o, o + file.length));
    o += file.length;
  }
  return { header, columns, fileBytes, refused };
}

/** Steps and walls finite; a scalar segment's steps strictly increasing, past `after`, ending at `cursor`. */
function checkSegment(s: SegmentHeader, steps: Float64Array, walls: Float64Array): void {
  const what = `series ${JSON.stringify(s.key.slice(0, 80))} (${s.kind}, rank ${s.rank})`;
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i] ?? NaN;
    if (!Number.isFinite(step) || !Number.isFinite(walls[i] ?? NaN))
      fail(`${what}: point ${i} has a step or wall time that is not a finite number`);
    if (s.kind === "scalar" && i > 0 && step <= (steps[i - 1] ?? NaN))
      fail(`${what}: steps must increase strictly within a segment`);
  }
  if (s.replace === true && s.kind !== "scalar") fail(`${what}: only scalar segments can replace points`);
  if (s.kind === "scalar") {
    if (s.after !== null && (steps[0] ?? NaN) <= s.after)
      fail(`${what}: the first step must lie after the segment's after (${s.after})`);
    if (steps[steps.length - 1] !== s.cursor) fail(`${what}: cursor must be the last step`);
  } else if (s.after !== null && s.cursor <= s.after) fail(`${what}: cursor must lie after after`);
}
