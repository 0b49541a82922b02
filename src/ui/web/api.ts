/**
 * The dashboard's JSON API, typed: one call per endpoint (`api`), what each learns about an older
 * server than the app (and then does without), and many runs asked a chunk at a time. How a
 * request is made and its numbers decoded is `api-http.ts`; what the endpoints take and answer,
 * `api-types.ts` and the server's types, re-exported here.
 */
import { isRecord } from "../../core/json.js";
import {
  ApiError,
  apiUrl,
  bytesReceived,
  decodeNumbers,
  getJson,
  getRevalidated,
  notModifiedCount,
  toNumber,
} from "./api-http.js";
import {
  runsSearch,
  type ConfigView,
  type GroupLine,
  type LineRequest,
  type RunInfo,
  type RunKeys,
  type RunLineRequest,
  type RunsPage,
  type RunsQuery,
  type TraceFile,
} from "./api-types.js";
import type { LogLine, LogWindow } from "../log-reader.js";
import type {
  AlertEntry,
  DashboardRun,
  HistogramEntry,
  KeyInfo,
  SampleRow,
  SeriesData,
  StreamData,
} from "../source.js";
import type { LostRank } from "../../store/read-types.js";
import type { RanksView } from "../ranks-view.js";

export type {
  AlertEntry,
  DashboardRun,
  RanksView,
  HistogramEntry,
  KeyInfo,
  LogLine,
  LogWindow,
  LostRank,
  SampleRow,
  SeriesData,
  StreamData,
};
export { ApiError } from "./api-http.js";
export {
  runsSearch,
  type GroupLine,
  type ParamValue,
  type RunInfo,
  type RunKeys,
  type RunLineRequest,
  type RunsPage,
  type RunsQuery,
} from "./api-types.js";

/** What `/api/lines` answers per line: its data, or why it has none. */
export type LineAnswer<T> = T | { error: string; status: number };

/** The kinds of line `/api/lines` serves. */
type LineKind = "scalar" | "stream" | "system";

/** Whether a line's answer is a stream's (per-rank points) rather than a series'. */
export function isStreamData(data: SeriesData | StreamData): data is StreamData {
  return "ranks" in data;
}

function decodeLine<T extends { values: unknown[] }>(line: LineAnswer<T>): LineAnswer<T> {
  return "error" in line ? line : { ...line, values: decodeNumbers(line.values) };
}

/** What this server turned out not to support (an older server than the app). */
const unsupported = { before: false, summary: false, alerts: false, runs: false };

/** JSON of one many-runs request at most (its URL stays well under servers' header limits). */
const MANY_RUNS_CHARS = 4_000;

/** Cut `items` into chunks whose JSON stays under `MANY_RUNS_CHARS` (and `most` items). */
function chunksOf<T>(items: readonly T[], most: number): T[][] {
  const out: T[][] = [];
  let chunk: T[] = [];
  let chars = 0;
  for (const item of items) {
    const size = JSON.stringify(item).length + 1;
    if (chunk.length > 0 && (chunk.length >= most || chars + size > MANY_RUNS_CHARS)) {
      out.push(chunk);
      chunk = [];
      chars = 0;
    }
    chunk.push(item);
    chars += size;
  }
  if (chunk.length > 0) out.push(chunk);
  return out;
}

/** A many-runs answer's entry for a run that had none: why. */
function isErrorAnswer<T>(answer: T | { error: string; status: number }): answer is { error: string; status: number } {
  return isRecord(answer) && typeof answer["error"] === "string" && typeof answer["status"] === "number";
}

/**
 * `path` of many runs, a request per chunk of runs (`runs=[…]`): each run's answer, or the error
 * the server gave for it. A server without `runs` (older than the app) is asked run by run.
 */
async function perRun<T>(
  path: string,
  runs: readonly string[],
  one: (run: string) => Promise<T>,
): Promise<Map<string, T | ApiError>> {
  const found = new Map<string, T | ApiError>();
  const single = async (run: string): Promise<void> => {
    try {
      found.set(run, await one(run));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      found.set(run, error);
    }
  };
  for (const chunk of chunksOf([...new Set(runs)], 100)) {
    if (unsupported.runs) {
      for (const run of chunk) await single(run);
      continue;
    }
    try {
      const { runs: answers } = await getJson<{ runs: Array<T | { error: string; status: number }> }>(path, {
        runs: JSON.stringify(chunk),
      });
      for (const [i, run] of chunk.entries()) {
        const answer = answers[i];
        if (answer === undefined) found.set(run, new ApiError("the server gave no answer for this run", 502));
        else found.set(run, isErrorAnswer(answer) ? new ApiError(answer.error, answer.status) : answer);
      }
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 400)) throw error;
      unsupported.runs = true;
      for (const run of chunk) await single(run);
    }
  }
  return found;
}

/** An alert event as JSON carries it: its value may be a non-finite number's name. */
function decodeAlert(a: AlertEntry): AlertEntry {
  return a.value === undefined ? a : { ...a, value: toNumber(a.value) };
}

/** `api.runLines` one run at a time, answers in the order asked. */
async function linesRunByRun<T extends SeriesData | StreamData>(
  kind: LineKind,
  lines: RunLineRequest[],
  maxPoints?: number,
): Promise<LineAnswer<T>[]> {
  const byRun = new Map<string, number[]>();
  for (const [i, [run]] of lines.entries()) byRun.set(run, [...(byRun.get(run) ?? []), i]);
  const out = new Array<LineAnswer<T>>(lines.length);
  for (const [run, at] of byRun) {
    const own = at.map((i): LineRequest => {
      const [, key, rank, after, before] = lines[i] ?? [run, "", null, null];
      return before === undefined ? [key, rank, after] : [key, rank, after, before];
    });
    const answers = await api.lines<T>(run, kind, own, maxPoints);
    for (const [j, i] of at.entries())
      out[i] = answers[j] ?? { error: "the server gave no answer for this line", status: 502 };
  }
  return out;
}

export const api = {
  /**
   * Many lines of one run at once: `[key, rank, after, before?]` each. A server that does not know
   * `before` yet refuses 4-element lines; the app then asks without it (and filters the window itself).
   */
  lines: async <T extends SeriesData | StreamData>(
    run: string,
    kind: LineKind,
    lines: LineRequest[],
    maxPoints?: number,
  ): Promise<LineAnswer<T>[]> => {
    const wire = unsupported.before
      ? lines.map((l) => l.slice(0, 3))
      : lines.map((l) => (l.length === 4 && l[3] === null ? l.slice(0, 3) : l));
    try {
      const data = await getJson<{ lines: LineAnswer<T>[] }>("lines", {
        run,
        kind,
        lines: JSON.stringify(wire),
        maxPoints,
      });
      return data.lines.map((l) => decodeLine(l));
    } catch (error) {
      if (
        error instanceof ApiError &&
        error.status === 400 &&
        !unsupported.before &&
        wire.some((l) => l.length === 4)
      ) {
        unsupported.before = true;
        return api.lines(run, kind, lines, maxPoints);
      }
      throw error;
    }
  },
  /**
   * Lines of many runs at once (an overlay): `[run, key, rank, after, before?]` each, in one
   * request; from a server that does not take lines naming their runs, one request per run.
   */
  runLines: async <T extends SeriesData | StreamData>(
    kind: LineKind,
    lines: RunLineRequest[],
    maxPoints?: number,
  ): Promise<LineAnswer<T>[]> => {
    if (unsupported.runs) return linesRunByRun<T>(kind, lines, maxPoints);
    const wire = lines.map(([run, ...line]) => [
      run,
      ...(unsupported.before ? line.slice(0, 3) : line.length === 4 && line[3] === null ? line.slice(0, 3) : line),
    ]);
    try {
      const data = await getJson<{ lines: LineAnswer<T>[] }>("lines", { kind, lines: JSON.stringify(wire), maxPoints });
      return data.lines.map((l) => decodeLine(l));
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 400)) throw error;
      unsupported.runs = true;
      return linesRunByRun<T>(kind, lines, maxPoints);
    }
  },
  bytesReceived,
  /**
   * Learn what the server supports from `/api/runs`: a server that lists runs without `params`
   * predates `before` and `/api/summary`, so the app does not ask it (no refused requests).
   */
  learnFrom: (runs: RunInfo[]): void => {
    const first = runs[0];
    if (first !== undefined && first.params === undefined) {
      unsupported.before = true;
      unsupported.summary = true;
    }
  },
  /** Whether the server answered `before` (false once it refused it). */
  supportsBefore: () => !unsupported.before,
  /** The last value of every key of a run (or of `keys`); empty from a server without `/api/summary`. */
  summary: async (
    run: string,
    options: { keys?: string[]; internal?: boolean } = {},
  ): Promise<Record<string, number>> => {
    if (unsupported.summary) return {};
    try {
      const data = await getJson<Record<string, unknown>>("summary", {
        run,
        keys: options.keys?.join(","),
        internal: options.internal === true ? 1 : undefined,
      });
      const out: Record<string, number> = {};
      for (const [k, v] of Object.entries(data)) out[k] = toNumber(v);
      return out;
    } catch (error) {
      if (error instanceof ApiError && error.status === 404 && /endpoint/.test(error.message)) {
        unsupported.summary = true;
        return {};
      }
      throw error;
    }
  },
  /** A run's alert events in order (the newest 1000); none from a server without `/api/alerts`. */
  alerts: async (run: string): Promise<AlertEntry[]> => {
    if (unsupported.alerts) return [];
    try {
      const { alerts } = await getJson<{ alerts: AlertEntry[] }>("alerts", { run });
      return alerts.map(decodeAlert);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404 && /endpoint/.test(error.message)) {
        unsupported.alerts = true;
        return [];
      }
      throw error;
    }
  },
  version: () => getJson<{ rankscope: string; node: string }>("version"),
  /** One page of runs; the same object as last time when the server says it did not change (304). */
  runs: async (query: RunsQuery = {}): Promise<RunsPage> => {
    const page = await getRevalidated<RunsPage>("runs", runsSearch(query));
    api.learnFrom(page.runs);
    return page;
  },
  notModified: notModifiedCount,
  /** The runs named grouped by `by` (`param:NAME`, `group`, …): each group's mean, std, min and max of `key` by step. */
  groups: (
    key: string,
    by: string[],
    runs: string[],
    maxPoints: number,
  ): Promise<{ groups: GroupLine[]; missing: string[] }> => {
    const search = new URLSearchParams({ key, maxPoints: String(maxPoints) });
    for (const b of by) search.append("by", b);
    for (const r of runs) search.append("run", r);
    return getJson<{ groups: GroupLine[]; missing: string[] }>("groups", search).then((answer) => ({
      missing: answer.missing,
      groups: answer.groups.map((g) => ({
        ...g,
        mean: decodeNumbers(g.mean),
        std: decodeNumbers(g.std),
        min: decodeNumbers(g.min),
        max: decodeNumbers(g.max),
      })),
    }));
  },
  keys: (run: string) => getJson<RunKeys>("keys", { run }),
  /** The keys of many runs, a request per 100 runs (each run's keys, or the error it had). */
  keysOf: (runs: readonly string[]): Promise<Map<string, RunKeys | ApiError>> => perRun("keys", runs, api.keys),
  /** The alert events of many runs, a request per 100 runs (each run's, or the error it had). */
  alertsOf: async (runs: readonly string[]): Promise<Map<string, AlertEntry[] | ApiError>> => {
    if (unsupported.alerts) return new Map();
    const found = await perRun<{ alerts: AlertEntry[] }>("alerts", runs, async (run) => ({
      alerts: await api.alerts(run),
    }));
    return new Map(
      [...found].map(([run, answer]) => [run, answer instanceof ApiError ? answer : answer.alerts.map(decodeAlert)]),
    );
  },
  /** One key's newest `limit` histograms (of one line when `rank` is given; -1: the global one), and the lines there are. */
  histograms: async (
    run: string,
    key: string,
    limit?: number,
    rank?: number,
  ): Promise<{ histograms: HistogramEntry[]; ranks: number[] }> => {
    const answer = await getJson<{ histograms: HistogramEntry[]; ranks?: number[] }>("histograms", {
      run,
      key,
      limit,
      rank,
    });
    const histograms = answer.histograms.map(({ histogram: h, ...r }): HistogramEntry => ({
      ...r,
      histogram: {
        ...h,
        min: toNumber(h.min),
        max: toNumber(h.max),
        sum: toNumber(h.sum),
        sumSquares: toNumber(h.sumSquares),
        bucketLimits: decodeNumbers([...h.bucketLimits]),
      },
    }));
    // An older server lists no ranks: the lines its answer holds.
    return { histograms, ranks: answer.ranks ?? [...new Set(histograms.map((h) => h.rank))].sort((a, b) => a - b) };
  },
  samples: async (run: string) => (await getJson<{ samples: SampleRow[] }>("samples", { run })).samples,
  config: (run: string) => getJson<ConfigView>("config", { run }),
  traces: async (run: string) => (await getJson<{ files: TraceFile[] }>("traces", { run })).files,
  traceUrl: (run: string, file: string) => apiUrl("trace", { run, file }),
  /** The Ranks view of a run: per-rank timings of its newest flushes and the newest straggler report. */
  ranks: (run: string, flushes?: number) => getJson<RanksView>("ranks", { run, flushes }),
  /** The files of a run's `logs/` (merged.log and main.log first). */
  logs: async (run: string) => (await getJson<{ files: TraceFile[] }>("logs", { run })).files,
  /** One window of a log file: the tail, or the lines before/after a byte offset, filtered. */
  log: (run: string, file: string, query: { after?: number; before?: number; level?: string; component?: string }) =>
    getJson<LogWindow>("log", {
      run,
      file,
      after: query.after,
      before: query.before,
      level: query.level === "" ? undefined : query.level,
      component: query.component === "" ? undefined : query.component,
    }),
};
