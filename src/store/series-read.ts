/**
 * Reading one series out of the store: the points of a window, every one or downsampled, and the
 * cursor for the next read. Scalar and stream series come from packed chunks (and, for scalars,
 * the recent rows); system metrics from their rows.
 */
import { fromSqlReal, unpackFloat64 } from "./codec.js";
import { concatSeries, f64, sliceSeries, type SeriesColumns } from "./columns.js";
import { Downsampler, POINTS_PER_BUCKET } from "./downsample.js";
import type { SeriesColumnsResult, SeriesKind, SeriesPoint, SeriesResult, XAxis } from "./read-types.js";
import type { ChunkMeta, ReaderStatements } from "./reader-statements.js";

/** `(key_id, rank, from, to)`: a series' positions inside an open window. */
type WindowArgs = [keyId: number, rank: number, from: number, to: number];

/**
 * What `readChunkedSeries` reads: the reader's prepared statements, or anything answering the same
 * calls (the team server's PostgreSQL source hands it chunks it fetched, so both downsample alike).
 */
export interface ChunkReads {
  readonly scalarChunks: { all(...args: WindowArgs): ChunkMeta[] };
  readonly streamChunks: { all(...args: WindowArgs): ChunkMeta[] };
  readonly points: { all(...args: WindowArgs): [step: number, wall: number, value: number | null][] };
  readonly chunkBlobs: {
    get(id: number): { steps: Buffer | Uint8Array; walls: Buffer | Uint8Array; vals: Buffer | Uint8Array } | undefined;
  };
  readonly chunkBlocks: { get(id: number): Buffer | Uint8Array | undefined };
}
import { BLOCK_FIELDS, BLOCK_POINTS } from "./schema.js";

/** Read pre-aggregated blocks instead of points when a bucket spans at least this many blocks. */
const BLOCKS_PER_BUCKET = 8;

/** The positions a read covers: (from, to), exclusive; `after` as given (the cursor when nothing is newer). */
interface Window {
  readonly from: number;
  readonly to: number;
  readonly after: number | undefined;
}

/** Which series to read and how. */
interface SeriesRead {
  readonly key: string;
  readonly keyId: number;
  readonly rank: number;
  readonly x: XAxis;
  readonly window: Window;
  readonly maxPoints: number;
}

/** A decoded chunk and the part of it inside the window, `[start, end)`. */
interface Decoded {
  readonly steps: Float64Array;
  readonly walls: Float64Array;
  readonly values: Float64Array;
  readonly start: number;
  readonly end: number;
}

/**
 * A scalar series (packed chunks by step, then recent rows) or a stream series (chunks by arrival
 * position). A chunk's "position" is its step range for scalars and its arrival range for streams;
 * the cursor is a position. Only positions in (from, to) are read: chunks wholly inside the window
 * may be folded by their summaries, the (at most two) chunks across its edges are decoded.
 */
export function readChunkedSeries(sql: ChunkReads, kind: "scalar" | "stream", read: SeriesRead): SeriesResult {
  const { key, keyId, rank, x, window, maxPoints } = read;
  const { from, to } = window;
  const scalar = kind === "scalar";
  const chunks = (scalar ? sql.scalarChunks : sql.streamChunks).all(keyId, rank, from, to);
  const rows = scalar ? sql.points.all(keyId, rank, from, to) : [];
  const decode = (c: ChunkMeta): Decoded => decodeChunk(sql, key, scalar, window, c);
  // Chunks across an edge of the window are decoded now: their count in the window is exact.
  const edges = new Map<ChunkMeta, Decoded>();
  let total = rows.length;
  let lastPosition: number | null = null;
  for (const c of chunks) {
    if (c.pos_first <= from || c.pos_last >= to) {
      const d = decode(c);
      edges.set(c, d);
      total += d.end - d.start;
      if (d.end > d.start) lastPosition = scalar ? f64(d.steps, d.end - 1) : c.pos_first + d.end - 1;
    } else {
      total += c.n;
      lastPosition = c.pos_last;
    }
  }
  const lastRow = rows[rows.length - 1];
  if (lastRow !== undefined) lastPosition = lastRow[0];
  const cursor = lastPosition ?? window.after ?? null;
  const parts: SeriesParts = { chunks, rows, edges, decode };
  if (total <= maxPoints) {
    const points = everyPoint(parts, x, scalar);
    return { key, kind, rank, points, cursor, total: points.length, downsampled: false };
  }
  const points = downsampleParts(sql, parts, x, total, maxPoints);
  return { key, kind, rank, points, cursor, total, downsampled: true };
}

/** A window's chunks, rows and the chunks across its edges (decoded already), and how to decode any other. */
interface SeriesParts {
  readonly chunks: readonly ChunkMeta[];
  readonly rows: readonly [step: number, wall: number, value: number | null][];
  readonly edges: ReadonlyMap<ChunkMeta, Decoded>;
  readonly decode: (c: ChunkMeta) => Decoded;
}

/** Decode chunk `c` and find the part of it inside the window (by step for scalars, by arrival position for streams). */
function decodeChunk(sql: ChunkReads, key: string, scalar: boolean, window: Window, c: ChunkMeta): Decoded {
  const { from, to } = window;
  const b = sql.chunkBlobs.get(c.id);
  if (b === undefined)
    throw new Error(`store chunk ${c.id} of ${JSON.stringify(key)} vanished inside a read transaction`);
  const steps = unpackFloat64(b.steps);
  let start = 0;
  let end = steps.length;
  if (scalar) {
    if (c.pos_first <= from) while (start < end && f64(steps, start) <= from) start++;
    if (c.pos_last >= to) while (end > start && f64(steps, end - 1) >= to) end--;
  } else {
    if (c.pos_first <= from) start = Math.min(end, from - c.pos_first + 1);
    if (c.pos_last >= to) end = Math.max(start, Math.min(end, to - c.pos_first));
  }
  return { steps, walls: unpackFloat64(b.walls), values: unpackFloat64(b.vals), start, end };
}

/** Every point of the window, in x order. */
function everyPoint(parts: SeriesParts, x: XAxis, scalar: boolean): SeriesPoint[] {
  const points: SeriesPoint[] = [];
  for (const c of parts.chunks) {
    const d = parts.edges.get(c) ?? parts.decode(c);
    for (let i = d.start; i < d.end; i++)
      points.push({ step: f64(d.steps, i), wall: f64(d.walls, i), value: f64(d.values, i) });
  }
  for (const [step, wall, value] of parts.rows) points.push({ step, wall, value: fromSqlReal(value) });
  if (x === "wall") points.sort((p, q) => p.wall - q.wall || p.step - q.step);
  else if (!scalar) points.sort((p, q) => p.step - q.step);
  return points;
}

/**
 * The x range, from chunk summaries, the edge chunks' points in the window, and rows (walls
 * within a chunk are close to monotone).
 */
function xRange(parts: SeriesParts, x: XAxis): [x0: number, x1: number] {
  let x0 = Infinity;
  let x1 = -Infinity;
  for (const c of parts.chunks) {
    const d = parts.edges.get(c);
    if (d !== undefined) {
      const xs = x === "step" ? d.steps : d.walls;
      for (let i = d.start; i < d.end; i++) {
        const v = f64(xs, i);
        if (v < x0) x0 = v;
        if (v > x1) x1 = v;
      }
      continue;
    }
    const a = x === "step" ? c.first_step : Math.min(c.first_wall, c.last_wall);
    const b = x === "step" ? c.last_step : Math.max(c.first_wall, c.last_wall);
    if (a < x0) x0 = a;
    if (b > x1) x1 = b;
  }
  for (const [step, wall] of parts.rows) {
    const v = x === "step" ? step : wall;
    if (v < x0) x0 = v;
    if (v > x1) x1 = v;
  }
  return [x0, x1];
}

/**
 * The window downsampled to about `maxPoints`: edge chunks by their points, inner chunks by their
 * pre-aggregated blocks (many blocks per bucket), their summary (wholly in one bucket) or their points.
 */
function downsampleParts(
  sql: ChunkReads,
  parts: SeriesParts,
  x: XAxis,
  total: number,
  maxPoints: number,
): SeriesPoint[] {
  const [x0, x1] = xRange(parts, x);
  const buckets = Math.floor(maxPoints / POINTS_PER_BUCKET);
  const ds = new Downsampler(x0, x1, buckets, x === "step");
  // With many blocks per bucket, fold the chunks' pre-aggregated blocks instead of their points.
  const useBlocks = total / buckets >= BLOCKS_PER_BUCKET * BLOCK_POINTS;
  for (const c of parts.chunks) {
    const d = parts.edges.get(c);
    if (d !== undefined) {
      ds.addArrays(d.steps, d.walls, d.values, d.start, d.end);
      continue;
    }
    const blob = useBlocks ? sql.chunkBlocks.get(c.id) : undefined;
    if (blob !== undefined) {
      const blocks = unpackFloat64(blob);
      for (let o = 0; o < blocks.length; o += BLOCK_FIELDS.length) ds.addBlock(blocks, o);
      continue;
    }
    const xa = x === "step" ? c.first_step : c.first_wall;
    const xb = x === "step" ? c.last_step : c.last_wall;
    const bucket = ds.bucketOf(xa);
    if (c.nan_count === 0 && c.last !== null && bucket === ds.bucketOf(xb)) {
      ds.addSummary(bucket, c.n, {
        min: c.min,
        minStep: c.min_step,
        minWall: c.min_wall,
        max: c.max,
        maxStep: c.max_step,
        maxWall: c.max_wall,
        last: c.last,
        lastStep: c.last_step,
        lastWall: c.last_wall,
      });
    } else {
      const full = parts.decode(c);
      ds.addArrays(full.steps, full.walls, full.values, full.start, full.end);
    }
  }
  for (const [step, wall, value] of parts.rows) ds.add(step, wall, fromSqlReal(value), x === "step" ? step : wall);
  return ds.result(maxPoints);
}

/** A series kept as rows (system metrics), in arrival order. */
export function readRawSeries(sql: ReaderStatements, kind: SeriesKind, read: SeriesRead): SeriesResult {
  const { key, keyId, rank, x, window, maxPoints } = read;
  const rows = sql.rawPoints.all(keyId, rank, window.after ?? -1, window.to);
  const cursor = rows[rows.length - 1]?.[0] ?? window.after ?? null;
  if (rows.length <= maxPoints) {
    const points = rows.map(([, step, wall, value]) => ({ step, wall, value: fromSqlReal(value) }));
    if (x === "step") points.sort((p, q) => p.step - q.step || p.wall - q.wall);
    return { key, kind, rank, points, cursor, total: rows.length, downsampled: false };
  }
  let x0 = Infinity;
  let x1 = -Infinity;
  for (const [, step, wall] of rows) {
    const v = x === "step" ? step : wall;
    if (v < x0) x0 = v;
    if (v > x1) x1 = v;
  }
  const ds = new Downsampler(x0, x1, Math.floor(maxPoints / POINTS_PER_BUCKET), x === "step");
  for (const [, step, wall, value] of rows) ds.add(step, wall, fromSqlReal(value), x === "step" ? step : wall);
  return { key, kind, rank, points: ds.result(maxPoints), cursor, total: rows.length, downsampled: true };
}

/** Which series `readSeriesColumns` reads, past which cursor, how many points at most. */
interface ColumnsRead {
  readonly key: string;
  readonly keyId: number;
  readonly rank: number;
  readonly after: number | undefined;
  readonly limit: number;
}

/** Columns gathered up to a limit: views of decoded chunks, then single points. */
class ColumnsOut {
  private readonly parts: SeriesColumns[] = [];
  private readonly rows: { steps: number[]; walls: number[]; values: number[] } = { steps: [], walls: [], values: [] };
  n = 0;
  cursor: number | null;

  constructor(
    readonly limit: number,
    after: number | undefined,
  ) {
    this.cursor = after ?? null;
  }

  get full(): boolean {
    return this.n >= this.limit;
  }

  /** Points `[start, end)` of decoded columns (as many as fit); positions `pos0 + i`, or the steps when `pos0` is null. */
  addRange(part: SeriesColumns, start: number, end: number, pos0: number | null): void {
    const take = Math.min(end - start, this.limit - this.n);
    if (take <= 0) return;
    this.parts.push(sliceSeries(part, start, start + take));
    this.n += take;
    this.cursor = pos0 === null ? f64(part.steps, start + take - 1) : pos0 + start + take - 1;
  }

  add(step: number, wall: number, value: number, position: number): void {
    if (this.full) return;
    this.rows.steps.push(step);
    this.rows.walls.push(wall);
    this.rows.values.push(value);
    this.n++;
    this.cursor = position;
  }

  result(): SeriesColumnsResult {
    const { steps, walls, values } = this.rows;
    if (steps.length > 0)
      this.parts.push({
        steps: Float64Array.from(steps),
        walls: Float64Array.from(walls),
        values: Float64Array.from(values),
      });
    const all = this.parts.length === 1 && this.parts[0] !== undefined ? this.parts[0] : concatSeries(this.parts);
    return { ...all, cursor: this.cursor };
  }
}

/**
 * The first `limit` points of a series past `after`, every one, as columns (what a sync sends):
 * chunks are decoded one after another until the limit is reached, never turned into point
 * objects; a scalar's recent rows follow its chunks (the store keeps them past the packed steps).
 */
export function readSeriesColumns(sql: ReaderStatements, kind: SeriesKind, read: ColumnsRead): SeriesColumnsResult {
  const { key, keyId, rank, after, limit } = read;
  const from = after ?? -Infinity;
  const out = new ColumnsOut(limit, after);
  if (kind === "system") {
    for (const [seq, step, wall, value] of sql.rawPointsAfter.all(keyId, rank, after ?? -1, limit))
      out.add(step, wall, fromSqlReal(value), seq);
    return out.result();
  }
  const scalar = kind === "scalar";
  for (const c of (scalar ? sql.scalarChunks : sql.streamChunks).all(keyId, rank, from, Infinity)) {
    if (out.full) break;
    const b = sql.chunkBlobs.get(c.id);
    if (b === undefined)
      throw new Error(`store chunk ${c.id} of ${JSON.stringify(key)} vanished inside a read transaction`);
    const steps = unpackFloat64(b.steps);
    let start = 0;
    if (scalar) {
      while (start < steps.length && f64(steps, start) <= from) start++;
    } else if (c.pos_first <= from) start = Math.min(steps.length, from - c.pos_first + 1);
    out.addRange(
      { steps, walls: unpackFloat64(b.walls), values: unpackFloat64(b.vals) },
      start,
      steps.length,
      scalar ? null : c.pos_first,
    );
  }
  if (scalar && !out.full)
    for (const [step, wall, value] of sql.points.all(keyId, rank, from, Infinity))
      out.add(step, wall, fromSqlReal(value), step);
  return out.result();
}
