/**
 * Sending one run's store to a team server: the live sync of a job (on a thread of its own,
 * `live.ts`) and `rankscope sync` both run passes of a `RunSync`.
 *
 * A pass reads what the store committed past the server's cursors (`read-run.ts`), packs it into
 * batches of at most `maxBatchBytes` (`wire.ts`), gzips each (on libuv's pool) and sends it,
 * retried with a deadline (`client.ts`); the cursors move only when the server acknowledged. The
 * cursors come from the server (`GET /api/ingest/v1/state`), so a restarted job, a second
 * `rankscope sync` or a sync interrupted half-way continues from the last acknowledged point, and
 * a batch sent twice is applied once (the server keeps only what lies past its cursor). A 409
 * (the server is elsewhere: another syncer, a restored database) re-reads the state.
 *
 * Memory is bounded by one batch plus one read (`READ_POINTS` points of one series). The batch
 * being filled is `batch-builder.ts`; the server's cursors, `cursors.ts`.
 */
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { warn } from "../core/diagnostics.js";
import { isRecord } from "../core/json.js";
import { STRING_LIMITS, stringProblem } from "../core/string-limits.js";
import { concatSeries } from "../store/columns.js";
import { runInfo } from "../store/reader.js";
import { SyncClient, SyncConflict, type SyncTarget } from "./client.js";
import {
  listFiles,
  listSeries,
  readAlerts,
  readFileBytes,
  readMeta,
  readPiece,
  readRange,
  readRecords,
  readTimings,
  type SeriesPiece,
  type SeriesRef,
} from "./read-run.js";
import { BatchBuilder } from "./batch-builder.js";
import { parseState, seriesKey, type Cursors } from "./cursors.js";
import { metaHash, type RunMeta } from "./wire.js";

const gzipAsync = promisify(gzip);

/** The last points of each scalar series sent are re-read each pass: a step written again after it was sent is sent again. */
const LOOKBACK_POINTS = 8;

/** Options of a run's sync. */
interface RunSyncOptions extends SyncTarget {
  /** The run directory (holding `metrics.db`). */
  readonly runDir: string;
  /** The run's id on the server, `experiment/trial` (default: from the store, else the directory's last two names). */
  readonly runId?: string;
  /** Raw bytes of one batch at most (default 8 MiB, ~350,000 points). */
  readonly maxBatchBytes?: number;
  /** How long one batch may be retried before the pass gives up (default 60 s). */
  readonly sendDeadlineMs?: number;
  readonly stop?: AbortSignal;
}

/** What a pass did. */
interface PassResult {
  readonly batches: number;
  readonly points: number;
  /** Samples, histograms and alert events sent. */
  readonly records: number;
  readonly fileBytes: number;
  /** True when nothing the store had at the pass's start is left unsent. */
  readonly complete: boolean;
}

/** The batch a pass is filling; `flush` sends it and starts a new one in `b`. */
interface Filling {
  b: BatchBuilder;
  flush(): Promise<void>;
}

/** One run's sync to one server. */
export class RunSync {
  readonly runId: string;
  private readonly client: SyncClient;
  private cursors: Cursors | null = null;
  private sentMetaJson = "";
  private lastUpdatedAt: number | null = null;
  /** Per scalar series, its last points as sent (at most `LOOKBACK_POINTS`). */
  private readonly sentTails = new Map<string, SeriesPiece>();
  /** Tails of batches whose answer never came: the server may have applied them or not. */
  private readonly unacked = new Map<string, SeriesPiece>();
  private readonly maxBatchBytes: number;
  private readonly sendDeadlineMs: number;
  /** Totals over this sync's life; `refused`: parts left out for a string past `STRING_LIMITS` (here or by the server). */
  readonly totals = { batches: 0, points: 0, records: 0, fileBytes: 0, conflicts: 0, refused: 0 };
  /** The refused parts, named (`part: reason`), the first 100. */
  readonly refusedParts: string[] = [];
  private readonly refusedSeen = new Set<string>();

  constructor(private readonly options: RunSyncOptions) {
    this.runId = options.runId ?? RunSync.runIdOf(options.runDir);
    this.client = new SyncClient(options, options.stop);
    this.maxBatchBytes = options.maxBatchBytes ?? 8 * 1024 * 1024;
    this.sendDeadlineMs = options.sendDeadlineMs ?? 60_000;
  }

  /** A run's id: `experiment/trial` as its store names it, else its directory's last two names. */
  static runIdOf(runDir: string): string {
    const parts = runDir.split(/[\\/]+/).filter((p) => p !== "");
    const info = runInfo(runDir);
    const experiment = info.experiment ?? parts[parts.length - 2] ?? "default";
    const trial = info.trial ?? parts[parts.length - 1] ?? "run";
    return `${experiment}/${trial}`;
  }

  /**
   * Send what the store holds past the server's cursors. With `full`, every series is read even
   * when the store says nothing changed since the last pass (a final pass, `rankscope sync`).
   */
  async pass(full = false): Promise<PassResult> {
    try {
      return await this.tryPass(full);
    } catch (error) {
      if (!(error instanceof SyncConflict)) throw error;
      // The server is elsewhere than we thought: start over from its state, once.
      this.totals.conflicts++;
      this.cursors = null;
      this.sentMetaJson = "";
      return this.tryPass(true);
    }
  }

  private async state(): Promise<Cursors> {
    if (this.cursors !== null) return this.cursors;
    const fresh = parseState(
      await this.client.call("GET", "api/ingest/v1/state", { run: this.runId }, undefined, this.sendDeadlineMs),
    );
    // What we remember having sent holds only where the server's cursor is still where we left it.
    // A batch sent without an answer was applied or not: the server's cursor says which tail holds.
    for (const k of new Set([...this.sentTails.keys(), ...this.unacked.keys()])) {
      const cursor = fresh.series.get(k);
      const acked = this.sentTails.get(k);
      const maybe = this.unacked.get(k);
      if (acked !== undefined && acked.cursor === cursor) continue;
      if (maybe !== undefined && maybe.cursor === cursor) this.sentTails.set(k, maybe);
      else this.sentTails.delete(k);
    }
    this.unacked.clear();
    this.cursors = fresh;
    return fresh;
  }

  private async tryPass(full: boolean): Promise<PassResult> {
    const start = { ...this.totals };
    const meta = this.checkedMeta(readMeta(this.options.runDir, this.runId));
    const cursors = await this.resumeIfNeeded(meta);
    const files = listFiles(this.options.runDir);
    const filesChanged = [...files].some(([path, size]) => size > (cursors.files.get(path) ?? 0));
    const storeChanged = full || meta.updatedAt !== this.lastUpdatedAt;
    const batch = this.filling();
    if (JSON.stringify(meta) !== this.sentMetaJson && metaHash(meta) !== cursors.metaHash) batch.b.meta = meta;
    if (storeChanged) {
      await this.addSeriesPieces(batch, cursors);
      await this.addRecords(batch, cursors);
      await this.addAlerts(batch, cursors);
      await this.addTimings(batch, cursors);
    }
    if (filesChanged) await this.addFiles(batch, cursors, files);
    await batch.flush();
    this.lastUpdatedAt = meta.updatedAt;
    return {
      batches: this.totals.batches - start.batches,
      points: this.totals.points - start.points,
      records: this.totals.records - start.records,
      fileBytes: this.totals.fileBytes - start.fileBytes,
      complete: true,
    };
  }

  /** The server's cursors; after a resume (a new `resumeStep`), once the server dropped what comes at or after it. */
  private async resumeIfNeeded(meta: RunMeta): Promise<Cursors> {
    const cursors = await this.state();
    if (meta.resumeStep <= 0 || meta.resumeStep === cursors.resumeStep) return cursors;
    const b = new BatchBuilder();
    b.meta = meta;
    await this.send(b);
    this.sentMetaJson = JSON.stringify(meta);
    this.cursors = null;
    return this.state();
  }

  /** The batch a pass fills, and `flush` to send it (when not empty) and start the next. */
  private filling(): Filling {
    const filling: Filling = {
      b: new BatchBuilder(),
      flush: async () => {
        const b = filling.b;
        if (b.empty) return;
        await this.send(b);
        if (b.meta !== undefined) {
          this.sentMetaJson = JSON.stringify(b.meta);
          if (this.cursors !== null) this.cursors.metaHash = metaHash(b.meta);
        }
        filling.b = new BatchBuilder();
      },
    };
    return filling;
  }

  /** Every series' points past its cursor, one segment per series per batch. */
  private async addSeriesPieces(batch: Filling, cursors: Cursors): Promise<void> {
    for (const ref of listSeries(this.options.runDir)) {
      const keyProblem = stringProblem(ref.key, STRING_LIMITS.name);
      if (keyProblem !== undefined) {
        this.refuse(
          `${ref.kind} series ${JSON.stringify(ref.key.slice(0, 60))}… (rank ${ref.rank})`,
          `its key ${keyProblem}`,
        );
        continue;
      }
      const k = seriesKey(ref.kind, ref.key, ref.rank);
      if (ref.kind === "scalar") this.checkTail(batch.b, ref, k);
      for (let pieces = 0; ; pieces++) {
        const after = cursors.series.get(k) ?? null;
        const piece = readPiece(this.options.runDir, ref, after);
        if (piece === null) break;
        // One segment per series per batch: a long series' next piece goes in the next batch.
        if (pieces > 0) await batch.flush();
        batch.b.addSeries(ref, after, piece);
        cursors.series.set(k, piece.cursor);
        if (ref.kind === "scalar")
          batch.b.tails.set(k, this.tailAfter(batch.b.tails.get(k) ?? this.sentTails.get(k), piece));
        if (batch.b.bytes >= this.maxBatchBytes) await batch.flush();
      }
    }
  }

  /** Samples and histograms past their sequence cursors. */
  private async addRecords(batch: Filling, cursors: Cursors): Promise<void> {
    for (;;) {
      const records = readRecords(this.options.runDir, cursors.records);
      if (records.length === 0) break;
      for (const r of records) {
        cursors.records[r.kind] = Math.max(cursors.records[r.kind] ?? -1, r.seq);
        const keyProblem = stringProblem(r.key, STRING_LIMITS.name);
        if (keyProblem !== undefined) {
          this.refuse(`${r.kind} ${JSON.stringify(r.key.slice(0, 60))}… #${r.seq}`, `its key ${keyProblem}`);
          continue;
        }
        batch.b.records.push(r);
        batch.b.bytes += r.data.length + r.key.length + 64;
        if (batch.b.bytes >= this.maxBatchBytes) await batch.flush();
      }
    }
  }

  /** Alert events past their sequence cursor. */
  private async addAlerts(batch: Filling, cursors: Cursors): Promise<void> {
    for (;;) {
      const alerts = readAlerts(this.options.runDir, cursors.records["alert"] ?? 0);
      if (alerts.length === 0) break;
      for (const a of alerts) {
        batch.b.alerts.push(a);
        batch.b.bytes += a.event.length + 32;
        cursors.records["alert"] = Math.max(cursors.records["alert"] ?? 0, a.seq);
        if (batch.b.bytes >= this.maxBatchBytes) await batch.flush();
      }
    }
  }

  /** Per-rank timings of the flushes past the `timing` cursor (a step), a window of them per batch. */
  private async addTimings(batch: Filling, cursors: Cursors): Promise<void> {
    for (;;) {
      const after = cursors.records["timing"];
      const timings = readTimings(this.options.runDir, after);
      if (timings === undefined) break;
      if (batch.b.timings !== undefined) await batch.flush();
      batch.b.timings = timings;
      batch.b.bytes += timings.stepMs.length * 30 + timings.reports.reduce((n, r) => n + r.length, 0);
      cursors.records["timing"] = timings.steps[timings.steps.length - 1] ?? after ?? -1;
      if (batch.b.bytes >= this.maxBatchBytes) await batch.flush();
    }
  }

  /** The text files' bytes past what the server has, 4 MiB at a time. */
  private async addFiles(batch: Filling, cursors: Cursors, files: Map<string, number>): Promise<void> {
    for (const [path, size] of files) {
      for (let offset = cursors.files.get(path) ?? 0; offset < size;) {
        const bytes = readFileBytes(this.options.runDir, path, offset, Math.min(size - offset, 4 * 1024 * 1024));
        if (bytes.length === 0) break;
        batch.b.files.push({ path, offset, length: bytes.length });
        batch.b.fileBytes.push(bytes);
        batch.b.bytes += bytes.length;
        offset += bytes.length;
        cursors.files.set(path, offset);
        if (batch.b.bytes >= this.maxBatchBytes) await batch.flush();
      }
    }
  }

  /** The last points sent of a scalar series once `piece` is sent after `old`. */
  private tailAfter(old: SeriesPiece | undefined, piece: SeriesPiece): SeriesPiece {
    const all = old === undefined ? piece : { ...concatSeries([old, piece]), cursor: piece.cursor };
    const from = Math.max(0, all.steps.length - LOOKBACK_POINTS);
    return {
      steps: all.steps.slice(from),
      walls: all.walls.slice(from),
      values: all.values.slice(from),
      cursor: piece.cursor,
    };
  }

  /** Take over what another sync of this run remembers having sent (the live sync's last pass). */
  inheritTails(from: RunSync): void {
    for (const [k, v] of from.sentTails) this.sentTails.set(k, v);
    for (const [k, v] of from.unacked) this.unacked.set(k, v);
  }

  /** Re-read the last points sent of a scalar series; when the store has them otherwise now, replace them on the server. */
  private checkTail(b: BatchBuilder, ref: SeriesRef, k: string): void {
    const tail = this.sentTails.get(k);
    if (tail === undefined || tail.steps.length === 0) return;
    const now = readRange(this.options.runDir, ref, tail.steps[0] ?? 0, tail.cursor);
    if (now === null) return;
    const same =
      now.steps.length === tail.steps.length &&
      now.steps.every(
        (s, i) =>
          Object.is(s, tail.steps[i]) &&
          Object.is(now.walls[i], tail.walls[i]) &&
          Object.is(now.values[i], tail.values[i]),
      );
    if (same) return;
    b.replaceSeries(ref, now, k, tail.cursor);
  }

  /**
   * Send one batch until acknowledged. The in-memory cursors were moved as it was built; if it
   * cannot be delivered they are dropped, so the next pass starts from the server's state.
   */
  private async send(b: BatchBuilder): Promise<void> {
    const raw = b.encode(this.runId);
    const body = await gzipAsync(raw, { level: 1 });
    let answer: unknown;
    try {
      answer = await this.client.call("POST", "api/ingest/v1/batch", {}, body, this.sendDeadlineMs);
    } catch (error) {
      this.cursors = null;
      this.sentMetaJson = "";
      for (const [k, tail] of b.tails) this.unacked.set(k, tail);
      throw error;
    }
    for (const [k, tail] of b.tails) {
      this.sentTails.set(k, tail);
      this.unacked.delete(k);
    }
    this.totals.batches++;
    this.totals.points += b.points;
    this.totals.records += b.records.length + b.alerts.length + (b.timings?.steps.length ?? 0);
    this.totals.fileBytes += b.fileBytes.reduce((n, x) => n + x.length, 0);
    // What the server left out of it (a server with other limits than these): named and counted.
    const refused = isRecord(answer) && Array.isArray(answer["refused"]) ? answer["refused"] : [];
    for (const r of refused)
      if (isRecord(r)) this.refuse(`the server: ${String(r["part"])}`, String(r["reason"]), false);
  }

  /** Count and name a part left out (once per part: a series refused stays refused on every pass). */
  private refuse(part: string, reason: string, once = true): void {
    if (once && this.refusedSeen.has(part)) return;
    this.refusedSeen.add(part);
    this.totals.refused++;
    if (this.refusedParts.length < 100) this.refusedParts.push(`${part}: ${reason}`);
    warn(
      "sync.refused",
      `sync of ${this.runId}: ${part} is not sent (${reason}); the rest of the run is (limits: docs/server.md)`,
    );
  }

  /** The run's labels without a string past `STRING_LIMITS` (each left out is named and counted). */
  private checkedMeta(meta: RunMeta): RunMeta {
    const ok = (value: string, part: string, max: number = STRING_LIMITS.name): boolean => {
      const problem = stringProblem(value, max);
      if (problem !== undefined) this.refuse(part, `it ${problem}`);
      return problem === undefined;
    };
    const params: RunMeta["params"] = {};
    for (const [k, v] of Object.entries(meta.params)) {
      const part = `hyperparameter ${JSON.stringify(k.slice(0, 60))}`;
      if (ok(k, part) && (typeof v !== "string" || ok(v, part, STRING_LIMITS.paramValue))) params[k] = v;
    }
    const rankNames: RunMeta["rankNames"] = {};
    for (const [k, v] of Object.entries(meta.rankNames)) if (ok(v, `rank ${k}'s name`)) rankNames[k] = v;
    return {
      ...meta,
      tags: meta.tags.filter((t, i) => ok(t, `tag ${i}`)),
      group: meta.group !== null && ok(meta.group, "the group") ? meta.group : null,
      params,
      rankNames,
    };
  }
}
