/**
 * A resumed run on the server: the job restarted from step R and its store removed its scalar
 * points, stream values, samples, histograms and per-rank timings at or after R (they are logged again), so the
 * server does the same before the batch that announces the new resume step, and the sync's cursors
 * move back with it. System metrics are kept (the store keeps them too).
 */
import type pg from "pg";
import { sliceSeries } from "../store/columns.js";
import { decodeChunkBlobs, insertChunks } from "./chunks.js";

/** Remove everything of run `runId` logged at or after `step` and reset the cursors to what remains. */
export async function truncateRun(client: pg.ClientBase, runId: number, step: number): Promise<void> {
  // Chunks that start at or after the step go; those across it keep their points before it.
  await client.query(
    `DELETE FROM chunks c USING keys k WHERE c.key_id = k.id AND k.run_id = $1 AND k.kind IN ('scalar', 'stream') AND c.first_step >= $2`,
    [runId, step],
  );
  const across = await client.query<{
    id: number;
    key_id: number;
    rank: number;
    kind: string;
    first_pos: number;
    steps: Buffer;
    walls: Buffer;
    vals: Buffer;
  }>(
    `SELECT c.id, c.key_id, c.rank, k.kind, c.first_pos, c.steps, c.walls, c.vals FROM chunks c JOIN keys k ON k.id = c.key_id
     WHERE k.run_id = $1 AND k.kind IN ('scalar', 'stream') AND c.last_step >= $2`,
    [runId, step],
  );
  if (across.rows.length > 0) {
    await client.query("DELETE FROM chunks WHERE id = ANY($1::bigint[])", [across.rows.map((r) => r.id)]);
    const keep = across.rows.flatMap((r) => {
      const points = decodeChunkBlobs(r);
      let n = 0;
      while (n < points.steps.length && (points.steps[n] ?? Infinity) < step) n++;
      return n === 0
        ? []
        : [
            {
              keyId: r.key_id,
              rank: r.rank,
              firstPos: r.first_pos,
              points: sliceSeries(points, 0, n),
              byStep: r.kind === "scalar",
            },
          ];
    });
    await insertChunks(client, keep);
  }
  // Each series' counts and cursor from what remains: a scalar's cursor is its last step, a
  // stream's the last arrival number (the store numbers a stream's values from 0 without gaps).
  const mine = "FROM keys k WHERE s.key_id = k.id AND k.run_id = $1 AND k.kind IN ('scalar', 'stream')";
  await client.query(
    `UPDATE series s SET n = (SELECT COALESCE(sum(c.n), 0) FROM chunks c WHERE c.key_id = s.key_id AND c.rank = s.rank),
       small_chunks = 0, small_points = 0,
       last_step = (SELECT c.last_step FROM chunks c WHERE c.key_id = s.key_id AND c.rank = s.rank ORDER BY c.first_pos DESC LIMIT 1),
       last_value = (SELECT c.last FROM chunks c WHERE c.key_id = s.key_id AND c.rank = s.rank ORDER BY c.first_pos DESC LIMIT 1),
       src_cursor = (SELECT max(c.last_pos) FROM chunks c WHERE c.key_id = s.key_id AND c.rank = s.rank) ${mine}`,
    [runId],
  );
  await client.query(
    `UPDATE series s SET next_pos = s.n, src_cursor = CASE WHEN s.n = 0 THEN NULL WHEN k.kind = 'scalar' THEN s.src_cursor ELSE s.n - 1 END ${mine}`,
    [runId],
  );
  await client.query(`DELETE FROM records r USING keys k WHERE r.key_id = k.id AND k.run_id = $1 AND r.step >= $2`, [
    runId,
    step,
  ]);
  for (const kind of ["sample", "histogram"]) {
    await client.query(
      `INSERT INTO run_cursors (run_id, name, value)
       SELECT $1, $2, COALESCE((SELECT max(r.src_seq) FROM records r JOIN keys k ON k.id = r.key_id WHERE k.run_id = $1 AND k.kind = $2), -1)
       ON CONFLICT (run_id, name) DO UPDATE SET value = EXCLUDED.value`,
      [runId, kind],
    );
  }
  // Per-rank timings of those flushes go too (the store deletes them from the resume step on).
  await client.query("DELETE FROM rank_timing WHERE run_id = $1 AND step >= $2", [runId, step]);
  await client.query(
    `INSERT INTO run_cursors (run_id, name, value) SELECT $1, 'timing', COALESCE((SELECT max(step) FROM rank_timing WHERE run_id = $1), -1)
     ON CONFLICT (run_id, name) DO UPDATE SET value = EXCLUDED.value`,
    [runId],
  );
}
