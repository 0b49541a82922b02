/**
 * A batch's series points in PostgreSQL: the series rows locked, the points past each row's
 * `src_cursor` (a gap is a `ConflictError`), cut into chunks, and replacement segments merged over
 * the range they cover.
 *
 * Small chunks: a live sync sends a few points per series per second; each batch's points become
 * one small chunk per series, and once a series has `MAX_SMALL_CHUNKS` of them (or a full chunk's
 * worth) they are merged into full `CHUNK_POINTS` chunks, as the local store does.
 */
import type pg from "pg";
import { CHUNK_POINTS } from "../store/schema.js";
import { concatSeries, sliceSeries, type SeriesColumns } from "../store/columns.js";
import type { SegmentHeader } from "../sync/wire.js";
import { decodeChunkBlobs, insertChunks, type ChunkRow } from "./chunks.js";
import { ConflictError } from "./ingest-conflict.js";

/** Small trailing chunks of a series before they are merged into full ones. */
const MAX_SMALL_CHUNKS = 16;

export interface SeriesRow {
  key_id: number;
  rank: number;
  src_cursor: number | null;
  next_pos: number;
  n: number;
  small_chunks: number;
  small_points: number;
}

/** The series rows of (key, rank) pairs, created when new, locked. */
export async function seriesRows(
  client: pg.ClientBase,
  pairs: readonly [number, number][],
): Promise<Map<string, SeriesRow>> {
  const rows = new Map<string, SeriesRow>();
  if (pairs.length === 0) return rows;
  const keys = pairs.map((p) => p[0]);
  const ranks = pairs.map((p) => p[1]);
  await client.query(
    "INSERT INTO series (key_id, rank) SELECT * FROM unnest($1::bigint[], $2::int[]) ON CONFLICT DO NOTHING",
    [keys, ranks],
  );
  const result = await client.query<SeriesRow>(
    `SELECT s.key_id, s.rank, s.src_cursor, s.next_pos, s.n, s.small_chunks, s.small_points FROM series s
     JOIN unnest($1::bigint[], $2::int[]) AS u(k, r) ON s.key_id = u.k AND s.rank = u.r ORDER BY s.key_id, s.rank FOR UPDATE OF s`,
    [keys, ranks],
  );
  for (const r of result.rows) rows.set(`${r.key_id}:${r.rank}`, r);
  return rows;
}

/** The points of a segment the server does not have yet, or a ConflictError for a gap. */
export function newPoints(s: SegmentHeader, cols: SeriesColumns, row: SeriesRow): SeriesColumns | null {
  const have = row.src_cursor;
  const where = `${s.kind} series ${JSON.stringify(s.key.slice(0, 80))} rank ${s.rank}`;
  if (s.replace === true && (have === null || s.cursor > have))
    throw new ConflictError(`${where}: a replacement reaches step ${s.cursor}, past the server's ${String(have)}`);
  if (s.kind === "scalar") {
    if (s.after !== null && (have === null || s.after > have))
      throw new ConflictError(`${where} continues from step ${s.after}, but the server has only up to ${String(have)}`);
    if (have === null) return cols;
    let start = 0;
    while (start < cols.steps.length && (cols.steps[start] ?? NaN) <= have) start++;
    return start === cols.steps.length ? null : sliceSeries(cols, start);
  }
  if (have !== null && s.cursor <= have) return null;
  if (s.after !== have)
    throw new ConflictError(`${where} continues from ${String(s.after)}, but the server is at ${String(have)}`);
  return cols;
}

export interface SeriesPlan {
  readonly row: SeriesRow;
  readonly segment: SegmentHeader;
  readonly points: SeriesColumns;
}

/** A series' trailing small chunks, read back to be merged with new points. */
interface Tail {
  readonly ids: number[];
  readonly points: SeriesColumns[];
  readonly firstPos: number;
}

/** How a series row moves once a batch's points are stored. */
interface SeriesUpdate {
  readonly key: number;
  readonly rank: number;
  readonly cursor: number;
  readonly nextPos: number;
  readonly n: number;
  readonly small: number;
  readonly smallPoints: number;
  readonly lastStep: number | null;
  readonly lastValue: number | null;
}

/** The small trailing chunks of the series due for a merge, read and deleted (their points are written again). */
async function takeTails(client: pg.ClientBase, plans: readonly SeriesPlan[]): Promise<Map<string, Tail>> {
  const merging = plans.filter(
    (p) =>
      p.row.small_chunks > 0 &&
      (p.row.small_chunks + 1 >= MAX_SMALL_CHUNKS || p.row.small_points + p.points.steps.length >= CHUNK_POINTS),
  );
  const tails = new Map<string, Tail>();
  if (merging.length === 0) return tails;
  const result = await client.query<{
    id: number;
    key_id: number;
    rank: number;
    first_pos: number;
    steps: Buffer;
    walls: Buffer;
    vals: Buffer;
  }>(
    `SELECT c.id, c.key_id, c.rank, c.first_pos, c.steps, c.walls, c.vals FROM unnest($1::bigint[], $2::int[], $3::int[]) AS u(k, r, lim)
     CROSS JOIN LATERAL (SELECT id, key_id, rank, first_pos, steps, walls, vals FROM chunks WHERE key_id = u.k AND rank = u.r ORDER BY first_pos DESC LIMIT u.lim) c`,
    [merging.map((p) => p.row.key_id), merging.map((p) => p.row.rank), merging.map((p) => p.row.small_chunks)],
  );
  for (const c of [...result.rows].sort((x, y) => x.first_pos - y.first_pos)) {
    const k = `${c.key_id}:${c.rank}`;
    const tail = tails.get(k) ?? { ids: [], points: [], firstPos: c.first_pos };
    tail.ids.push(c.id);
    tail.points.push(decodeChunkBlobs(c));
    tails.set(k, tail);
  }
  const ids = [...tails.values()].flatMap((t) => t.ids);
  if (ids.length > 0) await client.query("DELETE FROM chunks WHERE id = ANY($1::bigint[])", [ids]);
  return tails;
}

/** One series' new points (after its merged tail, if any) cut into chunks, and how its row moves. */
function cutSeries({ row, segment, points }: SeriesPlan, tail: Tail | undefined, chunks: ChunkRow[]): SeriesUpdate {
  const byStep = segment.kind === "scalar";
  const all = tail === undefined ? points : concatSeries([...tail.points, points]);
  let firstPos = byStep ? (all.steps[0] ?? 0) : tail !== undefined ? tail.firstPos : row.next_pos;
  let small = tail === undefined ? row.small_chunks : 0;
  let smallPoints = tail === undefined ? row.small_points : 0;
  for (let start = 0; start < all.steps.length; start += CHUNK_POINTS) {
    const piece = sliceSeries(all, start, Math.min(all.steps.length, start + CHUNK_POINTS));
    chunks.push({
      keyId: row.key_id,
      rank: row.rank,
      firstPos: byStep ? (piece.steps[0] ?? 0) : firstPos,
      points: piece,
      byStep,
    });
    firstPos += piece.steps.length;
    if (piece.steps.length < CHUNK_POINTS) {
      small++;
      smallPoints += piece.steps.length;
    } else {
      small = 0;
      smallPoints = 0;
    }
  }
  const n = points.steps.length;
  return {
    key: row.key_id,
    rank: row.rank,
    cursor: byStep ? (points.steps[n - 1] ?? segment.cursor) : segment.cursor,
    nextPos: byStep ? row.next_pos : row.next_pos + n,
    n: row.n + n,
    small,
    smallPoints,
    lastStep: points.steps[n - 1] ?? null,
    lastValue: points.values[n - 1] ?? null,
  };
}

/** Move the series rows: cursors, counts, small-chunk counts, last values (one statement). */
async function updateSeriesRows(client: pg.ClientBase, updates: readonly SeriesUpdate[]): Promise<void> {
  if (updates.length === 0) return;
  await client.query(
    `UPDATE series s SET src_cursor = u.cursor, next_pos = u.next_pos, n = u.n, small_chunks = u.small, small_points = u.small_points, last_step = u.last_step, last_value = u.last_value
     FROM unnest($1::bigint[], $2::int[], $3::float8[], $4::bigint[], $5::bigint[], $6::int[], $7::int[], $8::float8[], $9::float8[]) AS u(k, r, cursor, next_pos, n, small, small_points, last_step, last_value)
     WHERE s.key_id = u.k AND s.rank = u.r`,
    [
      updates.map((u) => u.key),
      updates.map((u) => u.rank),
      updates.map((u) => u.cursor),
      updates.map((u) => u.nextPos),
      updates.map((u) => u.n),
      updates.map((u) => u.small),
      updates.map((u) => u.smallPoints),
      updates.map((u) => u.lastStep),
      updates.map((u) => (u.lastValue === null || Number.isNaN(u.lastValue) ? "NaN" : u.lastValue)),
    ],
  );
}

/** Merge small tails where due, cut chunks, insert them (one COPY), and move each series' cursor. */
export async function storeSeries(client: pg.ClientBase, plans: readonly SeriesPlan[]): Promise<number> {
  const tails = await takeTails(client, plans);
  const chunks: ChunkRow[] = [];
  const updates = plans.map((plan) => cutSeries(plan, tails.get(`${plan.row.key_id}:${plan.row.rank}`), chunks));
  await insertChunks(client, chunks);
  await updateSeriesRows(client, updates);
  return plans.reduce((n, p) => n + p.points.steps.length, 0);
}

/**
 * Replacement segments: the server's points of each from its first step to its last become the
 * segment's. The chunks across that range are decoded, merged and written again.
 */
export async function replacePoints(client: pg.ClientBase, plans: readonly SeriesPlan[]): Promise<void> {
  for (const { row, points } of plans) {
    const first = points.steps[0] ?? 0;
    const last = points.steps[points.steps.length - 1] ?? 0;
    const old = await client.query<{ id: number; n: number; steps: Buffer; walls: Buffer; vals: Buffer }>(
      "SELECT id, n, steps, walls, vals FROM chunks WHERE key_id = $1 AND rank = $2 AND last_pos >= $3 AND first_pos <= $4 ORDER BY first_pos",
      [row.key_id, row.rank, first, last],
    );
    if (old.rows.length === 0) continue;
    const kept = concatSeries(old.rows.map(decodeChunkBlobs));
    let before = 0;
    while (before < kept.steps.length && (kept.steps[before] ?? 0) < first) before++;
    let afterAt = before;
    while (afterAt < kept.steps.length && (kept.steps[afterAt] ?? 0) <= last) afterAt++;
    const merged = concatSeries([sliceSeries(kept, 0, before), points, sliceSeries(kept, afterAt)]);
    await client.query("DELETE FROM chunks WHERE id = ANY($1::bigint[])", [old.rows.map((r) => r.id)]);
    const rows: ChunkRow[] = [];
    for (let start = 0; start < merged.steps.length; start += CHUNK_POINTS) {
      const piece = sliceSeries(merged, start, Math.min(merged.steps.length, start + CHUNK_POINTS));
      rows.push({ keyId: row.key_id, rank: row.rank, firstPos: piece.steps[0] ?? 0, points: piece, byStep: true });
    }
    await insertChunks(client, rows);
    const delta = merged.steps.length - kept.steps.length;
    const tail = merged.steps.length - 1;
    // Trailing small chunks were rewritten as part of the range: count none until the next merge.
    await client.query(
      `UPDATE series SET n = n + $3, small_chunks = 0, small_points = 0,
         last_value = CASE WHEN $4::float8 >= COALESCE(last_step, '-Infinity') THEN $5::float8 ELSE last_value END,
         last_step = GREATEST(last_step, $4::float8) WHERE key_id = $1 AND rank = $2`,
      [row.key_id, row.rank, delta, merged.steps[tail] ?? null, merged.values[tail] ?? null],
    );
  }
}
