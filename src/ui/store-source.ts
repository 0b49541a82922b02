/**
 * The dashboard's data from a local runs root: a thin adapter from the store's read API
 * (`src/store/reader.ts`) and the run directories' files to the JSON the web app expects.
 * Cursors become opaque strings (a step for scalars; per-rank arrival numbers for streams, so no
 * rank's newer points are missed). A run's handle is its real directory, always inside the root.
 */
import { createReadStream, existsSync, realpathSync, statSync } from "node:fs";
import { open, stat } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import * as store from "../store/reader.js";
import { STORE_FILE } from "../store/store-file.js";
import { DEFAULT_MAX_POINTS } from "../store/store-reader.js";
import { applyRunQuery } from "./run-query.js";
import { ranksView, type RanksView } from "./ranks-view.js";
import { RunIndex } from "./run-index.js";
import { RunLabelReader } from "./run-labels.js";
import { HttpError, listRunFiles, readRunText, realPathInside, resolveRunDir, resolveRunFile } from "./security.js";
import type {
  AlertEntry,
  DashboardSource,
  HistogramEntry,
  KeyInfo,
  RunBytes,
  RunDetails,
  RunsPage,
  SampleRow,
  SeriesData,
  StreamData,
  TraceFile,
} from "./source.js";
import { streamRanks } from "./source.js";

const GLOBAL = store.GLOBAL_RANK;

function requireStore(runDir: string): void {
  if (!existsSync(join(runDir, STORE_FILE)))
    throw new HttpError(404, `this run has no ${STORE_FILE} (it was not written with the store backend)`);
}

function numericCursor(after: string | undefined, name = "after"): number | undefined {
  if (after === undefined) return undefined;
  const n = Number(after);
  if (after.trim() === "" || !Number.isFinite(n))
    throw new HttpError(
      400,
      `${name} must be ${name === "after" ? "a cursor from an earlier answer" : "a step number"}, got ${JSON.stringify(after)}`,
    );
  return n;
}

/** `after` and `before` of a query as the store reads them. */
function window(query: { after?: string; before?: string }): { after?: number; before?: number } {
  const after = numericCursor(query.after);
  const before = numericCursor(query.before, "before");
  return { ...(after !== undefined ? { after } : {}), ...(before !== undefined ? { before } : {}) };
}

function keyInfos(runDir: string, kind: store.KeyKind): store.KeyInfo[] {
  requireStore(runDir);
  return store.keys(runDir, kind);
}

/** Read one series, turning "no such key" into a 404 (checked only when the read fails, so a grid's 50 reads don't list the keys 50 times). */
function readSeries(runDir: string, key: string, options: store.SeriesOptions): store.SeriesResult {
  requireStore(runDir);
  try {
    return store.series(runDir, key, options);
  } catch (error) {
    const kind = options.kind ?? "scalar";
    if (!store.keys(runDir, kind).some((k) => k.key === key))
      throw new HttpError(404, `this run has no ${kind} key ${JSON.stringify(key)}`);
    throw error;
  }
}

function toSeriesData(result: store.SeriesResult): SeriesData {
  const n = result.points.length;
  const steps = new Array<number>(n);
  const times = new Array<number>(n);
  const values = new Array<number>(n);
  result.points.forEach((p, i) => {
    steps[i] = p.step;
    times[i] = p.wall;
    values[i] = p.value;
  });
  return {
    steps,
    times,
    values,
    cursor: result.cursor === null ? null : String(result.cursor),
    downsampled: result.downsampled,
  };
}

function decodeRankCursors(after: string | undefined): Map<number, number> {
  const cursors = new Map<number, number>();
  if (after === undefined || after === "") return cursors;
  for (const part of after.split(",")) {
    const [rank, seq] = part.split(":").map(Number);
    if (rank === undefined || seq === undefined || !Number.isInteger(rank) || !Number.isFinite(seq)) {
      throw new HttpError(
        400,
        `after must be a cursor from an earlier answer (rank:seq,…), got ${JSON.stringify(after)}`,
      );
    }
    cursors.set(rank, seq);
  }
  return cursors;
}

/** Up to `length` bytes of `file` from `from`. */
async function readBytes(file: string, from: number, length: number): Promise<Buffer> {
  const handle = await open(file, "r");
  try {
    const bytes = Buffer.alloc(length);
    const { bytesRead } = await handle.read(bytes, 0, length, from);
    return bytes.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** The local source, with the index its runs list answers from (tests and benchmarks refresh it at known points). */
export type StoreSource = DashboardSource & { readonly index: RunIndex };

/**
 * A source reading the runs under `root`: the runs list from an index kept up to date
 * (`run-index.ts`), each run's data from its `metrics.db` through the store's reader, its files
 * from its directory.
 */
export function createStoreSource(root: string): StoreSource {
  const realRoot = realpathSync(resolve(root));
  const labels = new RunLabelReader(realRoot);
  const index = new RunIndex(realRoot, labels);
  return {
    index,
    resolveRun(run: string | null, needsStore: boolean): string {
      const runDir = resolveRunDir(realRoot, run);
      if (needsStore) realPathInside(realRoot, join(runDir, STORE_FILE), `run ${JSON.stringify(run)}'s ${STORE_FILE}`);
      return runDir;
    },

    async listRuns(query): Promise<RunsPage> {
      const { runs, indexing } = await index.current();
      return { ...applyRunQuery(runs, query), ...(indexing !== undefined ? { indexing } : {}) };
    },

    runDetails(runDir: string): RunDetails {
      const { tags, group } = labels.labels(runDir, {});
      return {
        configYaml: readRunText(realRoot, runDir, "config.yaml"),
        versionJson: readRunText(realRoot, runDir, "version.json"),
        tags,
        group,
      };
    },

    traceFiles(runDir: string) {
      return listRunFiles(realRoot, runDir, "traces");
    },

    traceFile(runDir: string, name: string | null): TraceFile {
      const file = resolveRunFile(realRoot, runDir, "traces", name);
      return {
        name: file.slice(file.lastIndexOf(sep) + 1),
        size: statSync(file).size,
        open: () => createReadStream(file),
      };
    },

    logFiles(runDir: string) {
      return listRunFiles(realRoot, runDir, "logs");
    },

    logFile(runDir: string, name: string | null): RunBytes {
      const file = resolveRunFile(realRoot, runDir, "logs", name);
      return {
        name: file.slice(file.lastIndexOf(sep) + 1),
        size: async () => (await stat(file)).size,
        read: (from, length) => readBytes(file, from, length),
      };
    },

    keys(runDir: string): KeyInfo[] {
      return keyInfos(runDir, "scalar");
    },

    series(runDir, key, query): SeriesData {
      return toSeriesData(
        readSeries(runDir, key, {
          kind: "scalar",
          rank: query.rank ?? GLOBAL,
          x: "step",
          ...window(query),
          ...(query.maxPoints !== undefined ? { maxPoints: query.maxPoints } : {}),
        }),
      );
    },

    rankNames(runDir: string): Record<string, string> {
      requireStore(runDir);
      const names: Record<string, string> = {};
      for (const r of store.ranks(runDir)) if (r.rank !== GLOBAL) names[String(r.rank)] = r.rankName;
      return names;
    },

    streamKeys(runDir: string): string[] {
      return keyInfos(runDir, "stream").map((k) => k.key);
    },

    stream(runDir, key, query): StreamData {
      requireStore(runDir);
      const info = store.keys(runDir, "stream").find((k) => k.key === key);
      if (info === undefined) throw new HttpError(404, `this run has no stream key ${JSON.stringify(key)}`);
      const cursors = decodeRankCursors(query.after);
      const ranks = streamRanks(info.ranks, query.rank);
      const perRank = Math.max(
        store.SERIES_KINDS.length,
        Math.floor((query.maxPoints ?? DEFAULT_MAX_POINTS) / Math.max(1, ranks.length)),
      );
      const out: StreamData = { key, ranks: [], steps: [], times: [], values: [], cursor: null };
      for (const rank of ranks) {
        const after = cursors.get(rank);
        const result = store.series(runDir, key, {
          kind: "stream",
          rank,
          x: "wall",
          maxPoints: perRank,
          ...(after !== undefined ? { after } : {}),
        });
        for (const p of result.points) {
          out.ranks.push(rank);
          out.steps.push(p.step);
          out.times.push(p.wall);
          out.values.push(p.value);
        }
        if (result.cursor !== null) cursors.set(rank, result.cursor);
      }
      const cursor = [...cursors.entries()].map(([r, s]) => `${r}:${s}`).join(",");
      return { ...out, cursor: cursor === "" ? null : cursor };
    },

    samples(runDir: string): SampleRow[] {
      requireStore(runDir);
      const rows: SampleRow[] = [];
      for (const entry of store.samples(runDir, undefined, { limit: 200 })) {
        for (const record of entry.records)
          rows.push({ key: entry.key, step: entry.step, rank: entry.rank === GLOBAL ? null : entry.rank, record });
      }
      return rows;
    },

    histogramKeys(runDir: string): string[] {
      return keyInfos(runDir, "histogram").map((k) => k.key);
    },

    histograms(runDir: string, key: string, limit: number, rank?: number): HistogramEntry[] {
      requireStore(runDir);
      // The store keeps arrival order; a line's histograms are drawn by step.
      return store
        .histograms(runDir, key, { limit, ...(rank !== undefined ? { rank } : {}) })
        .sort((a, b) => a.step - b.step || a.seq - b.seq);
    },

    histogramRanks(runDir: string, key: string): number[] {
      return [...(keyInfos(runDir, "histogram").find((k) => k.key === key)?.ranks ?? [])];
    },

    config(runDir: string): Record<string, unknown> {
      requireStore(runDir);
      return store.config(runDir);
    },

    systemKeys(runDir: string): string[] {
      return keyInfos(runDir, "system").map((k) => k.key);
    },

    system(runDir, key, query): SeriesData {
      return toSeriesData(
        readSeries(runDir, key, {
          kind: "system",
          x: "wall",
          ...window(query),
          ...(query.maxPoints !== undefined ? { maxPoints: query.maxPoints } : {}),
        }),
      );
    },

    alerts(runDir: string, query: { after?: number; limit: number }): AlertEntry[] {
      requireStore(runDir);
      return store.alerts(runDir, query);
    },

    lastValues(runDir: string): Record<string, number> {
      requireStore(runDir);
      const out: Record<string, number> = {};
      for (const v of store.lastValues(runDir)) out[v.key] = v.value;
      return out;
    },

    ranks(runDir: string, query: { maxFlushes: number }): RanksView {
      requireStore(runDir);
      return ranksView(store.rankTiming(runDir, { maxFlushes: query.maxFlushes }));
    },

    close(): void {
      index.close();
      store.closeStores();
    },
  };
}
