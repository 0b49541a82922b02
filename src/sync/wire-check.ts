/**
 * The server's check of a batch's header (`wire.ts` says the format): every field of the JSON
 * checked for its type, its range and the caps of `WIRE_LIMITS`, and each series' columns checked
 * against its header. What is wrong is a `WireError` saying where.
 */
import { isRecord } from "../core/json.js";
import { MAX_ALERT_JSON, parseAlertEvent } from "../core/alert-json.js";
import type { LostRank } from "../store/read-types.js";
import { parseStragglerReport } from "../store/rank-timing.js";
import { pathSegmentProblem } from "../run/run-dir.js";
import { describeError } from "../core/diagnostics.js";
import { STRING_LIMITS, stringProblem } from "../core/string-limits.js";
import {
  WIRE_LIMITS,
  WIRE_VERSION,
  WireError,
  type AlertHeader,
  type BatchHeader,
  type FileSegment,
  type RecordHeader,
  type RefusedPart,
  type RunMeta,
  type SegmentHeader,
  type TimingHeader,
} from "./wire-types.js";

/** Throw a `WireError` saying what is wrong. */
export function fail(message: string): never {
  throw new WireError(message);
}

/** A string past `STRING_LIMITS`: only the part holding it is left out where the batch allows. */
class StringError extends WireError {}

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

/**
 * A checked header, the parts left out of it (a string past the limits) and every segment in the
 * body's order: its header, or — left out — its point count, so its columns are skipped.
 */
export interface CheckedHeader {
  readonly header: BatchHeader;
  readonly refused: RefusedPart[];
  readonly segments: Array<SegmentHeader | number>;
}

/** The header of a batch, parsed from its JSON, checked field by field against the format and its caps. */
export function checkHeader(parsed: unknown): CheckedHeader {
  const h = rec(parsed, "the header");
  if (h["v"] !== WIRE_VERSION)
    fail(`the header's v must be ${WIRE_VERSION} (this server's format), got ${JSON.stringify(h["v"])}`);
  const run = checkRunId(nonEmpty(h["run"], "run"));
  const refused: RefusedPart[] = [];
  // A segment or record holding a string past the limits is left out (named in `refused`); a
  // left-out segment's columns are skipped.
  const segments = list(h["series"], "series", WIRE_LIMITS.segments).map((v, i) =>
    orRefused(
      refused,
      `series[${i}]`,
      (): SegmentHeader | number => segment(v, i),
      int(rec(v, `series[${i}]`)["n"], `series[${i}].n`, 1, WIRE_LIMITS.points),
    ),
  );
  const series = segments.filter((s): s is SegmentHeader => typeof s !== "number");
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
  return { header, refused, segments };
}

/** Steps and walls finite; a scalar segment's steps strictly increasing, past `after`, ending at `cursor`. */
export function checkSegment(s: SegmentHeader, steps: Float64Array, walls: Float64Array): void {
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
