/**
 * The dashboard's JSON API, typed. The server sends NaN and ±Infinity as the strings "NaN",
 * "Infinity", "-Infinity" (JSON has no such numbers); they are turned back into numbers here.
 */
import { isRecord } from "../../core/json.js";
import type { LogLine, LogWindow } from "../log-reader.js";
import type { DashboardRun, HistogramEntry, KeyInfo, SampleRow, SeriesData, StreamData } from "../source.js";
import type { LostRank } from "../../backends/store/read-types.js";

export type { DashboardRun, HistogramEntry, KeyInfo, LogLine, LogWindow, LostRank, SampleRow, SeriesData, StreamData };

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
}

/**
 * A scalar key as the store describes it (`ranks` includes `GLOBAL_RANK` when it has a global
 * line); `internal` (rankscope's own bookkeeping) when the server says so.
 */
export type MetricKey = KeyInfo & { internal?: boolean };

/** One requested line of `/api/lines`: key, rank, `after` cursor, and `before` (exclusive upper step bound). */
export type LineRequest = [string, number | null, string | null] | [string, number | null, string | null, number | null];

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

export interface ConfigView {
  params: Record<string, unknown>;
  configYaml: string | null;
  version: unknown;
}

export interface TraceFile {
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
export function apiUrl(path: string, params: Record<string, string | number | undefined> = {}): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) search.set(k, String(v));
  const q = search.toString();
  return `api/${path}${q === "" ? "" : `?${q}`}`;
}

async function getJson<T>(path: string, params: Record<string, string | number | undefined> = {}): Promise<T> {
  const response = await fetch(apiUrl(path, params), { credentials: "same-origin", cache: "no-store" });
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
  const text = await response.text();
  received += text.length;
  // The one unchecked type in the app: the answer of this package's own server, whose types
  // (source.ts, the store's read-types.ts) are the ones named here.
  return JSON.parse(text) as T;
}

/** Characters of JSON received so far (what polls cost, for the live benchmark). */
let received = 0;

/** What `/api/lines` answers per line: its data, or why it has none. */
export type LineAnswer<T> = T | { error: string; status: number };

/** The kinds of line `/api/lines` serves. */
export type LineKind = "scalar" | "stream" | "system";

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
const unsupported = { before: false, summary: false };

export const api = {
  /**
   * Many lines of one run at once: `[key, rank, after, before?]` each. A server that does not know
   * `before` yet refuses 4-element lines; the app then asks without it (and filters the window itself).
   */
  lines: async <T extends SeriesData | StreamData>(run: string, kind: LineKind, lines: LineRequest[], maxPoints?: number): Promise<LineAnswer<T>[]> => {
    const wire = unsupported.before ? lines.map((l) => l.slice(0, 3)) : lines.map((l) => (l.length === 4 && l[3] === null ? l.slice(0, 3) : l));
    try {
      const data = await getJson<{ lines: LineAnswer<T>[] }>("lines", { run, kind, lines: JSON.stringify(wire), maxPoints });
      return data.lines.map((l) => decodeLine(l));
    } catch (error) {
      if (error instanceof ApiError && error.status === 400 && !unsupported.before && wire.some((l) => l.length === 4)) {
        unsupported.before = true;
        return api.lines(run, kind, lines, maxPoints);
      }
      throw error;
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
  summary: async (run: string, options: { keys?: string[]; internal?: boolean } = {}): Promise<Record<string, number>> => {
    if (unsupported.summary) return {};
    try {
      const data = await getJson<Record<string, unknown>>("summary", { run, keys: options.keys?.join(","), internal: options.internal === true ? 1 : undefined });
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
  version: () => getJson<{ rankscope: string; node: string }>("version"),
  runs: async () => {
    const runs = (await getJson<{ runs: RunInfo[] }>("runs")).runs;
    api.learnFrom(runs);
    return runs;
  },
  keys: (run: string) => getJson<RunKeys>("keys", { run }),
  /** One key's newest `limit` histograms (of one line when `rank` is given; -1: the global one), and the lines there are. */
  histograms: async (run: string, key: string, limit?: number, rank?: number): Promise<{ histograms: HistogramEntry[]; ranks: number[] }> => {
    const answer = await getJson<{ histograms: HistogramEntry[]; ranks?: number[] }>("histograms", { run, key, limit, rank });
    const histograms = answer.histograms.map(({ histogram: h, ...r }): HistogramEntry => ({
      ...r,
      histogram: { ...h, min: toNumber(h.min), max: toNumber(h.max), sum: toNumber(h.sum), sumSquares: toNumber(h.sumSquares), bucketLimits: decodeNumbers([...h.bucketLimits]) },
    }));
    // An older server lists no ranks: the lines its answer holds.
    return { histograms, ranks: answer.ranks ?? [...new Set(histograms.map((h) => h.rank))].sort((a, b) => a - b) };
  },
  samples: async (run: string) => (await getJson<{ samples: SampleRow[] }>("samples", { run })).samples,
  config: (run: string) => getJson<ConfigView>("config", { run }),
  traces: async (run: string) => (await getJson<{ files: TraceFile[] }>("traces", { run })).files,
  traceUrl: (run: string, file: string) => apiUrl("trace", { run, file }),
  /** The files of a run's `logs/` (merged.log and main.log first). */
  logs: async (run: string) => (await getJson<{ files: TraceFile[] }>("logs", { run })).files,
  /** One window of a log file: the tail, or the lines before/after a byte offset, filtered. */
  log: (run: string, file: string, query: { after?: number; before?: number; level?: string; component?: string }) =>
    getJson<LogWindow>("log", { run, file, after: query.after, before: query.before, level: query.level === "" ? undefined : query.level, component: query.component === "" ? undefined : query.component }),
};
