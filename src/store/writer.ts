/**
 * The store's writer: everything one process writes into a run's `metrics.db`, one SQLite
 * transaction per call, retried while another process holds the write lock.
 *
 * This file is the SQL writer (the run and its writers, keys, records, documents, transactions).
 * How a series' points become rows and packed chunks is `chunk-packer.ts`; the pure columnar
 * algorithms (grouping by series, sorting, merging, block summaries) are `columns.ts`; every
 * statement is in `writer-statements.ts`, typed; what a writer is given (the batch, its options)
 * is `write-batch.ts`.
 *
 * Each (key, rank) series has one writing process (the controller for `global_reduce`, its rank for
 * the per-rank modes); the writer caches what it knows about its own series and only updates that
 * cache after a commit.
 *
 * This class is synchronous; the `store` backend runs it on a worker thread so the user's loop
 * never waits for SQLite.
 */
import type Database from "better-sqlite3";
import { isRecord, jsonText, parseRecord } from "../core/json.js";
import { packFloat32, toSqlReal } from "./codec.js";
import { ChunkPacker } from "./chunk-packer.js";
import { ColumnBuilder, groupColumns, sortDedupe, type PointColumns } from "./columns.js";
import { hostname } from "node:os";
import { recorderOfLine } from "../core/rank-identity.js";
import { GLOBAL_RANK, HEARTBEAT_MS, isBusyError, withBusyRetry, type KeyKind } from "./schema.js";
import { describeError, reportError } from "../core/diagnostics.js";
import { mergeHyperparams } from "../core/hyperparams.js";
import { openForWriting } from "./connection.js";
import { prepareWriterStatements, type WriterStatements } from "./writer-statements.js";
import type { RankTimingWrite, StoreWriterOptions, WriteBatch, WriterStatus } from "./write-batch.js";

export type {
  ScalarPoint,
  RawPoint,
  SampleWrite,
  SamplesEntry,
  HistogramWrite,
  RankTimingWrite,
  LostRankWrite,
  WriteBatch,
  LineWrite,
  StoreWriterOptions,
  WriterStatus,
} from "./write-batch.js";

/** Keys and series a transaction registered, cached once it commits. */
interface Pending {
  keys: Map<string, number>;
  series: Set<string>;
  /** The rank list the transaction's last rank-timing row follows. */
  rankList?: number;
}

/** Whether a batch holds any data (not only hyperparameters). */
function carriesData(b: WriteBatch): boolean {
  return (
    (b.scalars?.length ?? 0) > 0 ||
    (b.streams?.length ?? 0) > 0 ||
    (b.system?.length ?? 0) > 0 ||
    (b.samples?.length ?? 0) > 0 ||
    (b.histograms?.length ?? 0) > 0 ||
    (b.rankTiming?.length ?? 0) > 0 ||
    b.scalarColumns !== undefined ||
    b.streamColumns !== undefined
  );
}

/** Writes one process's data into a run's store. Create with `StoreWriter.open`. */
export class StoreWriter {
  private readonly keyIds = new Map<string, number>();
  private readonly knownSeries = new Set<string>();
  private readonly sql: WriterStatements;
  private readonly packer: ChunkPacker;
  private readonly writerId: string;
  /** Whether this writer has named its rank in `ranks` on writing data (see `claimRankName`). */
  private rankNameClaimed = false;
  /** The `rank_lists` row of this writer's last rank-timing write. */
  private rankList: number | undefined;
  private closed = false;
  /** Notes `heartbeat_at` every `HEARTBEAT_MS` while open (unref'd: it never keeps a process alive). */
  private heartbeatTimer: NodeJS.Timeout | null = null;

  private constructor(
    private readonly db: Database.Database,
    readonly options: StoreWriterOptions,
  ) {
    this.writerId = `${options.role}:${options.rank}:${process.pid}:${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    this.sql = prepareWriterStatements(db);
    this.packer = new ChunkPacker(this.sql);
  }

  /** Open (creating when needed) the store of `options.runDir` and register this writer in it. */
  static open(options: StoreWriterOptions): StoreWriter {
    const db = openForWriting(options.runDir);
    try {
      const writer = new StoreWriter(db, options);
      writer.register();
      writer.heartbeatTimer = setInterval(() => writer.heartbeat(), HEARTBEAT_MS);
      writer.heartbeatTimer.unref();
      return writer;
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /** Store a batch in one transaction. */
  write(batch: WriteBatch): void {
    this.writeAll([batch]);
  }

  /**
   * Store several batches in one transaction (a writer catching up). The points of one series
   * across the batches are written together (later batches win for a step given twice), so a
   * stream series gets one chunk per transaction rather than one per batch.
   */
  writeAll(batches: readonly WriteBatch[]): void {
    const claim = !this.rankNameClaimed && this.options.claimRankName !== false && batches.some(carriesData);
    this.transaction((pending) => {
      const scalars: PointColumns[] = [];
      const streams: PointColumns[] = [];
      for (const batch of batches) this.apply(pending, batch, scalars, streams);
      for (const g of scalars.length > 0 ? groupColumns(scalars) : []) {
        this.packer.appendScalars(
          this.seriesId(pending, g.key, "scalar", g.rank, g.reduce),
          g.rank,
          sortDedupe(g.steps, g.walls, g.values),
        );
      }
      for (const g of streams.length > 0 ? groupColumns(streams) : [])
        this.packer.appendStream(this.seriesId(pending, g.key, "stream", g.rank, null), g.rank, g);
      if (claim) this.claimRankName();
    });
    if (claim) this.rankNameClaimed = true;
  }

  /**
   * Name this writer's rank in `ranks`, replacing a name another process registered at open. A
   * writer registers its rank's name at open only where there is none; the first one that writes
   * data for the rank names it. So a controller process's own per-rank backend (its identity is
   * rank 0 too) that writes nothing does not rename the rank 0 that does.
   */
  private claimRankName(): void {
    this.nameLine(this.sql.rankReplace, this.options.rank, this.options.rankName, this.options.host);
  }

  /** Name a line in `ranks` (its role and thread decoded from the line itself). */
  private nameLine(
    statement: WriterStatements["rankInsert"],
    line: number,
    name: string,
    host: string | undefined,
  ): void {
    const owner = recorderOfLine(line);
    const global = owner.kind === "global";
    statement.run(
      line,
      line === GLOBAL_RANK ? "global" : name,
      global ? "global" : owner.role,
      global ? 0 : owner.thread,
      host ?? null,
    );
  }

  /** Write a batch's records, and collect its scalar and stream points by series. */
  private apply(pending: Pending, batch: WriteBatch, scalars: PointColumns[], streams: PointColumns[]): void {
    const rank = this.options.rank;
    if (batch.scalars !== undefined && batch.scalars.length > 0) {
      const b = new ColumnBuilder();
      for (const p of batch.scalars) b.add(p.key, p.rank ?? rank, p.step, p.wall, p.value, p.reduce ?? null);
      scalars.push(b.build());
    }
    if (batch.scalarColumns !== undefined) scalars.push(batch.scalarColumns);
    if (batch.streams !== undefined && batch.streams.length > 0) {
      const b = new ColumnBuilder();
      for (const r of batch.streams) b.add(r.key, r.rank ?? rank, r.step, r.wall, r.value);
      streams.push(b.build());
    }
    if (batch.streamColumns !== undefined) streams.push(batch.streamColumns);
    for (const r of batch.system ?? []) {
      const systemRank = r.rank ?? rank;
      this.sql.rawInsert.run(
        this.seriesId(pending, r.key, "system", systemRank, null),
        systemRank,
        r.step,
        r.wall,
        toSqlReal(r.value),
      );
    }
    for (const s of batch.samples ?? []) {
      const sampleRank = s.rank ?? rank;
      const id = this.seriesId(pending, s.key, "sample", sampleRank, "sample");
      this.sql.sampleInsert.run(id, sampleRank, s.step, s.wall, jsonText(s.records));
    }
    for (const h of batch.histograms ?? []) {
      const histogramRank = h.rank ?? rank;
      const id = this.seriesId(pending, h.key, "histogram", histogramRank, "histogram");
      this.sql.histogramInsert.run(id, histogramRank, h.step, h.wall, jsonText(h.histogram));
    }
    if (batch.hyperparams !== undefined) this.mergeConfig("hparams", batch.hyperparams);
    for (const a of batch.alerts ?? [])
      this.sql.alertInsert.run(a.id, a.rule, a.state, a.level, a.step, a.at, jsonText(a));
    for (const line of batch.lines ?? []) this.nameLine(this.sql.rankReplace, line.line, line.name, line.host);
    for (const lost of batch.lostRanks ?? []) {
      if (lost.back === true) this.sql.lostRankBack.run(lost.step, lost.wall, lost.rankName);
      else this.sql.lostRankInsert.run(lost.rank, lost.rankName, lost.step, lost.wall, lost.reason);
    }
    for (const t of batch.rankTiming ?? []) this.writeRankTiming(pending, t);
  }

  /** One flush's per-rank timings: a new `rank_lists` row when its ranks changed, then its row. */
  private writeRankTiming(pending: Pending, t: RankTimingWrite): void {
    if (t.ranks !== undefined)
      pending.rankList = Number(this.sql.rankListInsert.run(JSON.stringify(t.ranks)).lastInsertRowid);
    const list = pending.rankList ?? this.rankList;
    if (list === undefined)
      throw new Error(`per-rank timings of step ${t.step} follow a rank list this writer never wrote`);
    this.sql.rankTimingUpsert.run(
      t.step,
      t.wall,
      list,
      t.report,
      packFloat32(t.stepMs),
      packFloat32(t.latenessMs),
      packFloat32(t.waitMs),
    );
  }

  /**
   * Note that this writer's process is alive (`writers.heartbeat_at`), so a reader can tell a run
   * whose processes died without finishing (`kill -9`, power loss) from a quiet one. A beat that
   * finds the file locked is skipped (the next one comes in `HEARTBEAT_MS`; readers allow six).
   */
  heartbeat(): void {
    if (this.closed) return;
    try {
      this.sql.writerBeat.run(Date.now(), this.writerId);
    } catch (error) {
      if (!isBusyError(error))
        reportError(
          `store.heartbeat:${this.options.runDir}`,
          `could not note the writer's heartbeat in ${this.options.runDir}: ${describeError(error)}`,
        );
    }
  }

  /**
   * Store many points of one scalar series at once (arrays of equal length, in any order; a step
   * given twice keeps its last value). The fast path for bulk writes and imports.
   */
  writeSeries(
    key: string,
    steps: ArrayLike<number>,
    walls: ArrayLike<number>,
    values: ArrayLike<number>,
    options: { rank?: number; reduce?: string } = {},
  ): void {
    if (steps.length !== walls.length || steps.length !== values.length) {
      throw new TypeError(
        `writeSeries("${key}"): steps, walls and values must have the same length, got ${steps.length}, ${walls.length}, ${values.length}`,
      );
    }
    const rank = options.rank ?? this.options.rank;
    const claim = !this.rankNameClaimed && this.options.claimRankName !== false && steps.length > 0;
    this.transaction((pending) => {
      const keyId = this.seriesId(pending, key, "scalar", rank, options.reduce ?? null);
      this.packer.appendScalars(keyId, rank, sortDedupe(steps, walls, values));
      if (claim) this.claimRankName();
    });
    if (claim) this.rankNameClaimed = true;
  }

  /** Store `params` as (part of) the run's hyperparameters / config. */
  writeHyperparams(params: Readonly<Record<string, unknown>>): void {
    this.write({ hyperparams: params });
  }

  /**
   * Mark this writer ended and close the file. The run's status becomes `finished` (or `failed`)
   * once no writer of it is still running (`failed` if any writer failed, else `crashed` if any
   * crashed). `times` replaces the run's start and end (an import: its data's first and last wall
   * times, not when it was imported).
   */
  finish(status: WriterStatus = "finished", times: { startedAt?: number; endedAt?: number } = {}): void {
    if (this.closed) return;
    try {
      this.transaction(() => {
        const now = Date.now();
        this.sql.writerEnd.run(now, status, this.writerId);
        const count = (s: string): number => this.sql.writersWithStatus.get(s)?.n ?? 0;
        if (count("running") === 0)
          this.sql.runEnd.run(count("failed") > 0 ? "failed" : count("crashed") > 0 ? "crashed" : "finished", now, now);
        if (times.startedAt !== undefined && times.endedAt !== undefined)
          this.sql.runTimes.run(times.startedAt, times.endedAt);
      });
    } finally {
      this.close();
    }
  }

  /** Close the file without marking the writer ended (it shows as running while its process lives). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.heartbeatTimer !== null) clearInterval(this.heartbeatTimer);
    this.db.close();
  }

  private register(): void {
    const o = this.options;
    this.transaction(() => {
      const now = Date.now();
      const resumeStep = o.resumeStep ?? 0;
      this.sql.runInsert.run(o.experiment, o.trial, now, now, resumeStep);
      this.sql.runRunning.run(now);
      if (resumeStep > 0) this.sql.runResume.run(resumeStep);
      // An unfinished writer of the same role and rank in another process is a previous attempt
      // (a crash before a resume); in this process it is a second backend, still running.
      this.sql.writersSupersede.run(now, o.role, o.rank, process.pid);
      this.sql.writerInsert.run(this.writerId, o.role, o.rank, o.rankName, process.pid, now, hostname(), now);
      this.nameLine(this.sql.rankInsert, o.rank, o.rankName, o.host);
      if (resumeStep > 0) this.truncateFrom(resumeStep);
    });
  }

  /** Remove this writer's rows at or after `step` (a resume re-does those steps). */
  private truncateFrom(step: number): void {
    const rank = this.options.rank;
    this.sql.pointsDeleteFrom.run(rank, step);
    this.sql.samplesDeleteFrom.run(rank, step);
    this.sql.histogramsDeleteFrom.run(rank, step);
    if (this.options.role === "controller") this.sql.rankTimingDeleteFrom.run(step);
    this.packer.truncateFrom(rank, step);
  }

  private transaction(fn: (pending: Pending) => void): void {
    if (this.closed) throw new Error(`the store writer of ${this.options.runDir} is closed`);
    let pending: Pending = { keys: new Map(), series: new Set() };
    withBusyRetry(() => {
      pending = { keys: new Map(), series: new Set() };
      this.packer.begin();
      this.db
        .transaction(() => {
          fn(pending);
          this.sql.touch.run(Date.now());
        })
        .immediate();
    });
    for (const [k, v] of pending.keys) this.keyIds.set(k, v);
    for (const s of pending.series) this.knownSeries.add(s);
    if (pending.rankList !== undefined) this.rankList = pending.rankList;
    this.packer.committed();
  }

  /** The id of a key of a kind, registering it (and the series for `rank`) when new. */
  private seriesId(pending: Pending, key: string, kind: KeyKind, rank: number, reduce: string | null): number {
    const cacheKey = `${kind}\u0000${key}`;
    let id = this.keyIds.get(cacheKey) ?? pending.keys.get(cacheKey);
    if (id === undefined) {
      this.sql.keyInsert.run(key, kind, reduce);
      const row = this.sql.keySelect.get(key, kind);
      if (row === undefined)
        throw new Error(`the store lost key ${JSON.stringify(key)} (${kind}) inside its own transaction`);
      if (row.reduce === null && reduce !== null) this.sql.keySetReduce.run(reduce, row.id);
      id = row.id;
      pending.keys.set(cacheKey, id);
    }
    const seriesKey = `${id}:${rank}`;
    if (!this.knownSeries.has(seriesKey) && !pending.series.has(seriesKey)) {
      this.sql.seriesInsert.run(id, rank);
      pending.series.add(seriesKey);
    }
    return id;
  }

  private mergeConfig(name: string, params: Readonly<Record<string, unknown>>): void {
    if (!isRecord(params)) {
      throw new TypeError(
        `hyperparameters must be a plain object such as { lr: 0.001 }, got ${JSON.stringify(params)}`,
      );
    }
    const row = this.sql.configSelect.get(name);
    const earlier = row === undefined ? {} : parseRecord(row.value, `the stored ${name}`);
    this.sql.configUpsert.run(name, jsonText(mergeHyperparams(earlier, params)));
  }
}
