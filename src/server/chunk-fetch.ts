/**
 * The chunks a team server's read of a line needs, fetched up front so the store's synchronous
 * read (`readChunkedSeries`) can fold them: one query finds the key, its line and the chunks'
 * summaries, a second their blobs (or blocks). The lines asked in one turn of the event loop share
 * those queries (`TurnBatch`): a chart's poll of 32 lines, read 4 at a time, is 16 queries, not
 * 64, so it waits for a connection and costs PostgreSQL a query's overhead a quarter as often.
 *
 * The two queries are not one snapshot: when a live run's ingest merged small chunks into a full
 * one between them (the blobs query misses some), the read starts over from the summaries, which
 * then name the merged chunk.
 */
import type pg from "pg";
import { GLOBAL_RANK, type KeyKind } from "../store/read-types.js";
import { LINE_ORDER, type ChunkMeta } from "../store/reader-statements.js";
import type { ChunkReads } from "../store/series-read.js";
import { BLOCK_POINTS } from "../store/schema.js";
import { HttpError } from "../ui/security.js";
import { TurnBatch } from "./turn-batch.js";

/** Block summaries are folded instead of blobs when a bucket of the answer spans this many blocks. */
const POINTS_PER_BUCKET = 3;
const BLOCKS_PER_BUCKET = 8;
/** Times a read looks its chunks up again when ingest merged some between its two queries. */
const VANISHED_RETRIES = 3;

/** Which line of which key a read is of: the run, the key, and the line (undefined: the key's first, in the store's order). */
export interface LineLookup {
  readonly runId: number;
  readonly kind: KeyKind;
  readonly key: string;
  readonly rank: number | undefined;
}

type MetaRow = ChunkMeta & { i: number; key_id: number; line: number; chunk: number | null };
type BlobRow = { id: number; steps: Buffer; walls: Buffer; vals: Buffer };

/** A line's lookup and the window of positions it reads. */
interface MetaAsk {
  readonly line: LineLookup;
  readonly from: number;
  readonly to: number;
}

/** A pool's batches: the lookups, blobs and blocks asked in one turn, each one query. */
class ChunkBatches {
  /** Lookups asked this turn, by their key in `metas`. */
  private readonly asks = new Map<string, MetaAsk>();

  readonly metas = new TurnBatch<string, MetaRow[]>(async (names) => {
    const asked = names.map((name) => {
      const ask = this.asks.get(name);
      this.asks.delete(name);
      if (ask === undefined) throw new Error(`the chunk lookup ${name} was asked without its line`);
      return ask;
    });
    const result = await this.pool.query<MetaRow>(
      `SELECT q.i, k.id AS key_id, l.rank AS line, c.id AS chunk, c.id, c.first_step, c.last_step, c.n, c.first_wall, c.last_wall, c.min, c.min_step, c.min_wall,
         c.max, c.max_step, c.max_wall, c.last, c.nan_count, c.first_pos AS pos_first, c.last_pos AS pos_last
       FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::float8[], $6::float8[]) WITH ORDINALITY AS q(run_id, kind, key, rank, from_pos, to_pos, i)
       JOIN keys k ON k.run_id = q.run_id AND k.kind = q.kind AND k.key = q.key
       CROSS JOIN LATERAL (SELECT coalesce(q.rank, (SELECT rank FROM series s WHERE s.key_id = k.id ORDER BY ${LINE_ORDER("rank")} LIMIT 1), $7::int) AS rank) l
       LEFT JOIN chunks c ON c.key_id = k.id AND c.rank = l.rank AND c.last_pos > q.from_pos AND c.first_pos < q.to_pos
       ORDER BY q.i, c.first_pos`,
      [
        asked.map((a) => a.line.runId),
        asked.map((a) => a.line.kind),
        asked.map((a) => a.line.key),
        asked.map((a) => a.line.rank ?? null),
        asked.map((a) => a.from),
        asked.map((a) => a.to),
        GLOBAL_RANK,
      ],
    );
    const byName = new Map<string, MetaRow[]>();
    for (const row of result.rows) {
      const name = names[row.i - 1];
      if (name === undefined) continue;
      const rows = byName.get(name);
      if (rows === undefined) byName.set(name, [row]);
      else rows.push(row);
    }
    return byName;
  });

  readonly blobs = new TurnBatch<number, BlobRow>(async (ids) => {
    const result = await this.pool.query<BlobRow>(
      "SELECT id, steps, walls, vals FROM chunks WHERE id = ANY($1::bigint[])",
      [ids],
    );
    return new Map(result.rows.map((r) => [r.id, r]));
  });

  readonly blocks = new TurnBatch<number, Buffer>(async (ids) => {
    const result = await this.pool.query<{ id: number; blocks: Buffer }>(
      "SELECT id, blocks FROM chunks WHERE id = ANY($1::bigint[])",
      [ids],
    );
    return new Map(result.rows.map((r) => [r.id, r.blocks]));
  });

  constructor(private readonly pool: pg.Pool) {}

  /** The summaries of a line's chunks in a window, ordered by position; a row with `chunk` null when it has none there. */
  async lookup(line: LineLookup, from: number, to: number): Promise<MetaRow[]> {
    const name = JSON.stringify([line.runId, line.kind, line.key, line.rank ?? null, String(from), String(to)]);
    this.asks.set(name, { line, from, to });
    return (await this.metas.get(name)) ?? [];
  }
}

const batchesOf = new WeakMap<pg.Pool, ChunkBatches>();

/** What a line's read folds: its key, its line, and its chunks (`complete`: every one still there). */
interface FetchedChunks {
  readonly keyId: number;
  readonly rank: number;
  readonly reads: ChunkReads;
  readonly complete: boolean;
}

/** The chunks of a line that a read of `from`–`to` at `maxPoints` folds; a key the run does not have is a 404. */
export async function fetchChunks(
  pool: pg.Pool,
  line: LineLookup,
  from: number,
  to: number,
  maxPoints: number,
): Promise<FetchedChunks> {
  let batches = batchesOf.get(pool);
  if (batches === undefined) {
    batches = new ChunkBatches(pool);
    batchesOf.set(pool, batches);
  }
  for (let attempt = 0; ; attempt++) {
    const found = await fetchOnce(batches, line, from, to, maxPoints);
    if (found.complete || attempt >= VANISHED_RETRIES) return found;
  }
}

async function fetchOnce(
  batches: ChunkBatches,
  line: LineLookup,
  from: number,
  to: number,
  maxPoints: number,
): Promise<FetchedChunks> {
  const metas = await batches.lookup(line, from, to);
  const first = metas[0];
  if (first === undefined) throw new HttpError(404, `this run has no ${line.kind} key ${JSON.stringify(line.key)}`);
  const chunks = metas.filter((c) => c.chunk !== null);
  const total = chunks.reduce((n, c) => n + c.n, 0);
  const buckets = Math.max(1, Math.floor(maxPoints / POINTS_PER_BUCKET));
  const useBlocks = total > maxPoints && total / buckets >= BLOCKS_PER_BUCKET * BLOCK_POINTS;
  const edge = (c: ChunkMeta): boolean => c.pos_first <= from || c.pos_last >= to;
  const blobIds = chunks.filter((c) => !useBlocks || edge(c)).map((c) => c.id);
  const blockIds = useBlocks ? chunks.filter((c) => !edge(c)).map((c) => c.id) : [];
  const [blobs, blocks] = await Promise.all([
    Promise.all(blobIds.map((id) => batches.blobs.get(id))),
    Promise.all(blockIds.map((id) => batches.blocks.get(id))),
  ]);
  const blobById = new Map<number, BlobRow>();
  blobIds.forEach((id, i) => {
    const b = blobs[i];
    if (b !== undefined) blobById.set(id, b);
  });
  const blocksById = new Map<number, Buffer>();
  blockIds.forEach((id, i) => {
    const b = blocks[i];
    if (b !== undefined) blocksById.set(id, b);
  });
  const reads: ChunkReads = {
    scalarChunks: { all: () => chunks },
    streamChunks: { all: () => chunks },
    points: { all: () => [] },
    chunkBlobs: { get: (id) => blobById.get(id) },
    chunkBlocks: { get: (id) => blocksById.get(id) },
  };
  const complete = blobById.size === blobIds.length && blocksById.size === blockIds.length;
  return { keyId: first.key_id, rank: first.line, reads, complete };
}
