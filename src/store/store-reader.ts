/**
 * One run's store, open for reading: a read-only connection (WAL: reading never blocks the run's
 * writers) and its prepared statements. The public reading API (`reader.ts`) reaches these through
 * the cache of open readers (`reader-cache.ts`); this class is not a second API. What was stored
 * as text is read back and checked in `stored-values.ts`.
 */
import type Database from "better-sqlite3";
import { resolve } from "node:path";
import { parseRecord } from "../core/json.js";
import { parseAlertEvent } from "../core/alert-json.js";
import { fromSqlReal } from "./codec.js";
import { openForReading } from "./connection.js";
import { POINTS_PER_BUCKET } from "./downsample.js";
import { compareLines, lineLabel, recorderOfLine } from "../core/rank-identity.js";
import {
  type AlertEntry,
  type AlertsOptions,
  GLOBAL_RANK,
  SERIES_KINDS,
  type HistogramEntry,
  type KeyInfo,
  type KeyKind,
  type LastValue,
  type LostRank,
  type RankInfo,
  type RankTimingOptions,
  type RankTimingWindow,
  type RecordsOptions,
  type RunStatus,
  type RunSummary,
  type SampleEntry,
  type SeriesColumnsOptions,
  type SeriesColumnsResult,
  type SeriesOptions,
  type SeriesResult,
} from "./read-types.js";
import {
  prepareAlertsStatements,
  prepareLivenessStatements,
  prepareReaderStatements,
  type AlertsStatements,
  type LivenessStatements,
  type ReaderStatements,
  type RecordRow,
  type RunningWriterRow,
} from "./reader-statements.js";
import { writerGone } from "./liveness.js";
import { withBusyRetry } from "./schema.js";
import { readChunkedSeries, readRawSeries, readSeriesColumns } from "./series-read.js";
import { readRankTiming } from "./rank-timing.js";
import { isKeyKind, isRunStatus, parseHistogram, parseSampleRecords } from "./stored-values.js";

export { histogramOfJson } from "./stored-values.js";

/** Default `maxPoints` of `series`. */
export const DEFAULT_MAX_POINTS = 2000;

/** 2 when the file has the writers' heartbeat column and the `lost_ranks` table. */
const LIVENESS_PROBE = `SELECT (SELECT count(*) FROM pragma_table_info('writers') WHERE name = 'heartbeat_at')
  + (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'lost_ranks') AS n`;

/** The last time a writer was seen alive: its heartbeat, else when it started. */
function lastSign(w: RunningWriterRow): number | null {
  return w.heartbeat_at ?? w.started_at;
}

/** Reads one run's store. */
export class RunReader {
  readonly runDir: string;
  private readonly db: Database.Database;
  /** Prepared once a writer has created the tables (see `ready`). */
  private sql: ReaderStatements | null = null;
  /** The alerts statement, once the table exists (`null` until then: asked again next time). */
  private alertsSql: AlertsStatements | null = null;
  /** Prepared once the file has schema version 2 (heartbeats, lost ranks). */
  private live: LivenessStatements | null = null;

  constructor(runDir: string) {
    this.runDir = resolve(runDir);
    this.db = openForReading(this.runDir);
  }

  /**
   * The statements, once a writer has created the tables. A writer creates the file and its tables
   * in one go, but a reader can open the file in between; until then the store reads as empty.
   */
  private ready(): ReaderStatements | null {
    if (this.sql !== null) return this.sql;
    const version = withBusyRetry(() => this.db.pragma("user_version", { simple: true }));
    if (typeof version === "number" && version >= 1) this.sql = prepareReaderStatements(this.db, version);
    return this.sql;
  }

  /**
   * The liveness statements, once the file has writers' heartbeats and `lost_ranks` (a file of an
   * older version has neither until a new writer opens it, which may happen while it is read).
   */
  private liveness(): LivenessStatements | null {
    if (this.live !== null) return this.live;
    const has = withBusyRetry(() => this.db.prepare<[], { n: number }>(LIVENESS_PROBE).get());
    if (has !== undefined && has.n === 2) this.live = prepareLivenessStatements(this.db);
    return this.live;
  }

  /**
   * The run's metadata. A run still marked `running` whose writers' processes are all gone (see
   * `liveness.ts`) reads `crashed` when the controller's was among them or when no writer of the
   * run ever ended, else as its other writers ended (a rank whose process died is then a lost
   * rank); the file is not changed.
   */
  runInfo(): RunSummary {
    const sql = this.ready();
    const row = sql === null ? undefined : withBusyRetry(() => sql.run.get());
    if (row === undefined) {
      return {
        runDir: this.runDir,
        experiment: null,
        trial: null,
        status: "unknown",
        startedAt: null,
        endedAt: null,
        updatedAt: null,
        resumeStep: 0,
        lostRanks: [],
      };
    }
    const summary: RunSummary = {
      runDir: this.runDir,
      experiment: row.experiment,
      trial: row.trial,
      status: isRunStatus(row.status) ? row.status : "unknown",
      startedAt: row.started_at,
      endedAt: row.ended_at,
      updatedAt: row.updated_at,
      resumeStep: row.resume_step,
    };
    const live = this.liveness();
    if (live === null) return { ...summary, lostRanks: [] };
    const lostRanks: LostRank[] = withBusyRetry(() => live.lostRanks.all()).map((r) => ({
      rank: r.rank,
      rankName: r.rank_name,
      step: r.step,
      wall: r.wall,
      reason: r.reason,
      backStep: r.back_step,
    }));
    if (summary.status !== "running") return { ...summary, lostRanks };
    const running = withBusyRetry(() => live.runningWriters.all());
    const now = Date.now();
    const dead = running.filter((w) =>
      writerGone({ pid: w.pid, host: w.host, startedAt: w.started_at, heartbeatAt: w.heartbeat_at }, now),
    );
    // A rank writer in the controller's own process (its per-rank backends) is the controller, not a lost rank.
    const controllers = new Set(
      running.filter((w) => w.role === "controller").map((w) => `${w.pid ?? ""}@${w.host ?? ""}`),
    );
    for (const w of dead) {
      const rankName = w.rank_name ?? `rank${w.rank}`;
      if (
        w.role !== "rank" ||
        controllers.has(`${w.pid ?? ""}@${w.host ?? ""}`) ||
        lostRanks.some((l) => l.rankName === rankName && l.backStep === null)
      )
        continue;
      lostRanks.push({
        rank: w.rank,
        rankName,
        step: null,
        wall: lastSign(w) ?? now,
        reason: "its process ended without finishing (seen by the reader)",
        backStep: null,
      });
    }
    if (running.length === 0 || dead.length < running.length) return { ...summary, lostRanks };
    const ended = new Map(withBusyRetry(() => live.endedWriters.all()).map((r) => [r.status, r.n] as const));
    // Crashed: the controller died, a writer ended by a signal, or no writer ever ended (every process of the run died).
    const status: RunStatus =
      dead.some((w) => w.role === "controller") || (ended.get("crashed") ?? 0) > 0 || ended.size === 0
        ? "crashed"
        : (ended.get("failed") ?? 0) > 0
          ? "failed"
          : "finished";
    const endedAt = Math.max(summary.updatedAt ?? 0, ...dead.map((w) => lastSign(w) ?? 0));
    return { ...summary, status, endedAt: endedAt > 0 ? endedAt : null, lostRanks };
  }

  /** Every key of the run (optionally of one kind), sorted by key, with the ranks that have it. */
  keys(kind?: KeyKind): KeyInfo[] {
    const sql = this.ready();
    if (sql === null) return [];
    const rows = withBusyRetry(() => (kind === undefined ? sql.keys.all() : sql.keysOfKind.all(kind)));
    const out: KeyInfo[] = [];
    for (const r of rows) {
      // A kind this version does not know (a newer writer's) is left out rather than mislabelled.
      if (!isKeyKind(r.kind)) continue;
      out.push({
        key: r.key,
        kind: r.kind,
        reduce: r.reduce,
        ranks: r.ranks.split(",").map(Number).sort(compareLines),
      });
    }
    return out;
  }

  /** The lines of the run, in line order, with their names (`global` for −1) and who they are. */
  ranks(): RankInfo[] {
    const sql = this.ready();
    if (sql === null) return [];
    return withBusyRetry(() => sql.ranks.all()).map((r) => {
      const owner = recorderOfLine(r.rank);
      const role =
        r.role === "controller" || r.role === "rank" ? r.role : owner.kind === "global" ? "global" : owner.role;
      return {
        rank: r.rank,
        rankName: r.rank_name ?? `rank${r.rank}`,
        role,
        thread: r.thread ?? (owner.kind === "global" ? 0 : owner.thread),
        host: r.host,
        label: lineLabel(r.rank),
      };
    });
  }

  /**
   * The points of one series, downsampled to about `maxPoints` (min, max and last of each bucket,
   * so spikes stay visible), and a cursor for asking only for newer points next time.
   */
  series(key: string, options: SeriesOptions = {}): SeriesResult {
    const kind = options.kind ?? "scalar";
    if (!SERIES_KINDS.includes(kind))
      throw new TypeError(`series kind ${JSON.stringify(kind)} is not valid; valid: ${SERIES_KINDS.join(", ")}`);
    const x = options.x ?? (kind === "scalar" ? "step" : "wall");
    if (x !== "step" && x !== "wall")
      throw new TypeError(`series x ${JSON.stringify(x)} is not valid; valid: step, wall`);
    const maxPoints = options.maxPoints ?? DEFAULT_MAX_POINTS;
    if (!(maxPoints === Infinity || (Number.isInteger(maxPoints) && maxPoints >= POINTS_PER_BUCKET))) {
      throw new TypeError(`maxPoints must be an integer >= ${POINTS_PER_BUCKET} or Infinity, got ${String(maxPoints)}`);
    }
    if (options.after !== undefined && typeof options.after !== "number")
      throw new TypeError(`after must be a cursor number from an earlier series() call, got ${String(options.after)}`);
    if (options.before !== undefined && (typeof options.before !== "number" || Number.isNaN(options.before)))
      throw new TypeError(`before must be a number (a step for scalars), got ${String(options.before)}`);
    const window = { from: options.after ?? -Infinity, to: options.before ?? Infinity, after: options.after };
    const sql = this.ready();
    const keyRow = sql === null ? undefined : withBusyRetry(() => sql.keyId.get(key, kind));
    if (sql === null || keyRow === undefined)
      throw new Error(`run ${this.runDir} has no ${kind} key ${JSON.stringify(key)}`);
    const keyId = keyRow.id;
    const rank = options.rank ?? withBusyRetry(() => sql.lowestRank.get(keyId))?.r ?? GLOBAL_RANK;
    const read = { key, keyId, rank, x, window, maxPoints };
    return withBusyRetry(() =>
      this.db.transaction(() =>
        kind === "system" ? readRawSeries(sql, kind, read) : readChunkedSeries(sql, kind, read),
      )(),
    );
  }

  /** The next points of one series past a cursor, every one, as float64 columns (see `SeriesColumnsOptions`). */
  seriesColumns(key: string, options: SeriesColumnsOptions = {}): SeriesColumnsResult {
    const kind = options.kind ?? "scalar";
    if (!SERIES_KINDS.includes(kind))
      throw new TypeError(`series kind ${JSON.stringify(kind)} is not valid; valid: ${SERIES_KINDS.join(", ")}`);
    const limit = options.limit ?? 65_536;
    if (!Number.isInteger(limit) || limit < 1)
      throw new TypeError(`limit must be a positive integer, got ${String(limit)}`);
    if (options.after !== undefined && (typeof options.after !== "number" || Number.isNaN(options.after)))
      throw new TypeError(`after must be a cursor number, got ${String(options.after)}`);
    const sql = this.ready();
    const keyRow = sql === null ? undefined : withBusyRetry(() => sql.keyId.get(key, kind));
    if (sql === null || keyRow === undefined)
      throw new Error(`run ${this.runDir} has no ${kind} key ${JSON.stringify(key)}`);
    const keyId = keyRow.id;
    const rank = options.rank ?? withBusyRetry(() => sql.lowestRank.get(keyId))?.r ?? GLOBAL_RANK;
    const read = { key, keyId, rank, after: options.after, limit };
    return withBusyRetry(() => this.db.transaction(() => readSeriesColumns(sql, kind, read))());
  }

  /**
   * The last point of every scalar key: of its global line, else of its lowest rank's (a run
   * table's summary column). Reads one row or chunk summary per key, never the points.
   */
  lastValues(): LastValue[] {
    const sql = this.ready();
    if (sql === null) return [];
    const out: LastValue[] = [];
    for (const r of withBusyRetry(() => sql.lastValues.all())) {
      const fromRows = r.pstep !== null && (r.cstep === null || r.pstep >= r.cstep);
      const step = fromRows ? r.pstep : r.cstep;
      if (step === null) continue;
      out.push({ key: r.key, rank: r.rank, step, value: fromSqlReal(fromRows ? r.pvalue : r.cvalue) });
    }
    return out;
  }

  /** Sample records (`Reduce.SAMPLE`), newest last; all keys unless `key` is given. */
  samples(key?: string, options: RecordsOptions = {}): SampleEntry[] {
    return this.records("sample", key, options).map(({ json, ...base }) => ({
      ...base,
      records: parseSampleRecords(json, base.key),
    }));
  }

  /** Histograms (`Reduce.HISTOGRAM`), newest last; all keys unless `key` is given. */
  histograms(key?: string, options: RecordsOptions = {}): HistogramEntry[] {
    return this.records("histogram", key, options).map(({ json, ...base }) => ({
      ...base,
      histogram: parseHistogram(json, base.key),
    }));
  }

  /** Per-rank timings of the newest flushes (the Ranks view); empty when the run has none. */
  rankTiming(options: RankTimingOptions = {}): RankTimingWindow {
    return readRankTiming(this.db, options);
  }

  /** The run's hyperparameters / config, as logged (`{}` when none). */
  config(): Record<string, unknown> {
    const sql = this.ready();
    const row = sql === null ? undefined : withBusyRetry(() => sql.config.get("hparams"));
    return row === undefined ? {} : parseRecord(row.value, `the hyperparameters of ${this.runDir}`);
  }

  /**
   * The run's alert events after `options.after`, in order: the newest `options.limit` (1000), or
   * with `oldest` the oldest (a reader paging forward). A stored event that is not one is left out.
   */
  alerts(options: AlertsOptions = {}): AlertEntry[] {
    if (this.ready() === null) return [];
    this.alertsSql ??= withBusyRetry(() => prepareAlertsStatements(this.db));
    const sql = this.alertsSql;
    if (sql === null) return [];
    const statement = options.oldest === true ? sql.oldest : sql.newest;
    const rows = withBusyRetry(() => statement.all(options.after ?? 0, options.limit ?? 1000));
    if (options.oldest !== true) rows.reverse();
    const out: AlertEntry[] = [];
    for (const row of rows) {
      const event = parseAlertEvent(row.event);
      if (typeof event !== "string") out.push({ seq: row.seq, ...event });
    }
    return out;
  }

  /** Close the connection. */
  close(): void {
    this.db.close();
  }

  private records(kind: "sample" | "histogram", key: string | undefined, options: RecordsOptions): RecordRow[] {
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1)
      throw new TypeError(`limit must be a positive integer, got ${String(limit)}`);
    const sql = this.ready();
    if (sql === null) return [];
    const params = { kind, after: options.after ?? -1, rank: options.rank ?? null, limit };
    const rows = withBusyRetry(() =>
      kind === "sample"
        ? key === undefined
          ? sql.samples.all(params)
          : sql.samplesOfKey.all({ ...params, key })
        : key === undefined
          ? sql.histograms.all(params)
          : sql.histogramsOfKey.all({ ...params, key }),
    );
    return rows.reverse();
  }
}
