/** A run's per-rank timings from the team server's `rank_timing` tables, as the store reads its own. */
import type pg from "pg";
import type { RankTimingWindow } from "../store/read-types.js";
import { assembleRankTiming, parseRankList } from "../store/rank-timing.js";
import type { RankRef } from "../core/straggler-report.js";

/**
 * The newest `maxFlushes` flushes of a run's per-rank timings, as the store reads its own
 * (`assembleRankTiming`: the same window, the same rank rows).
 */
export async function readRankTiming(pool: pg.Pool, id: number, maxFlushes: number): Promise<RankTimingWindow> {
  const rows = await pool.query<{
    step: number;
    wall: number;
    list_id: string;
    report: string;
    step_ms: Array<number | null>;
    lateness_ms: Array<number | null>;
    wait_ms: Array<number | null>;
  }>(
    "SELECT step, wall, list_id, report, step_ms, lateness_ms, wait_ms FROM rank_timing WHERE run_id = $1 ORDER BY step DESC LIMIT $2",
    [id, maxFlushes],
  );
  // PostgreSQL writes a real as the shortest decimal that reads back as it: Math.fround turns
  // that into the float32 itself, as the store's blobs give it.
  const real = (values: ReadonlyArray<number | null>): Array<number | null> =>
    values.map((v) => (v === null ? null : Math.fround(v)));
  const flushes = rows.rows.reverse().map((r) => ({
    step: r.step,
    wall: r.wall,
    listId: Number(r.list_id),
    report: r.report,
    stepMs: real(r.step_ms),
    latenessMs: real(r.lateness_ms),
    waitMs: real(r.wait_ms),
  }));
  const ids = [...new Set(flushes.map((f) => f.listId))];
  const lists = new Map<number, RankRef[]>();
  if (ids.length > 0) {
    const found = await pool.query<{ id: string; ranks: string }>(
      "SELECT id, ranks FROM rank_timing_lists WHERE run_id = $1 AND id = ANY($2::bigint[])",
      [id, ids],
    );
    for (const l of found.rows) lists.set(Number(l.id), parseRankList(l.ranks));
  }
  return assembleRankTiming(flushes, lists);
}
