/**
 * The dashboard's JSON API, typed. The server sends NaN and ±Infinity as the strings "NaN",
 * "Infinity", "-Infinity" (JSON has no such numbers); they are turned back into numbers here.
 */
import type { HistogramRow, KeyInfo, RunSummary, SampleRow, SeriesData, StreamData } from "../source.js";

export type { HistogramRow, KeyInfo, RunSummary, SampleRow, SeriesData, StreamData };

/** Keys of one run, by kind. */
export interface RunKeys {
  metrics: KeyInfo[];
  streams: string[];
  system: string[];
  /** Keys of `Reduce.HISTOGRAM` metrics. */
  histograms: string[];
  /** Rank number → the name its process registered (`Trainer_0_r1`), when known. */
  rankNames: Record<string, string>;
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
      const body = (await response.json()) as { error?: string };
      if (typeof body.error === "string") message = body.error;
    } catch {
      // keep the status line
    }
    throw new Error(message);
  }
  return (await response.json()) as T;
}

/** What `/api/lines` answers per line: its data, or why it has none. */
export type LineAnswer<T> = T | { error: string; status: number };

/** The kinds of line `/api/lines` serves. */
export type LineKind = "scalar" | "stream" | "system";

function decodeLine<T extends { values: unknown[] }>(line: LineAnswer<T>): LineAnswer<T> {
  return "error" in line ? line : { ...line, values: decodeNumbers(line.values) };
}

export const api = {
  /** Many lines of one run at once: `[key, rank or null, cursor or null]` each. */
  lines: async <T extends SeriesData | StreamData>(run: string, kind: LineKind, lines: [string, number | null, string | null][], maxPoints?: number): Promise<LineAnswer<T>[]> => {
    const data = await getJson<{ lines: LineAnswer<T>[] }>("lines", { run, kind, lines: JSON.stringify(lines), maxPoints });
    return data.lines.map((l) => decodeLine(l));
  },
  version: () => getJson<{ rankscope: string; node: string }>("version"),
  runs: async () => (await getJson<{ runs: RunSummary[] }>("runs")).runs,
  keys: (run: string) => getJson<RunKeys>("keys", { run }),
  histograms: async (run: string, key: string) => {
    const rows = (await getJson<{ histograms: HistogramRow[] }>("histograms", { run, key })).histograms;
    return rows.map((r) => ({ ...r, min: toNumber(r.min), max: toNumber(r.max), bucketLimits: decodeNumbers([...r.bucketLimits]) }));
  },
  samples: async (run: string) => (await getJson<{ samples: SampleRow[] }>("samples", { run })).samples,
  config: (run: string) => getJson<ConfigView>("config", { run }),
  traces: async (run: string) => (await getJson<{ files: TraceFile[] }>("traces", { run })).files,
  traceUrl: (run: string, file: string) => apiUrl("trace", { run, file }),
};
