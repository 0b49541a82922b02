/**
 * The parts of an ingest batch (`wire.ts` says the format), as types both sides share, and the
 * caps a batch must respect.
 */
import type { LostRank } from "../store/read-types.js";
import { STRING_LIMITS } from "../core/string-limits.js";

/** Format version; the header's `v`. */
export const WIRE_VERSION = 1;
export const MAGIC = 0x31425352; // "RSB1" little-endian

/** Caps a batch must respect (the server refuses more with a 413 or 400). */
export const WIRE_LIMITS = {
  /** Series segments per batch. */
  segments: 20_000,
  /** Points per batch, all segments together. */
  points: 2_000_000,
  records: 20_000,
  /** Alert events per batch. */
  alerts: 20_000,
  /** Flushes of per-rank timings per batch (one window), and the ranks it names. */
  timingFlushes: 2_000,
  timingRanks: 100_000,
  /** Characters of one flush's straggler report (JSON). */
  reportChars: 1_000_000,
  /** Characters of one record's JSON. */
  recordChars: 1_000_000,
  files: 1_000,
  /** Characters of a key, a tag, a group, a rank name (`STRING_LIMITS`, the same everywhere). */
  name: STRING_LIMITS.name,
  /** Header JSON bytes. */
  header: 64 * 1024 * 1024,
} as const;

/** A series kind as stored. */
export type WireSeriesKind = "scalar" | "stream" | "system";
/** A record kind as stored. */
export type WireRecordKind = "sample" | "histogram";

/** Points of one series past `after`, up to `cursor` (positions of the job's store). */
export interface SegmentHeader {
  readonly kind: WireSeriesKind;
  readonly key: string;
  readonly reduce: string | null;
  readonly rank: number;
  /** The cursor this segment continues from (null: the series' start). */
  readonly after: number | null;
  /** The position of its last point. */
  readonly cursor: number;
  /** Points in the segment (its columns are `n` steps, `n` walls, `n` values). */
  readonly n: number;
  /**
   * Scalars only: the points replace what the server holds from the first step to the last (a
   * step the store wrote again after it was sent: two writers of one line, a late answer). Such a
   * segment never moves the cursor.
   */
  readonly replace?: boolean;
}

/** One sample or histogram entry, by the store's sequence number. */
export interface RecordHeader {
  readonly kind: WireRecordKind;
  readonly key: string;
  readonly rank: number;
  readonly seq: number;
  readonly step: number;
  readonly wall: number;
  /** The stored JSON (sample records, or the histogram). */
  readonly data: string;
}

/** One alert event (docs/alerts.md), by the store's sequence number among the run's events. */
export interface AlertHeader {
  readonly seq: number;
  /** The event as the store keeps it (JSON); the server checks it is one (`parseAlertEvent`). */
  readonly event: string;
}

/**
 * Per-rank timings of consecutive flushes (the store's `rank_timing`, docs/stragglers.md): the ranks
 * that appear in them as `[rank, rankName, host]`, and three ranks × flushes matrices, row-major
 * (`value[row * steps.length + column]`), ms, null where a rank has no figure.
 */
export interface TimingHeader {
  readonly ranks: Array<readonly [number, string, string]>;
  /** The flushes' steps, increasing. */
  readonly steps: number[];
  readonly walls: number[];
  /** Each flush's straggler report (JSON, as the store keeps it). */
  readonly reports: string[];
  readonly stepMs: Array<number | null>;
  readonly latenessMs: Array<number | null>;
  readonly waitMs: Array<number | null>;
}

/** Bytes of a run file (a text log, a trace) from `offset`; its bytes follow the columns. */
export interface FileSegment {
  /** Relative to the run directory: `logs/main.log`, `traces/rank-0.jsonl`. */
  readonly path: string;
  readonly offset: number;
  readonly length: number;
}

/** What the dashboard shows of a run besides its series. */
export interface RunMeta {
  readonly experiment: string;
  readonly trial: string;
  readonly status: string;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  readonly updatedAt: number | null;
  readonly resumeStep: number;
  readonly tags: string[];
  readonly group: string | null;
  /** The run config and hyperparameters, flattened (`a.b.c`), secrets redacted: what `/api/runs` filters on. */
  readonly params: Record<string, string | number | boolean | null>;
  /** The logged hyperparameters as the store keeps them (JSON text). */
  readonly hparamsJson: string;
  readonly rankNames: Record<string, string>;
  /** Ranks the run lost (the store's `lost_ranks`, and writers a reader saw die): the dashboard marks them. */
  readonly lostRanks: readonly LostRank[];
  readonly configYaml: string | null;
  readonly versionJson: string | null;
}

/** The JSON part of a batch. */
export interface BatchHeader {
  readonly v: number;
  /** `experiment/trial`: the run's id in its project. */
  readonly run: string;
  readonly meta?: RunMeta;
  readonly series: SegmentHeader[];
  readonly records: RecordHeader[];
  /** Alert events past the server's `alert` cursor (absent: none; a sync from before alerts sends none). */
  readonly alerts?: AlertHeader[];
  /** Per-rank timings of the flushes past the server's `timing` cursor (absent: none). */
  readonly timings?: TimingHeader;
  readonly files: FileSegment[];
}

/** A part of a batch the server left out (a string past `STRING_LIMITS`), and why; the rest lands. */
export interface RefusedPart {
  /** Where it was: `series[3] (scalar "loss…", rank 0)`, `meta.tags[1]`. */
  readonly part: string;
  readonly reason: string;
}

/** A decoded batch: the header, each segment's columns, each file segment's bytes. */
export interface Batch {
  readonly header: BatchHeader;
  readonly columns: { steps: Float64Array; walls: Float64Array; values: Float64Array }[];
  readonly fileBytes: Buffer[];
  /** Decoded only: the parts left out (absent or empty: none). */
  readonly refused?: readonly RefusedPart[];
}

/** What was wrong with a batch; the server answers 400 with the message. */
export class WireError extends Error {}
