/**
 * The dashboard's Ranks view as the API sends it (`/api/ranks`, docs/stragglers.md): a window of
 * flushes of every rank's step time, lateness and barrier wait, as a row × flush heatmap, and the
 * newest flush's straggler report (the slow ranks with their host, the chronic ones). Built here
 * from the store's `RankTimingWindow`, so every `DashboardSource` answers the same shape.
 *
 * At many ranks (more than `MAX_RANK_ROWS`) the rows are hosts, so 1,024 ranks on 16 hosts are 16
 * rows (the report still names the rank). Each cell is the host's most straggling rank's figure at
 * that flush: the largest step time and lateness, and the smallest barrier wait (the rank the
 * others wait for waits least).
 */
import type { RankTimingWindow } from "../store/read-types.js";
import type { ChronicRank, SlowRank } from "../core/straggler-report.js";

/** Above this many ranks, rows are hosts. */
const MAX_RANK_ROWS = 64;

/** One row of the heatmap: a rank, or a host's ranks together. */
interface RanksViewRow {
  /** The rank's name, or the host's. */
  readonly label: string;
  readonly host: string;
  /** The rank's number; null for a host row. */
  readonly rank: number | null;
  /** Ranks in the row (1 for a rank). */
  readonly ranks: number;
}

/** What `/api/ranks` answers. Matrices are row-major (`rows.length` × `steps.length`), null where a rank had no figure. */
export interface RanksView {
  /** False when the source keeps no per-rank timings; `reason` says why. */
  readonly available: boolean;
  readonly reason?: string;
  /** Rows are ranks, or hosts when there are more than `MAX_RANK_ROWS` ranks. */
  readonly rowsAre: "rank" | "host";
  /** Ranks in the window (all rows together): every rank seen at any of its flushes. */
  readonly totalRanks: number;
  /** The ranks each flush counted (its report's compared ranks), by `steps`: fewer than `totalRanks` where a rank was lost or late. */
  readonly flushRanks: number[];
  readonly rows: RanksViewRow[];
  /** The flushes, ascending. */
  readonly steps: number[];
  readonly stepMs: (number | null)[];
  readonly latenessMs: (number | null)[];
  readonly waitMs: (number | null)[];
  /** The newest flush's report: its slow ranks (with host and chronic mark), the chronic ones, the skew and medians. */
  readonly slowest: SlowRank[];
  readonly chronic: ChronicRank[];
  readonly skew: number | null;
  readonly medianStepMs: number | null;
  readonly medianWaitMs: number | null;
  /** The Tracer analysed (its prefix), null when none. */
  readonly tracer: string | null;
}

/** A view with nothing in it; `reason` set makes it `available: false` (a source that keeps no timings). */
export function emptyRanksView(reason?: string): RanksView {
  return {
    available: reason === undefined,
    ...(reason === undefined ? {} : { reason }),
    rowsAre: "rank",
    totalRanks: 0,
    flushRanks: [],
    rows: [],
    steps: [],
    stepMs: [],
    latenessMs: [],
    waitMs: [],
    slowest: [],
    chronic: [],
    skew: null,
    medianStepMs: null,
    medianWaitMs: null,
    tracer: null,
  };
}

const finite = (v: number | undefined): number | null => (v !== undefined && Number.isFinite(v) ? v : null);

/** The ranks each flush of the window counted: its report's, else the ranks with a figure there. */
function ranksPerFlush(window: RankTimingWindow): number[] {
  const cols = window.steps.length;
  const reported = new Map(window.reports.map((r) => [r.step, r.ranks]));
  return window.steps.map((step, c) => {
    const counted = reported.get(step);
    if (counted !== undefined) return counted;
    let n = 0;
    for (let r = 0; r < window.ranks.length; r++) {
      const at = r * cols + c;
      if (
        finite(window.stepMs[at]) !== null ||
        finite(window.latenessMs[at]) !== null ||
        finite(window.waitMs[at]) !== null
      )
        n++;
    }
    return n;
  });
}

/** `matrix` (ranks × cols) with rows merged by `groupOf[rank row]`: per column, the largest finite figure of each group's ranks (the smallest with `smallest`). */
function byGroup(
  matrix: readonly number[],
  cols: number,
  groupOf: readonly number[],
  groups: number,
  smallest = false,
): (number | null)[] {
  const out = new Array<number | null>(groups * cols).fill(null);
  for (let r = 0; r < groupOf.length; r++) {
    const g = groupOf[r] ?? 0;
    for (let c = 0; c < cols; c++) {
      const v = finite(matrix[r * cols + c]);
      const at = g * cols + c;
      const had = out[at] ?? null;
      if (v !== null && (had === null || (smallest ? v < had : v > had))) out[at] = v;
    }
  }
  return out;
}

/** The Ranks view of a window of flushes: rows per rank, or per host past `maxRankRows` ranks. */
export function ranksView(window: RankTimingWindow, maxRankRows = MAX_RANK_ROWS): RanksView {
  const cols = window.steps.length;
  const report = window.reports[window.reports.length - 1];
  const base = {
    available: true,
    totalRanks: window.ranks.length,
    flushRanks: ranksPerFlush(window),
    steps: window.steps,
    slowest: [...(report?.slowest ?? [])],
    chronic: [...(report?.chronic ?? [])],
    skew: report?.skew ?? null,
    medianStepMs: report?.medianStepMs ?? null,
    medianWaitMs: report?.medianWaitMs ?? null,
    tracer: report?.tracer ?? null,
  };
  if (window.ranks.length <= maxRankRows) {
    return {
      ...base,
      rowsAre: "rank",
      rows: window.ranks.map((r) => ({ label: r.rankName, host: r.host, rank: r.rank, ranks: 1 })),
      stepMs: window.stepMs.map((v) => finite(v)),
      latenessMs: window.latenessMs.map((v) => finite(v)),
      waitMs: window.waitMs.map((v) => finite(v)),
    };
  }
  const hosts = [...new Set(window.ranks.map((r) => r.host))].sort((a, b) =>
    a.localeCompare(b, "en", { numeric: true }),
  );
  const hostIndex = new Map(hosts.map((h, i) => [h, i]));
  const groupOf = window.ranks.map((r) => hostIndex.get(r.host) ?? 0);
  const counts = new Array<number>(hosts.length).fill(0);
  for (const g of groupOf) counts[g] = (counts[g] ?? 0) + 1;
  return {
    ...base,
    rowsAre: "host",
    rows: hosts.map((host, i) => ({ label: host, host, rank: null, ranks: counts[i] ?? 0 })),
    stepMs: byGroup(window.stepMs, cols, groupOf, hosts.length),
    latenessMs: byGroup(window.latenessMs, cols, groupOf, hosts.length),
    waitMs: byGroup(window.waitMs, cols, groupOf, hosts.length, true),
  };
}
