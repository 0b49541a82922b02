/**
 * Chunk packing: how the writer turns a series' points into `points` rows and packed `chunks`.
 *
 * A scalar series' new points go in as rows of `points`; once it has `CHUNK_POINTS` rows (or a
 * write brings `MIN_CHUNK_RUN` points at once) they are packed into chunks of float64 blobs with
 * the chunk's min, max, last and pre-aggregated blocks in columns. A point older than the packed
 * part of its series rewrites the chunks it falls in, so a step is never stored twice. Small
 * chunks stay at the end of a series and are merged into full ones before they pile up. A stream
 * series' values go straight into chunks numbered by arrival.
 *
 * The packer caches what it knows about each series (how far it is packed, how many rows it has,
 * where its arrival numbering is); what a transaction learns becomes visible only once it commits
 * (`begin`, then `committed` after the commit; a rolled-back attempt just calls `begin` again).
 */
import { packFloat64, toSqlReal, unpackFloat64 } from "./codec.js";
import {
  blockSummaries,
  concatSeries,
  extremes,
  f64,
  mergeByStep,
  sliceSeries,
  type SeriesColumns,
} from "./columns.js";
import { CHUNK_POINTS } from "./schema.js";
import type { WriterStatements } from "./writer-statements.js";

/** A write with this many new points of one series packs them (with the series' rows) into a chunk. */
const MIN_CHUNK_RUN = 16;

/** Small trailing chunks of a series allowed before they are merged into full ones. */
const MAX_SMALL_CHUNKS = 16;

interface SeriesState {
  /** Highest step packed into chunks (-Infinity when none). */
  readonly packedThrough: number;
  /** Rows in `points` (an upper bound: replaced rows are counted again). */
  readonly rows: number;
  /** Chunks smaller than CHUNK_POINTS after the last full one (merged once there are MAX_SMALL_CHUNKS). */
  readonly smallChunks: number;
}

/** The series' points as stored: its blobs decoded. */
function decodeChunk(c: { steps: Buffer; walls: Buffer; vals: Buffer }): SeriesColumns {
  return { steps: unpackFloat64(c.steps), walls: unpackFloat64(c.walls), values: unpackFloat64(c.vals) };
}

/** Packs series into rows and chunks through a writer's statements (inside its transactions). */
export class ChunkPacker {
  private readonly states = new Map<string, SeriesState>();
  private readonly streamNext = new Map<string, number>();
  private pendingStates = new Map<string, SeriesState>();
  private pendingStreamNext = new Map<string, number>();

  constructor(private readonly sql: WriterStatements) {}

  /** A transaction (or a retry of one) starts: forget what an attempt that rolled back learnt. */
  begin(): void {
    this.pendingStates = new Map();
    this.pendingStreamNext = new Map();
  }

  /** The transaction committed: what it learnt about series holds from now on. */
  committed(): void {
    for (const [k, v] of this.pendingStates) this.states.set(k, v);
    for (const [k, v] of this.pendingStreamNext) this.streamNext.set(k, v);
  }

  /** Forget every cached series state (re-read from the file on next use), e.g. after rows were deleted. */
  forget(): void {
    this.pendingStates.clear();
    this.states.clear();
    this.streamNext.clear();
  }

  /** Add points, sorted by step with one per step, to a scalar series. */
  appendScalars(keyId: number, rank: number, points: SeriesColumns): void {
    const k = `${keyId}:${rank}`;
    let state = this.pendingStates.get(k) ?? this.states.get(k) ?? this.loadState(keyId, rank);
    const { steps, walls, values } = points;
    let start = 0;
    while (start < steps.length && f64(steps, start) <= state.packedThrough) start++;
    if (start > 0) {
      this.rewritePacked(keyId, rank, sliceSeries(points, 0, start));
      state = this.loadState(keyId, rank);
    }
    const n = steps.length - start;
    if (n === 0) {
      this.pendingStates.set(k, state);
      return;
    }
    if (state.rows + n < CHUNK_POINTS && n < MIN_CHUNK_RUN) {
      const upsert = this.sql.pointUpsert;
      for (let i = start; i < steps.length; i++)
        upsert.run(keyId, rank, f64(steps, i), f64(walls, i), toSqlReal(f64(values, i)));
      this.pendingStates.set(k, { ...state, rows: state.rows + n });
      return;
    }
    // Enough for a chunk: pack the rows and the new points together (rows are all newer than chunks).
    let merged = sliceSeries(points, start);
    if (state.rows > 0) {
      const rows = this.sql.pointsOfSeries.all(keyId, rank);
      this.sql.pointsDelete.run(keyId, rank);
      const stored: SeriesColumns = {
        steps: Float64Array.from(rows, (r) => r.step),
        walls: Float64Array.from(rows, (r) => r.wall),
        values: Float64Array.from(rows, (r) => (r.value === null ? NaN : r.value)),
      };
      merged = mergeByStep(stored, merged);
    }
    // Small chunks stay at the end of a series: when they would pile up, or a full chunk is about to
    // follow them, they are merged with the new points into full ones.
    if (state.smallChunks > 0 && (state.smallChunks + 1 >= MAX_SMALL_CHUNKS || merged.steps.length >= CHUNK_POINTS)) {
      const small = this.sql.smallChunks.all(keyId, rank, CHUNK_POINTS, keyId, rank, CHUNK_POINTS);
      for (const c of small) this.sql.chunkDelete.run(c.id);
      merged = concatSeries([...small.map(decodeChunk), merged]);
      state = { ...state, smallChunks: 0 };
    }
    this.insertChunks(keyId, rank, merged);
    const lastPieceSmall = merged.steps.length % CHUNK_POINTS !== 0;
    const fullPieces = Math.floor(merged.steps.length / CHUNK_POINTS);
    this.pendingStates.set(k, {
      packedThrough: f64(merged.steps, merged.steps.length - 1),
      rows: 0,
      smallChunks: (fullPieces > 0 ? 0 : state.smallChunks) + (lastPieceSmall ? 1 : 0),
    });
  }

  /** Stream values of one series, in arrival order: packed into chunks numbered by arrival. */
  appendStream(keyId: number, rank: number, points: SeriesColumns): void {
    const k = `${keyId}:${rank}`;
    const next =
      this.pendingStreamNext.get(k) ?? this.streamNext.get(k) ?? (this.sql.streamNext.get(keyId, rank)?.s ?? -1) + 1;
    const n = points.steps.length;
    for (let start = 0; start < n; start += CHUNK_POINTS) {
      this.insertChunk(keyId, rank, sliceSeries(points, start, Math.min(n, start + CHUNK_POINTS)), next + start);
    }
    this.pendingStreamNext.set(k, next + n);
  }

  /** Remove `rank`'s chunked points at or after `step` (a resume re-does those steps). */
  truncateFrom(rank: number, step: number): void {
    this.sql.chunksDeleteFrom.run(rank, step);
    for (const c of this.sql.chunksAcross.all(rank, step)) {
      const points = decodeChunk(c);
      let keep = 0;
      while (keep < points.steps.length && f64(points.steps, keep) < step) keep++;
      this.sql.chunkDelete.run(c.id);
      // Copies: the decoded arrays are views of the blobs being deleted.
      if (keep > 0)
        this.insertChunk(
          c.key_id,
          rank,
          {
            steps: points.steps.slice(0, keep),
            walls: points.walls.slice(0, keep),
            values: points.values.slice(0, keep),
          },
          c.first_seq,
        );
    }
    this.forget();
  }

  /** What the file says about a series. */
  private loadState(keyId: number, rank: number): SeriesState {
    const packed = this.sql.packedThrough.get(keyId, rank)?.s ?? null;
    const rows = this.sql.rowCount.get(keyId, rank)?.n ?? 0;
    const small = this.sql.smallChunkCount.get(keyId, rank, CHUNK_POINTS, keyId, rank, CHUNK_POINTS)?.n ?? 0;
    return { packedThrough: packed ?? -Infinity, rows, smallChunks: small };
  }

  /** Points at or before the packed part of a series: merge them into the chunks they fall in. */
  private rewritePacked(keyId: number, rank: number, points: SeriesColumns): void {
    const chunks = this.sql.chunksFrom.all(keyId, rank, f64(points.steps, 0));
    const old = concatSeries(chunks.map(decodeChunk));
    for (const c of chunks) this.sql.chunkDelete.run(c.id);
    this.insertChunks(keyId, rank, mergeByStep(old, points));
  }

  private insertChunks(keyId: number, rank: number, points: SeriesColumns): void {
    const n = points.steps.length;
    for (let start = 0; start < n; start += CHUNK_POINTS)
      this.insertChunk(keyId, rank, sliceSeries(points, start, Math.min(n, start + CHUNK_POINTS)));
  }

  private insertChunk(keyId: number, rank: number, points: SeriesColumns, firstSeq: number | null = null): void {
    const { steps, walls, values } = points;
    const n = steps.length;
    const { minAt, maxAt, nans } = extremes(values);
    const at = (a: Float64Array, i: number): number | null => (i < 0 ? null : f64(a, i));
    // Stream steps only grow within a series, but a chunk's step range is kept exact anyway.
    let firstStep = f64(steps, 0);
    let lastStep = f64(steps, n - 1);
    if (firstSeq !== null) {
      for (const s of steps) {
        if (s < firstStep) firstStep = s;
        if (s > lastStep) lastStep = s;
      }
    }
    this.sql.chunkInsert.run(
      keyId,
      rank,
      firstStep,
      lastStep,
      n,
      firstSeq,
      firstSeq === null ? null : firstSeq + n - 1,
      f64(walls, 0),
      f64(walls, n - 1),
      at(values, minAt),
      at(steps, minAt),
      at(walls, minAt),
      at(values, maxAt),
      at(steps, maxAt),
      at(walls, maxAt),
      toSqlReal(f64(values, n - 1)),
      nans,
      packFloat64(blockSummaries(points)),
      packFloat64(steps),
      packFloat64(walls),
      packFloat64(values),
    );
  }
}
