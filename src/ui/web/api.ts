/**
 * The dashboard's JSON API, typed. The server sends NaN and ±Infinity as the strings "NaN",
 * "Infinity", "-Infinity" (JSON has no such numbers); they are turned back into numbers here.
 */
import { isRecord } from "../../core/json.js";
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

/** A hyperparameter value as `/api/runs` flattens them. */
export type ParamValue = string | number | boolean | null;

/**
 * A run as the runs table shows it. `tags`, `group` and `params` come from servers that know them
 * (absent from older ones: the app then shows none).
 */
export interface RunInfo extends DashboardRun {
  tags?: string[];
  group?: string | null;
  params?: Record<string, ParamValue>;
  /** The last value of each scalar key, when asked for (`summary=1`). */
  summary?: Record<string, number>;
}

/** One page of `/api/runs`. */
export interface RunsPage {
  runs: RunInfo[];
  total: number;
  /** While a large local root is first read: how far it has come. */
  indexing?: { runsRead: number; runsFound: number };
}

/** What `/api/runs` is asked: its filters, sort and page (see the server's run-query.ts). */
export interface RunsQuery {
  /** Texts each run must contain (id, group or a tag). */
  q?: string[];
  tags?: string[];
  group?: string;
  statuses?: string[];
  /** `NAME OP VALUE` each. */
  params?: string[];
  /** `KEY OP NUMBER` each. */
  metrics?: string[];
  runs?: string[];
  /** `started`, `name`, `param:lr`, `-metric:loss`, … */
  sort?: string;
  offset?: number;
  limit?: number;
  summary?: boolean;
  internal?: boolean;
}

/** The query string of a runs query (repeated parameters for lists). */
export function runsSearch(query: RunsQuery): URLSearchParams {
  const search = new URLSearchParams();
  const one = (name: string, value: string | number | undefined): void => {
    if (value !== undefined && value !== "") search.append(name, String(value));
  };
  for (const q of query.q ?? []) one("q", q);
  for (const t of query.tags ?? []) one("tag", t);
  one("group", query.group);
  for (const s of query.statuses ?? []) one("status", s);
  for (const p of query.params ?? []) one("param", p);
  for (const m of query.metrics ?? []) one("metric", m);
  for (const r of query.runs ?? []) one("run", r);
  one("sort", query.sort);
  one("offset", query.offset);
  one("limit", query.limit);
  if (query.summary === true) one("summary", 1);
  if (query.internal === true) one("internal", 1);
  return search;
}

/** A group's line (`/api/groups`): the mean across its runs, with the band's figures per step. */
export interface GroupLine {
  values: (string | number | boolean | null)[];
  label: string;
  runs: string[];
  steps: number[];
  mean: number[];
  std: number[];
  min: number[];
  max: number[];
  count: number[];
}

/**
 * A scalar key as the store describes it (`ranks` includes `GLOBAL_RANK` when it has a global
 * line); `internal` (rankscope's own bookkeeping) when the server says so.
 */
type MetricKey = KeyInfo & { internal?: boolean };

/** One requested line of `/api/lines`: key, rank, `after` cursor, and `before` (exclusive upper step bound). */
type LineRequest = [string, number | null, string | null] | [string, number | null, string | null, number | null];

/** One requested line of many runs' `/api/lines`: the run, then as `LineRequest`. */
export type RunLineRequest = [string, ...LineRequest];

/** Keys of one run, by kind. */
export interface RunKeys {
  metrics: MetricKey[];
  streams: string[];
  system: string[];
  /** Keys of `Reduce.HISTOGRAM` metrics. */
  histograms: string[];
  /** Line → the name its process registered (`Trainer_0_r1`, `Controller`), when known. */
  rankNames: Record<string, string>;
  /** Line → its label (`rank 1 (Trainer_0_r1)`, `controller (Controller)`, `rank 1 · thread 7 (Trainer_0_r1)`). */
  rankLabels?: Record<string, string>;
}

interface ConfigView {
  params: Record<string, unknown>;
  configYaml: string | null;
  version: unknown;
}

interface TraceFile {
  name: string;
  size: number;
  modified: number;
}

function toNumber(v: unknown): number {
  if (typeof v === "number") return v;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  return NaN;
}

function decodeNumbers(values: unknown[]): number[] {
  return values.map(toNumber);
}

/** Build an API URL with query parameters. */
function apiUrl(path: string, params: Record<string, string | number | undefined> = {}): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) search.set(k, String(v));
  const q = search.toString();
  return `api/${path}${q === "" ? "" : `?${q}`}`;
}

async function getJson<T>(
  path: string,
  params: Record<string, string | number | undefined> | URLSearchParams = {},
): Promise<T> {
  const url = params instanceof URLSearchParams ? `api/${path}?${params.toString()}` : apiUrl(path, params);
  const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  await failUnlessOk(response);
  const text = await response.text();
  received += text.length;
  // The one unchecked type in the app: the answer of this package's own server, whose types
  // (source.ts, the store's read-types.ts) are the ones named here.
  return JSON.parse(text) as T;
}

/** The last answer of each revalidated URL and its ETag. */
const revalidated = new Map<string, { etag: string; value: unknown }>();

/**
 * GET JSON that is asked for again and again (the runs list, every few seconds): the request
 * names the ETag of the last answer, and a `304 Not Modified` (nothing downloaded) returns the
 * same object as before, so callers can tell "unchanged" by identity.
 */
async function getRevalidated<T>(path: string, params: URLSearchParams): Promise<T> {
  const url = `api/${path}?${params.toString()}`;
  const known = revalidated.get(url);
  const response = await fetch(url, {
    credentials: "same-origin",
    cache: "no-store",
    headers: known === undefined ? {} : { "If-None-Match": known.etag },
  });
  if (response.status === 304 && known !== undefined) {
    notModified++;
    // This URL's last answer, parsed from this server's JSON: the type it was asked as.
    return known.value as T;
  }
  await failUnlessOk(response);
  const text = await response.text();
  received += text.length;
  const value: unknown = JSON.parse(text);
  const etag = response.headers.get("etag");
  if (etag !== null) {
    if (revalidated.size > 200) revalidated.clear();
    revalidated.set(url, { etag, value });
  }
  return value as T;
}

/** Answers that came back 304 (for tests and the benchmark). */
let notModified = 0;

async function failUnlessOk(response: Response): Promise<void> {
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body: unknown = await response.json();
      if (isRecord(body) && typeof body["error"] === "string") message = body["error"];
    } catch {
      // keep the status line
    }
    throw new ApiError(message, response.status);
  }
}

/** Characters of JSON received so far (what polls cost, for the live benchmark). */
let received = 0;

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

/** An answer with an HTTP status, so callers can tell "not supported here" (400/404) from a fault. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
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
  bytesReceived: () => received,
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
  notModified: () => notModified,
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
