/**
 * A series' points as the server's `chunks` rows: the local store's packed layout (float64 blobs,
 * min/max/last columns, pre-aggregated blocks from `columns.ts`), written many rows per statement.
 */
import type pg from "pg";
import { packFloat64, unpackFloat64 } from "../backends/store/codec.js";
import { blockSummaries, extremes, f64, type SeriesColumns } from "../backends/store/columns.js";

/** One chunk to insert. `firstPos`: its first point's position (a step for scalars, the server's arrival number otherwise). */
export interface ChunkRow {
  readonly keyId: number;
  readonly rank: number;
  readonly firstPos: number;
  readonly points: SeriesColumns;
  /** Positions are the steps (scalars) or consecutive arrival numbers from `firstPos`. */
  readonly byStep: boolean;
}

const COLUMNS = [
  "key_id",
  "rank",
  "first_pos",
  "last_pos",
  "first_step",
  "last_step",
  "n",
  "first_wall",
  "last_wall",
  "min",
  "min_step",
  "min_wall",
  "max",
  "max_step",
  "max_wall",
  "last",
  "nan_count",
  "blocks",
  "steps",
  "walls",
  "vals",
] as const;

/** Rows per INSERT: 21 parameters each, well under PostgreSQL's 65,535. */
const ROWS_PER_STATEMENT = 1000;

/** The parameters of one chunk row, in `COLUMNS` order. */
function rowValues(c: ChunkRow): unknown[] {
  const { steps, walls, values } = c.points;
  const n = steps.length;
  const { minAt, maxAt, nans } = extremes(values);
  const at = (a: Float64Array, i: number): number | null => (i < 0 ? null : f64(a, i));
  let firstStep = f64(steps, 0);
  let lastStep = f64(steps, n - 1);
  if (!c.byStep) {
    for (const s of steps) {
      if (s < firstStep) firstStep = s;
      if (s > lastStep) lastStep = s;
    }
  }
  const lastPos = c.byStep ? f64(steps, n - 1) : c.firstPos + n - 1;
  // Copies: the columns may be views of a larger decoded batch.
  const blob = (a: Float64Array): Buffer => Buffer.from(packFloat64(a.slice()));
  return [
    c.keyId,
    c.rank,
    c.firstPos,
    lastPos,
    firstStep,
    lastStep,
    n,
    f64(walls, 0),
    f64(walls, n - 1),
    at(values, minAt),
    at(steps, minAt),
    at(walls, minAt),
    at(values, maxAt),
    at(steps, maxAt),
    at(walls, maxAt),
    f64(values, n - 1),
    nans,
    packFloat64(blockSummaries(c.points)),
    blob(steps),
    blob(walls),
    blob(values),
  ];
}

/** Insert chunk rows, many per statement. */
export async function insertChunks(client: pg.ClientBase | pg.Pool, rows: readonly ChunkRow[]): Promise<void> {
  for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
    const part = rows.slice(start, start + ROWS_PER_STATEMENT);
    const params: unknown[] = [];
    const tuples: string[] = [];
    for (const row of part) {
      const base = params.length;
      params.push(...rowValues(row));
      tuples.push(`(${COLUMNS.map((_, i) => `$${base + i + 1}`).join(",")})`);
    }
    await client.query(`INSERT INTO chunks (${COLUMNS.join(",")}) VALUES ${tuples.join(",")}`, params);
  }
}

/** A stored chunk's points. */
export function decodeChunkBlobs(row: { steps: Buffer; walls: Buffer; vals: Buffer }): SeriesColumns {
  return { steps: unpackFloat64(row.steps), walls: unpackFloat64(row.walls), values: unpackFloat64(row.vals) };
}
