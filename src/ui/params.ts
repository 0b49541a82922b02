/**
 * The API's query parameters, checked: each bad value is a 400 saying what was wrong and what is
 * valid. The caps on what one request may ask live here.
 */
import { CONTROLLER_LINE } from "../core/rank-identity.js";
import { stringProblem } from "../core/string-limits.js";
import { HttpError } from "./security.js";

/** Points per line per request at most; the store downsamples beyond it. */
const MAX_POINTS_CAP = 2_000;
const DEFAULT_MAX_POINTS = 2_000;

/** Lines of one `/api/lines` request at most. */
export const MAX_BATCH_LINES = 200;

/**
 * Points one `/api/lines` request may ask for in all (lines × maxPoints): 100 lines at 2,000
 * points or 200 at 1,000, about 5 MB of JSON before compression (~1 MB gzipped). Lines are read
 * one at a time with other requests answered in between (see routes), so a request at the caps
 * holds the event loop no longer than one line's read (BENCHMARKS.md).
 */
export const MAX_BATCH_POINTS = 200_000;

/** Characters of one query parameter (its name or its value) at most. */
export const MAX_PARAM_CHARS = 100_000;

/**
 * Every parameter's name and value is text a database can hold: no NUL, no lone surrogate, at
 * most `MAX_PARAM_CHARS` (PostgreSQL refuses a NUL with an error, which must not become a 500).
 */
export function checkParamText(params: URLSearchParams): void {
  for (const [name, value] of params) {
    const problem = stringProblem(name, 200) ?? stringProblem(value, MAX_PARAM_CHARS);
    if (problem !== undefined)
      throw new HttpError(400, `the parameter ${JSON.stringify(name.slice(0, 40))} ${problem}`);
  }
}

/** Each string inside a JSON parameter, checked as `checkParamText` checks a parameter. */
function checkJsonText(value: unknown, name: string): void {
  if (typeof value === "string") {
    const problem = stringProblem(value, MAX_PARAM_CHARS);
    if (problem !== undefined) throw new HttpError(400, `a string in the parameter ${name} ${problem}`);
  } else if (Array.isArray(value)) for (const v of value) checkJsonText(v, name);
}

/** An integer parameter in [min, max], or undefined when absent. */
export function intParam(params: URLSearchParams, name: string, min: number, max: number): number | undefined {
  const raw = params.get(name);
  if (raw === null || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new HttpError(400, `${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return n;
}

/** A parameter that must be there. */
export function requiredParam(params: URLSearchParams, name: string): string {
  const value = params.get(name);
  if (value === null || value === "") throw new HttpError(400, `missing the ${name} parameter`);
  return value;
}

/** `maxPoints`: 3 to `MAX_POINTS_CAP`, default `DEFAULT_MAX_POINTS`. */
export function maxPointsParam(params: URLSearchParams): number {
  return intParam(params, "maxPoints", 3, MAX_POINTS_CAP) ?? DEFAULT_MAX_POINTS;
}

/** A boolean flag: `1`/`true` on, absent/`0`/`false` off. */
export function flagParam(params: URLSearchParams, name: string): boolean {
  const raw = params.get(name);
  if (raw === null || raw === "" || raw === "0" || raw === "false") return false;
  if (raw === "1" || raw === "true") return true;
  throw new HttpError(400, `${name} must be 1 or 0 (true or false), got ${JSON.stringify(raw)}`);
}

/** One line of `/api/lines`: key, rank (null: the global line), after and before (null: open). */
type LineRequest = readonly [key: string, rank: number | null, after: string | null, before: string | null];

/** One line of `/api/lines` without `run`: the run it is of, then as `LineRequest`. */
export type RunLineRequest = readonly [run: string, ...line: LineRequest];

/** Runs one `runs` parameter (of `/api/keys`, `/api/alerts`) may name at most. */
export const MAX_BATCH_RUNS = 200;

const LINES_USAGE = `lines must be JSON [[key, rank or null, cursor or null, before or null], …] with at most ${MAX_BATCH_LINES} entries (the 4th element, an exclusive upper bound on the step, is optional); without the run parameter each line starts with its run: [[run, key, rank or null, cursor or null, before or null], …]`;

/** A parameter that must be a JSON array, with at most `max` entries. */
function jsonArrayParam(raw: string | null, name: string, usage: string, max: number): unknown[] {
  if (raw === null || raw === "") throw new HttpError(400, `missing the ${name} parameter; ${usage}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new HttpError(400, `${name} is not JSON; ${usage}`);
  }
  if (!Array.isArray(parsed)) throw new HttpError(400, usage);
  if (parsed.length > max)
    throw new HttpError(
      400,
      `too many ${name} in one request: ${parsed.length}, at most ${max}; split them over several requests. ${usage}`,
    );
  checkJsonText(parsed, name);
  return parsed;
}

/** `lines` of `/api/lines`, checked against the caps; `withRun`: each line starts with its run (no `run` parameter). */
export function parseLines(raw: string | null, maxPoints: number): LineRequest[];
export function parseLines(raw: string | null, maxPoints: number, withRun: true): RunLineRequest[];
export function parseLines(
  raw: string | null,
  maxPoints: number,
  withRun = false,
): Array<LineRequest | RunLineRequest> {
  const parsed = jsonArrayParam(raw, "lines", LINES_USAGE, MAX_BATCH_LINES);
  if (parsed.length * maxPoints > MAX_BATCH_POINTS) {
    throw new HttpError(
      400,
      `this request asks for up to ${parsed.length} lines × ${maxPoints} points = ${(parsed.length * maxPoints).toLocaleString("en-US")} points, more than the ${MAX_BATCH_POINTS.toLocaleString("en-US")} one request may return; ask fewer lines per request or a smaller maxPoints`,
    );
  }
  return parsed.map((entry: unknown) => {
    if (!Array.isArray(entry)) throw new HttpError(400, LINES_USAGE);
    if (!withRun) return lineRequest(entry);
    const [run, ...line]: unknown[] = entry;
    if (typeof run !== "string" || run === "")
      throw new HttpError(
        400,
        `${LINES_USAGE}; a line's run is not a non-empty string (the run parameter is absent, so each line names its run first)`,
      );
    return [run, ...lineRequest(line)] as const;
  });
}

/** One entry of `lines` (without its run). */
function lineRequest(entry: unknown[]): LineRequest {
  if (entry.length < 3 || entry.length > 4) throw new HttpError(400, LINES_USAGE);
  const [key, rank, after, before = null]: unknown[] = entry;
  if (typeof key !== "string" || key === "")
    throw new HttpError(400, `${LINES_USAGE}; a key is not a non-empty string`);
  if (rank !== null && !(typeof rank === "number" && Number.isInteger(rank) && rank >= CONTROLLER_LINE)) {
    throw new HttpError(
      400,
      `${LINES_USAGE}; a rank is not a line (r for rank r, -1 the global line, -2 the controller's own) or null`,
    );
  }
  if (after !== null && typeof after !== "string")
    throw new HttpError(400, `${LINES_USAGE}; a cursor is not a string or null`);
  if (before !== null && typeof before !== "string" && typeof before !== "number")
    throw new HttpError(400, `${LINES_USAGE}; a before is not a step (number or string) or null`);
  return [key, rank, after, before === null ? null : String(before)];
}

const RUNS_USAGE = `runs must be a JSON array of 1 to ${MAX_BATCH_RUNS} run ids (experiment/trial as /api/runs lists them)`;

/** `runs` of a many-runs request: distinct, non-empty ids, at most `MAX_BATCH_RUNS`. */
export function parseRuns(raw: string | null): string[] {
  const parsed = jsonArrayParam(raw, "runs", RUNS_USAGE, MAX_BATCH_RUNS);
  if (parsed.length === 0 || !parsed.every((r): r is string => typeof r === "string" && r !== ""))
    throw new HttpError(400, RUNS_USAGE);
  return [...new Set(parsed)];
}

/** `keys` of `/api/summary`: `a,b,c`, or a JSON array for keys that hold commas; undefined when absent. */
export function keysParam(raw: string | null): Set<string> | undefined {
  if (raw === null || raw === "") return undefined;
  if (!raw.startsWith("[")) return new Set(raw.split(","));
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((k) => typeof k === "string");
  if (!isStrings(parsed))
    throw new HttpError(
      400,
      `keys must be key,key,… or a JSON array of strings, got ${JSON.stringify(raw.slice(0, 100))}`,
    );
  return new Set(parsed);
}
