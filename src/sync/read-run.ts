/**
 * What the sync reads from a run: each series past a cursor, records past a sequence number, the
 * run's metadata and its text files past a byte offset — all through the store's reading API
 * (`rankscope/store`: `series`, `samples`, `histograms`, `alerts`, `runInfo`, `ranks`, `config`) and the run
 * directory's files, never the store's tables, so the store may change its layout (or add
 * identities to its series) without the sync knowing.
 *
 * Every read is bounded: a series is read at most `READ_POINTS` points at a time, as columns
 * (`seriesColumns`: no object per point), records and alert events `READ_RECORDS` at a time, files
 * `READ_FILE_BYTES` at a time.
 */
import { closeSync, existsSync, openSync, readSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { join } from "node:path";
import * as store from "../store/reader.js";
import { nextDown, nextUp } from "../core/doubles.js";
import { jsonText, nonFiniteReplacer } from "../core/json.js";
import { RunLabelReader } from "../ui/run-labels.js";
import type { AlertHeader, RecordHeader, RunMeta, TimingHeader, WireSeriesKind } from "./wire.js";

/** Points of one series read at most at a time. */
const READ_POINTS = 65_536;
/** Samples or histograms read at most at a time. */
const READ_RECORDS = 10_000;
/** Bytes of one file read at most at a time. */
const READ_FILE_BYTES = 4 * 1024 * 1024;
/** The run folders whose files are sent (text logs, traces, session traces). */
const FILE_FOLDERS = ["logs", "traces", "sessions"] as const;

/** A series of the run. */
export interface SeriesRef {
  readonly kind: WireSeriesKind;
  readonly key: string;
  readonly reduce: string | null;
  readonly rank: number;
}

/** Points of one series past a cursor, as columns. */
export interface SeriesPiece {
  readonly steps: Float64Array;
  readonly walls: Float64Array;
  readonly values: Float64Array;
  /** Position of the last point. */
  readonly cursor: number;
}

/** Every series of the run. */
export function listSeries(runDir: string): SeriesRef[] {
  const out: SeriesRef[] = [];
  for (const kind of ["scalar", "stream", "system"] as const) {
    for (const k of store.keys(runDir, kind))
      for (const rank of k.ranks) out.push({ kind, key: k.key, reduce: k.reduce, rank });
  }
  return out;
}

/** The next piece of a series past `after` (null: from its start), or null when there is nothing new. */
export function readPiece(runDir: string, ref: SeriesRef, after: number | null): SeriesPiece | null {
  const { steps, walls, values, cursor } = store.seriesColumns(runDir, ref.key, {
    kind: ref.kind,
    rank: ref.rank,
    limit: READ_POINTS,
    ...(after !== null ? { after } : {}),
  });
  if (steps.length === 0 || cursor === null) return null;
  return { steps, walls, values, cursor };
}

/** A scalar series' points from `first` to `last` (both included), as the store has them now. */
export function readRange(runDir: string, ref: SeriesRef, first: number, last: number): SeriesPiece | null {
  const result = store.series(runDir, ref.key, {
    kind: "scalar",
    rank: ref.rank,
    x: "step",
    maxPoints: Infinity,
    after: nextDown(first),
    before: nextUp(last),
  });
  const n = result.points.length;
  if (n === 0) return null;
  return {
    steps: Float64Array.from(result.points, (p) => p.step),
    walls: Float64Array.from(result.points, (p) => p.wall),
    values: Float64Array.from(result.points, (p) => p.value),
    cursor: last,
  };
}

/** Samples and histograms past the cursors (the store's sequence numbers), oldest first. */
export function readRecords(runDir: string, cursors: Readonly<Record<string, number>>): RecordHeader[] {
  const out: RecordHeader[] = [];
  const samples = store.samples(runDir, undefined, { after: cursors["sample"] ?? -1, limit: READ_RECORDS });
  for (const s of samples)
    out.push({
      kind: "sample",
      key: s.key,
      rank: s.rank,
      seq: s.seq,
      step: s.step,
      wall: s.wall,
      data: JSON.stringify(s.records, nonFiniteReplacer),
    });
  const histograms = store.histograms(runDir, undefined, { after: cursors["histogram"] ?? -1, limit: READ_RECORDS });
  for (const h of histograms)
    out.push({
      kind: "histogram",
      key: h.key,
      rank: h.rank,
      seq: h.seq,
      step: h.step,
      wall: h.wall,
      data: JSON.stringify(h.histogram, nonFiniteReplacer),
    });
  return out;
}

/** Alert events past `after` (the store's sequence number; 0: from the first), oldest first, as the store keeps them. */
export function readAlerts(runDir: string, after: number): AlertHeader[] {
  return store
    .alerts(runDir, { after, limit: READ_RECORDS, oldest: true })
    .map(({ seq, ...event }) => ({ seq, event: jsonText(event) }));
}

/** Flushes of per-rank timings read per batch. */
const READ_TIMING_FLUSHES = 200;

/**
 * The per-rank timings of the oldest flushes after step `after` (undefined: from the first), as
 * the wire carries them (NaN as null); undefined when there are none.
 */
export function readTimings(runDir: string, after: number | undefined): TimingHeader | undefined {
  const window = store.rankTiming(runDir, {
    ...(after === undefined ? {} : { after }),
    maxFlushes: READ_TIMING_FLUSHES,
    oldest: true,
  });
  if (window.steps.length === 0) return undefined;
  const cells = (values: readonly number[]): Array<number | null> => values.map((v) => (Number.isNaN(v) ? null : v));
  return {
    ranks: window.ranks.map((r) => [r.rank, r.rankName, r.host] as const),
    steps: window.steps,
    walls: window.walls,
    reports: window.reports.map((r) => JSON.stringify(r)),
    stepMs: cells(window.stepMs),
    latenessMs: cells(window.latenessMs),
    waitMs: cells(window.waitMs),
  };
}

function textFile(runDir: string, name: string, limit = 10_000_000): string | null {
  const path = join(runDir, name);
  try {
    if (!statSync(path).isFile()) return null;
    const text = readFileSync(path, "utf8");
    return text.length > limit ? text.slice(0, limit) : text;
  } catch {
    return null;
  }
}

/** The run's metadata as the dashboard shows it. */
export function readMeta(runDir: string, runId: string): RunMeta {
  const info = store.runInfo(runDir);
  const hparams = store.config(runDir);
  const real = realpathSync(runDir);
  const labels = new RunLabelReader(real).labels(real, hparams);
  const rankNames: Record<string, string> = {};
  for (const r of store.ranks(runDir)) rankNames[String(r.rank)] = r.rankName;
  const parts = runId.split("/");
  return {
    experiment: info.experiment ?? parts.slice(0, -1).join("/"),
    trial: info.trial ?? parts[parts.length - 1] ?? runId,
    status: info.status,
    startedAt: info.startedAt,
    endedAt: info.endedAt,
    updatedAt: info.updatedAt,
    resumeStep: info.resumeStep,
    tags: labels.tags,
    group: labels.group,
    params: labels.params,
    hparamsJson: JSON.stringify(hparams, nonFiniteReplacer),
    rankNames,
    lostRanks: info.lostRanks ?? [],
    configYaml: textFile(runDir, "config.yaml"),
    versionJson: textFile(runDir, "version.json", 1_000_000),
  };
}

/** The run's text files (`logs/…`, `traces/…`, `sessions/…`) and their sizes now. */
export function listFiles(runDir: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const folder of FILE_FOLDERS) {
    const dir = join(runDir, folder);
    if (!existsSync(dir)) continue;
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch {
      continue;
    }
    for (const name of names) {
      try {
        const stat = statSync(join(dir, name));
        if (stat.isFile()) out.set(`${folder}/${name}`, stat.size);
      } catch {
        // Vanished between the listing and the stat.
      }
    }
  }
  return out;
}

/** Up to `max` bytes of a run file from `offset`. */
export function readFileBytes(runDir: string, path: string, offset: number, max = READ_FILE_BYTES): Buffer {
  const fd = openSync(join(runDir, path), "r");
  try {
    const buffer = Buffer.alloc(max);
    const n = readSync(fd, buffer, 0, max, offset);
    return buffer.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}
