/**
 * The dashboard's data from the team server's PostgreSQL: the same `DashboardSource` as a local
 * root, for the runs of one project. A run's handle is its row id, found only within the project,
 * so no request of project A can name a run of B. Series are read from their chunks with the
 * store's own downsampling (`readChunkedSeries` over chunks fetched in two queries), so both
 * sources draw the same points. Every query is parameterised.
 */
import type pg from "pg";
import { compareLines } from "../core/rank-identity.js";
import {
  GLOBAL_RANK,
  SERIES_KINDS,
  type AlertEntry,
  type HistogramEntry,
  type KeyInfo,
  type KeyKind,
  type SeriesResult,
} from "../store/read-types.js";
import { readChunkedSeries } from "../store/series-read.js";
import { histogramOfJson } from "../store/store-reader.js";
import { DEFAULT_MAX_POINTS } from "../store/store-reader.js";
import { isRecord } from "../core/json.js";
import { parseAlertEvent } from "../core/alert-json.js";
import { pathSegmentProblem } from "../run/run-dir.js";
import { HttpError } from "../ui/security.js";
import { TurnBatch } from "./turn-batch.js";
import { fetchChunks } from "./chunk-fetch.js";
import type {
  DashboardSource,
  RunBytes,
  RunDetails,
  RunQuery,
  RunsPage,
  SampleRow,
  SeriesData,
  StreamData,
  TraceFile,
  TraceFileEntry,
} from "../ui/source.js";
import { streamRanks } from "../ui/source.js";
import { summaryOf } from "../ui/run-query.js";
import { LAST_VALUES_SQL, runsSql } from "./run-filter.js";
import { ranksView, type RanksView } from "../ui/ranks-view.js";
import { readRankTiming } from "./rank-timing-read.js";
import { listFiles, logFileBytes, traceFileOf } from "./run-files-read.js";
import { type RunRow, toLabelled } from "./run-rows.js";

const KINDS: readonly KeyKind[] = [...SERIES_KINDS, "sample", "histogram"];

function isKind(kind: string): kind is KeyKind {
  return KINDS.some((k) => k === kind);
}

function numericCursor(raw: string | undefined, name: string): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n))
    throw new HttpError(
      400,
      `${name} must be ${name === "after" ? "a cursor from an earlier answer" : "a step number"}, got ${JSON.stringify(raw.slice(0, 40))}`,
    );
  return n;
}

function toSeriesData(result: SeriesResult): SeriesData {
  return {
    steps: result.points.map((p) => p.step),
    times: result.points.map((p) => p.wall),
    values: result.points.map((p) => p.value),
    cursor: result.cursor === null ? null : String(result.cursor),
    downsampled: result.downsampled,
  };
}

/** One line of a series (its lowest line when `rank` is undefined), a window read the way the local store reads it. */
async function read(
  pool: pg.Pool,
  handle: string,
  key: string,
  kind: "scalar" | "stream" | "system",
  rank: number | undefined,
  query: { after?: string; before?: string; maxPoints?: number },
): Promise<SeriesResult> {
  const after = numericCursor(query.after, "after");
  const before = numericCursor(query.before, "before");
  const maxPoints = query.maxPoints ?? DEFAULT_MAX_POINTS;
  const from = after ?? -Infinity;
  const to = before ?? Infinity;
  const {
    keyId: id,
    rank: r,
    reads,
  } = await fetchChunks(pool, { runId: Number(handle), kind, key, rank }, from, to, maxPoints);
  const x = kind === "scalar" ? "step" : "wall";
  return readChunkedSeries(reads, kind === "scalar" ? "scalar" : "stream", {
    key,
    keyId: id,
    rank: r,
    x,
    window: { from, to, after },
    maxPoints,
  });
}

/** A source over the runs of project `projectId`. */
export function createPostgresSource(pool: pg.Pool, projectId: number): DashboardSource {
  const runId = (handle: string): number => Number(handle);

  /**
   * Every key of a run, all kinds; the runs asked in one turn of the event loop share one query
   * (`/api/keys` asks for four kinds of many runs at once: one query, not four per run).
   */
  const keysOfRuns = new TurnBatch<number, KeyInfo[]>(async (ids) => {
    const result = await pool.query<{
      run_id: number;
      key: string;
      kind: string;
      reduce: string | null;
      ranks: number[];
    }>(
      `SELECT k.run_id, k.key, k.kind, k.reduce, array_agg(s.rank ORDER BY s.rank) AS ranks FROM keys k JOIN series s ON s.key_id = k.id
       WHERE k.run_id = ANY($1::bigint[]) GROUP BY k.id ORDER BY k.run_id, k.key`,
      [ids],
    );
    const byRun = new Map<number, KeyInfo[]>(ids.map((id) => [id, []]));
    // Lines in the store's order (docs/DESIGN.md, "Identity"): global, ranks, controller, threads.
    for (const r of result.rows)
      if (isKind(r.kind))
        byRun
          .get(Number(r.run_id))
          ?.push({ key: r.key, kind: r.kind, reduce: r.reduce, ranks: [...r.ranks].sort(compareLines) });
    return byRun;
  });
  const allKeys = async (handle: string): Promise<KeyInfo[]> => (await keysOfRuns.get(runId(handle))) ?? [];
  /** Runs of the project by name, those asked in one turn in one query. */
  const runIds = new TurnBatch<string, string>(async (names) => {
    const result = await pool.query<{ id: string; run_key: string }>(
      "SELECT id::text AS id, run_key FROM runs WHERE project_id = $1 AND run_key = ANY($2::text[])",
      [projectId, names],
    );
    return new Map(result.rows.map((r) => [r.run_key, r.id]));
  });
  /** Runs' rank names, those asked in one turn in one query. */
  const rankNamesOf = new TurnBatch<number, unknown>(async (ids) => {
    const result = await pool.query<{ id: number; rank_names: unknown }>(
      "SELECT id, rank_names FROM runs WHERE id = ANY($1::bigint[])",
      [ids],
    );
    return new Map(result.rows.map((r) => [Number(r.id), r.rank_names]));
  });

  async function keysOf(handle: string, kind: KeyKind): Promise<KeyInfo[]> {
    return (await allKeys(handle)).filter((k) => k.kind === kind);
  }

  return {
    // Runs asked in one turn are one query each for their ids, keys and rank names (`TurnBatch`).
    concurrentRuns: 50,
    async resolveRun(run: string | null): Promise<string> {
      if (run === null || run === "")
        throw new HttpError(400, "missing the run parameter (experiment/trial, as /api/runs lists it)");
      const parts = run.split("/");
      if (parts.length > 3 || parts.some((p) => pathSegmentProblem(p) !== null)) {
        throw new HttpError(
          400,
          "the run parameter must be experiment/trial as /api/runs lists it: one to three folder names joined by '/', URL-encoded as UTF-8",
        );
      }
      const id = await runIds.get(run);
      if (id === undefined) throw new HttpError(404, `no run ${JSON.stringify(run)} in this project`);
      return id;
    },

    async listRuns(query: RunQuery): Promise<RunsPage> {
      const { sql, params, countSql, countParams } = runsSql(projectId, query);
      const [rows, count] = await Promise.all([
        pool.query<RunRow>(sql, params),
        pool.query<{ n: number }>(countSql, countParams),
      ]);
      const runs = rows.rows.map(toLabelled);
      const total = count.rows[0]?.n ?? 0;
      if (query.summary !== true || runs.length === 0) return { runs, total };
      const last = await pool.query<{ run_id: number; key: string; last_value: number | null }>(LAST_VALUES_SQL, [
        rows.rows.map((r) => r.id),
      ]);
      const byRun = new Map<number, Record<string, number>>();
      for (const r of last.rows) {
        const values = byRun.get(r.run_id) ?? {};
        values[r.key] = r.last_value ?? NaN;
        byRun.set(r.run_id, values);
      }
      return {
        runs: runs.map((run, i) => ({
          ...run,
          summary: summaryOf(byRun.get(rows.rows[i]?.id ?? -1) ?? {}, query.internal === true),
        })),
        total,
      };
    },

    keys: (handle) => keysOf(handle, "scalar"),

    async rankNames(handle: string): Promise<Record<string, string>> {
      const names = await rankNamesOf.get(runId(handle));
      const out: Record<string, string> = {};
      if (isRecord(names))
        for (const [k, v] of Object.entries(names)) if (k !== String(GLOBAL_RANK) && typeof v === "string") out[k] = v;
      return out;
    },

    async series(handle, key, query): Promise<SeriesData> {
      return toSeriesData(await read(pool, handle, key, "scalar", query.rank ?? GLOBAL_RANK, query));
    },

    streamKeys: async (handle) => (await keysOf(handle, "stream")).map((k) => k.key),

    async stream(handle, key, query): Promise<StreamData> {
      const info = (await keysOf(handle, "stream")).find((k) => k.key === key);
      if (info === undefined) throw new HttpError(404, `this run has no stream key ${JSON.stringify(key)}`);
      const cursors = new Map<number, number>();
      for (const part of (query.after ?? "").split(",").filter((p) => p !== "")) {
        const [r, seq] = part.split(":").map(Number);
        if (r === undefined || seq === undefined || !Number.isInteger(r) || !Number.isFinite(seq))
          throw new HttpError(
            400,
            `after must be a cursor from an earlier answer (rank:seq,…), got ${JSON.stringify(query.after?.slice(0, 80))}`,
          );
        cursors.set(r, seq);
      }
      const ranks = streamRanks(info.ranks, query.rank);
      const perRank = Math.max(
        SERIES_KINDS.length,
        Math.floor((query.maxPoints ?? DEFAULT_MAX_POINTS) / Math.max(1, ranks.length)),
      );
      const out: StreamData = { key, ranks: [], steps: [], times: [], values: [], cursor: null };
      for (const rank of ranks) {
        const after = cursors.get(rank);
        const result = await read(pool, handle, key, "stream", rank, {
          maxPoints: perRank,
          ...(after !== undefined ? { after: String(after) } : {}),
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

    async samples(handle: string): Promise<SampleRow[]> {
      const result = await pool.query<{ key: string; rank: number; step: number; data: string }>(
        `SELECT k.key, r.rank, r.step, r.data FROM records r JOIN keys k ON k.id = r.key_id WHERE k.run_id = $1 AND k.kind = 'sample'
         ORDER BY r.src_seq DESC LIMIT 200`,
        [runId(handle)],
      );
      const rows: SampleRow[] = [];
      for (const r of result.rows.reverse()) {
        let records: unknown;
        try {
          records = JSON.parse(r.data);
        } catch {
          records = [];
        }
        for (const record of Array.isArray(records) ? records.filter(isRecord) : [])
          rows.push({ key: r.key, step: r.step, rank: r.rank === GLOBAL_RANK ? null : r.rank, record });
      }
      return rows;
    },

    histogramKeys: async (handle) => (await keysOf(handle, "histogram")).map((k) => k.key),

    async histograms(handle: string, key: string, limit: number, rank?: number): Promise<HistogramEntry[]> {
      const result = await pool.query<{ src_seq: number; rank: number; step: number; wall: number; data: string }>(
        `SELECT r.src_seq, r.rank, r.step, r.wall, r.data FROM records r JOIN keys k ON k.id = r.key_id
         WHERE k.run_id = $1 AND k.kind = 'histogram' AND k.key = $2 AND ($4::int IS NULL OR r.rank = $4)
         ORDER BY r.src_seq DESC LIMIT $3`,
        [runId(handle), key, limit, rank ?? null],
      );
      // The newest `limit` as the job's store keeps them, drawn by step (the store source's order).
      const entries = result.rows.flatMap((r) => {
        const histogram = histogramOfJson(r.data);
        return histogram === null ? [] : [{ seq: r.src_seq, key, rank: r.rank, step: r.step, wall: r.wall, histogram }];
      });
      return entries.sort((a, b) => a.step - b.step || a.seq - b.seq);
    },

    async histogramRanks(handle: string, key: string): Promise<number[]> {
      return [...((await keysOf(handle, "histogram")).find((k) => k.key === key)?.ranks ?? [])];
    },

    async config(handle: string): Promise<Record<string, unknown>> {
      const result = await pool.query<{ hparams: string }>("SELECT hparams FROM runs WHERE id = $1", [runId(handle)]);
      try {
        const parsed: unknown = JSON.parse(result.rows[0]?.hparams ?? "{}");
        return isRecord(parsed) ? parsed : {};
      } catch {
        return {};
      }
    },

    async alerts(handle: string, query: { after?: number; limit: number }): Promise<AlertEntry[]> {
      // The job's store numbers a run's events (`seq`); the server keeps those numbers, so both sources page alike.
      const result = await pool.query<{ src_seq: number; event: string }>(
        "SELECT src_seq, event FROM alerts WHERE run_id = $1 AND src_seq > $2 ORDER BY src_seq DESC LIMIT $3",
        [runId(handle), query.after ?? 0, query.limit],
      );
      return result.rows.reverse().flatMap((r) => {
        const event = parseAlertEvent(r.event);
        return typeof event === "string" ? [] : [{ seq: r.src_seq, ...event }];
      });
    },

    systemKeys: async (handle) => (await keysOf(handle, "system")).map((k) => k.key),

    async system(handle, key, query): Promise<SeriesData> {
      return toSeriesData(await read(pool, handle, key, "system", undefined, query));
    },

    async lastValues(handle: string): Promise<Record<string, number>> {
      const result = await pool.query<{ key: string; last_value: number | null }>(
        `SELECT DISTINCT ON (k.key) k.key, s.last_value FROM keys k JOIN series s ON s.key_id = k.id
         WHERE k.run_id = $1 AND k.kind = 'scalar' AND s.n > 0 ORDER BY k.key, s.rank`,
        [runId(handle)],
      );
      const out: Record<string, number> = {};
      for (const r of result.rows) out[r.key] = r.last_value ?? NaN;
      return out;
    },

    async runDetails(handle: string): Promise<RunDetails> {
      const result = await pool.query<{
        config_yaml: string | null;
        version_json: string | null;
        tags: string[];
        grp: string | null;
      }>("SELECT config_yaml, version_json, tags, grp FROM runs WHERE id = $1", [runId(handle)]);
      const r = result.rows[0];
      return {
        configYaml: r?.config_yaml ?? null,
        versionJson: r?.version_json ?? null,
        tags: r?.tags ?? [],
        group: r?.grp ?? null,
      };
    },

    traceFiles(handle: string): Promise<TraceFileEntry[]> {
      return listFiles(pool, runId(handle), "traces");
    },

    async ranks(handle: string, query: { maxFlushes: number }): Promise<RanksView> {
      return ranksView(await readRankTiming(pool, runId(handle), query.maxFlushes));
    },

    logFiles(handle: string): Promise<TraceFileEntry[]> {
      return listFiles(pool, runId(handle), "logs");
    },

    logFile(handle: string, name: string | null): RunBytes {
      return logFileBytes(pool, runId(handle), name);
    },

    traceFile(handle: string, name: string | null): Promise<TraceFile> {
      return traceFileOf(pool, runId(handle), name);
    },
  };
}
