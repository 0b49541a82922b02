/**
 * One ingest batch as a sync pass fills it (`run-sync.ts`): its series segments and their columns,
 * records, alert events, timings, file segments and metadata, the bytes and points it holds, and
 * its encoding in the wire format (`wire.ts`).
 */
import type { SeriesPiece, SeriesRef } from "./read-run.js";
import {
  WIRE_VERSION,
  encodeBatch,
  type AlertHeader,
  type Batch,
  type FileSegment,
  type RecordHeader,
  type RunMeta,
  type SegmentHeader,
  type TimingHeader,
} from "./wire.js";

/** A batch being filled. */
export class BatchBuilder {
  series: SegmentHeader[] = [];
  columns: Batch["columns"] = [];
  records: RecordHeader[] = [];
  alerts: AlertHeader[] = [];
  /** Per-rank timings of consecutive flushes (one window per batch). */
  timings: TimingHeader | undefined;
  files: FileSegment[] = [];
  fileBytes: Buffer[] = [];
  meta: RunMeta | undefined;
  /** What the sync will remember having sent of each scalar series once the server acknowledged this batch. */
  tails = new Map<string, SeriesPiece>();
  bytes = 0;
  points = 0;

  get empty(): boolean {
    return (
      this.series.length === 0 &&
      this.records.length === 0 &&
      this.alerts.length === 0 &&
      this.timings === undefined &&
      this.files.length === 0 &&
      this.meta === undefined
    );
  }

  /** Points of a series past `after`, up to the piece's cursor. */
  addSeries(
    ref: SeriesRef,
    after: number | null,
    piece: { steps: Float64Array; walls: Float64Array; values: Float64Array; cursor: number },
  ): void {
    this.series.push({
      kind: ref.kind,
      key: ref.key,
      reduce: ref.reduce,
      rank: ref.rank,
      after,
      cursor: piece.cursor,
      n: piece.steps.length,
    });
    this.columns.push({ steps: piece.steps, walls: piece.walls, values: piece.values });
    this.bytes += piece.steps.length * 24 + ref.key.length + 80;
    this.points += piece.steps.length;
  }

  /** The last points of a scalar series as the store has them now, replacing those sent before (remembered under `k` once acknowledged). */
  replaceSeries(ref: SeriesRef, now: SeriesPiece, k: string, cursor: number): void {
    this.series.push({
      kind: "scalar",
      key: ref.key,
      reduce: ref.reduce,
      rank: ref.rank,
      after: null,
      cursor: now.steps[now.steps.length - 1] ?? cursor,
      n: now.steps.length,
      replace: true,
    });
    this.columns.push({ steps: now.steps, walls: now.walls, values: now.values });
    this.bytes += now.steps.length * 24 + ref.key.length + 80;
    this.points += now.steps.length;
    this.tails.set(k, now);
  }

  /** The batch in the wire format, for the run `runId` (not yet compressed). */
  encode(runId: string): Buffer {
    return encodeBatch({
      header: {
        v: WIRE_VERSION,
        run: runId,
        ...(this.meta !== undefined ? { meta: this.meta } : {}),
        series: this.series,
        records: this.records,
        ...(this.alerts.length > 0 ? { alerts: this.alerts } : {}),
        ...(this.timings !== undefined ? { timings: this.timings } : {}),
        files: this.files,
      },
      columns: this.columns,
      fileBytes: this.fileBytes,
    });
  }
}
