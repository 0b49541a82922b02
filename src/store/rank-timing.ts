/**
 * The store's per-rank timings (`rank_timing`, `rank_lists`; docs/stragglers.md): what the
 * backend hands its writer at each flush (`toRankTimingWrite`: float32 columns, the ranks' names
 * only when they changed) and reading a window of flushes back (`readRankTiming`) for the
 * dashboard's Ranks view. A store written before these tables existed reads as having none.
 */
import type Database from "better-sqlite3";
import { isRecord } from "../core/json.js";
import {
  STRAGGLER_MEASURES,
  type ChronicRank,
  type RankRef,
  type RankTimingRecord,
  type SlowRank,
  type StragglerMeasure,
  type StragglerReport,
} from "../core/straggler-report.js";
import { unpackFloat32 } from "./codec.js";
import type { RankTimingOptions, RankTimingWindow } from "./read-types.js";
import { withBusyRetry } from "./schema.js";
import type { RankTimingWrite } from "./writer.js";

/** The ranks of the last record handed to a writer. */
export type TimingRanks = Pick<RankTimingRecord, "ranks" | "rankNames" | "hosts">;

/** True when a record's ranks are `last`'s, in the same order. */
function sameRanks(last: TimingRanks, record: TimingRanks): boolean {
  const n = record.rankNames.length;
  if (last.rankNames.length !== n) return false;
  for (let i = 0; i < n; i++) {
    if (
      last.rankNames[i] !== record.rankNames[i] ||
      last.ranks[i] !== record.ranks[i] ||
      last.hosts[i] !== record.hosts[i]
    )
      return false;
  }
  return true;
}

/** What the writer stores for `record`; `last` is the previous record's ranks (null for the first). */
export function toRankTimingWrite(record: RankTimingRecord, last: TimingRanks | null): RankTimingWrite {
  const same = last !== null && sameRanks(last, record);
  return {
    step: record.step,
    wall: record.timestamp,
    ...(same
      ? {}
      : { ranks: record.ranks.map((rank, i) => [rank, record.rankNames[i] ?? "", record.hosts[i] ?? ""] as const) }),
    report: JSON.stringify(record.report),
    stepMs: Float32Array.from(record.stepMs),
    latenessMs: Float32Array.from(record.latenessMs),
    waitMs: Float32Array.from(record.waitMs),
  };
}

/** Flushes read at most at once. */
export const MAX_TIMING_FLUSHES = 2000;
/** Flushes read when not told. */
export const DEFAULT_TIMING_FLUSHES = 200;

interface TimingRow {
  readonly step: number;
  readonly wall: number;
  readonly list_id: number;
  readonly report: string;
  readonly step_ms: Buffer;
  readonly lateness_ms: Buffer;
  readonly wait_ms: Buffer;
}

const num = (v: unknown): number | null => (typeof v === "number" ? v : null);
const str = (v: unknown): string => (typeof v === "string" ? v : "");

function refOf(v: Record<string, unknown>): RankRef {
  return { rank: num(v["rank"]) ?? -1, rankName: str(v["rankName"]), host: str(v["host"]) };
}

function isMeasure(v: unknown): v is StragglerMeasure {
  return STRAGGLER_MEASURES.some((m) => m === v);
}

function slowRankOf(v: Record<string, unknown>): SlowRank {
  const phase = v["phase"];
  return {
    ...refOf(v),
    stepMs: num(v["stepMs"]),
    latenessMs: num(v["latenessMs"]),
    waitMs: num(v["waitMs"]),
    causedWaitMs: num(v["causedWaitMs"]),
    by: Array.isArray(v["by"]) ? v["by"].filter(isMeasure) : [],
    phase: isRecord(phase)
      ? { name: str(phase["name"]), ms: num(phase["ms"]) ?? NaN, medianMs: num(phase["medianMs"]) ?? NaN }
      : null,
    chronic: v["chronic"] === true,
  };
}

function chronicRankOf(v: Record<string, unknown>): ChronicRank {
  return { ...refOf(v), slowFlushes: num(v["slowFlushes"]) ?? 0, window: num(v["window"]) ?? 0 };
}

/** A stored report, checked field by field (what is not what it should be is left out). */
export function parseStragglerReport(json: string): StragglerReport {
  const value: unknown = JSON.parse(json);
  if (!isRecord(value)) throw new TypeError(`a stored straggler report is not a JSON object: ${json.slice(0, 80)}`);
  const list = (v: unknown): Record<string, unknown>[] => (Array.isArray(v) ? v.filter(isRecord) : []);
  const tracer = value["tracer"];
  return {
    step: num(value["step"]) ?? 0,
    ranks: num(value["ranks"]) ?? 0,
    tracer: typeof tracer === "string" ? tracer : null,
    medianStepMs: num(value["medianStepMs"]),
    skew: num(value["skew"]),
    medianWaitMs: num(value["medianWaitMs"]),
    slowest: list(value["slowest"]).map(slowRankOf),
    chronic: list(value["chronic"]).map(chronicRankOf),
  };
}

/** A stored rank list (`[[rank, rankName, host], …]`) as `RankRef`s. */
export function parseRankList(json: string): RankRef[] {
  const value: unknown = JSON.parse(json);
  if (!Array.isArray(value)) throw new TypeError(`a stored rank list is not a JSON array: ${json.slice(0, 80)}`);
  const list: readonly unknown[] = value;
  return list.map((entry) => {
    if (!Array.isArray(entry))
      throw new TypeError("a stored rank list holds something other than [rank, rankName, host]");
    const fields: readonly unknown[] = entry;
    return { rank: num(fields[0]) ?? -1, rankName: str(fields[1]), host: str(fields[2]) };
  });
}

/** Check `RankTimingOptions` (a TypeError saying what is valid). */
function checkOptions(options: RankTimingOptions): { after: number; before: number; limit: number } {
  const limit = options.maxFlushes ?? DEFAULT_TIMING_FLUSHES;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_TIMING_FLUSHES)
    throw new TypeError(`maxFlushes must be an integer from 1 to ${MAX_TIMING_FLUSHES}, got ${String(limit)}`);
  for (const [name, v] of [
    ["after", options.after],
    ["before", options.before],
  ] as const) {
    if (v !== undefined && (typeof v !== "number" || Number.isNaN(v)))
      throw new TypeError(`${name} must be a step number, got ${String(v)}`);
  }
  return { after: options.after ?? -Infinity, before: options.before ?? Infinity, limit };
}

/** One stored flush of timings, its columns in the order of its rank list `listId` (NaN or null: no figure). */
interface TimingFlushRow {
  readonly step: number;
  readonly wall: number;
  readonly listId: number;
  readonly report: string;
  readonly stepMs: ArrayLike<number | null>;
  readonly latenessMs: ArrayLike<number | null>;
  readonly waitMs: ArrayLike<number | null>;
}

const EMPTY_WINDOW: RankTimingWindow = {
  ranks: [],
  steps: [],
  walls: [],
  stepMs: [],
  latenessMs: [],
  waitMs: [],
  reports: [],
};

/**
 * The newest `maxFlushes` flushes with steps in (after, before) — the oldest ones with `oldest` —
 * every rank that appears in them (rows, by rank), their step time, lateness and wait per flush
 * (columns), and each flush's report.
 */
export function readRankTiming(db: Database.Database, options: RankTimingOptions = {}): RankTimingWindow {
  const { after, before, limit } = checkOptions(options);
  const exists = withBusyRetry(() =>
    db
      .prepare<[], { n: number }>(
        "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'rank_timing'",
      )
      .get(),
  );
  if ((exists?.n ?? 0) === 0) return EMPTY_WINDOW;
  const order = options.oldest === true ? "ASC" : "DESC";
  const { rows, lists } = withBusyRetry(() =>
    db.transaction(() => {
      const found = db
        .prepare<[number, number, number], TimingRow>(
          `SELECT step, wall, list_id, report, step_ms, lateness_ms, wait_ms FROM rank_timing WHERE step > ? AND step < ? ORDER BY step ${order} LIMIT ?`,
        )
        .all(after, before, limit);
      const rows = options.oldest === true ? found : found.reverse();
      const listOf = db.prepare<[number], { ranks: string }>("SELECT ranks FROM rank_lists WHERE id = ?");
      const lists = new Map<number, RankRef[]>();
      for (const r of rows)
        if (!lists.has(r.list_id)) lists.set(r.list_id, parseRankList(listOf.get(r.list_id)?.ranks ?? "[]"));
      return { rows, lists };
    })(),
  );
  const flushes = rows.map((r) => ({
    step: r.step,
    wall: r.wall,
    listId: r.list_id,
    report: r.report,
    stepMs: unpackFloat32(r.step_ms),
    latenessMs: unpackFloat32(r.lateness_ms),
    waitMs: unpackFloat32(r.wait_ms),
  }));
  return assembleRankTiming(flushes, lists);
}

/**
 * The Ranks view's window from stored flushes (ascending) and their rank lists: the store's and the
 * team server's one assembly. One row per rank name across the lists, ordered by rank.
 */
export function assembleRankTiming(
  rows: readonly TimingFlushRow[],
  lists: ReadonlyMap<number, readonly RankRef[]>,
): RankTimingWindow {
  if (rows.length === 0) return EMPTY_WINDOW;
  const byName = new Map<string, RankRef>();
  for (const list of lists.values())
    for (const ref of list) if (!byName.has(ref.rankName)) byName.set(ref.rankName, ref);
  const ranks = [...byName.values()].sort((a, b) => a.rank - b.rank || (a.rankName < b.rankName ? -1 : 1));
  const rowOf = new Map(ranks.map((r, i) => [r.rankName, i]));
  const cols = rows.length;
  const matrices = {
    stepMs: new Array<number>(ranks.length * cols).fill(NaN),
    latenessMs: new Array<number>(ranks.length * cols).fill(NaN),
    waitMs: new Array<number>(ranks.length * cols).fill(NaN),
  };
  rows.forEach((r, col) => {
    const list = lists.get(r.listId) ?? [];
    const columns = [
      [matrices.stepMs, r.stepMs],
      [matrices.latenessMs, r.latenessMs],
      [matrices.waitMs, r.waitMs],
    ] as const;
    list.forEach((ref, i) => {
      const row = rowOf.get(ref.rankName);
      if (row === undefined) return;
      for (const [matrix, values] of columns) matrix[row * cols + col] = values[i] ?? NaN;
    });
  });
  return {
    ranks,
    steps: rows.map((r) => r.step),
    walls: rows.map((r) => r.wall),
    ...matrices,
    reports: rows.map((r) => parseStragglerReport(r.report)),
  };
}
