/**
 * Straggler attribution on the controller (docs/stragglers.md): at each flush, compare the ranks'
 * step timings (`TimingColumns`: what each rank's Tracer measured, and when its answer arrived) and
 * name the ranks that stand out — by step time, by lateness, and by the others' wait at marked
 * barriers — with the skew, and a chronic flag for a rank slow in at least half of the last N
 * flushes.
 *
 * A rank stands out on a measure when its excess over the median rank is larger than every one of:
 * `minExcessMs`, `tolerance` × the median step time, and `MAD_K` robust standard deviations (the
 * median absolute deviation, scaled) of that measure across the ranks (`core/stands-out.ts`, the
 * rule the dashboard's slowest replicas judge TTFT with too). The first two keep noise
 * that costs the job nothing from being named; the third adapts to how much ranks normally vary.
 *
 * In data-parallel training the all-reduce makes every rank's step equally long, so the slow rank
 * shows only as the others' wait for it: at a barrier the rank that arrives last waits least. Its
 * `causedWaitMs` is the median rank's wait minus its own. Waits are durations each rank measured
 * on its own monotonic clock, so no clock needs to agree across hosts.
 *
 * The work is O(ranks) per flush (medians by selection, not sorting) with a few typed arrays:
 * `npm run bench -- stragglers` measures 1,024 ranks.
 */
import type { KeyState } from "../core/key-state.js";
import { STRAGGLER_KEY_PREFIX } from "../core/internal-keys.js";
import { MIN_RANKS_COMPARED, standsOutBar } from "../core/stands-out.js";
import type {
  ChronicRank,
  RankRef,
  RankTimingRecord,
  SlowRank,
  StragglerMeasure,
  StragglerReport,
} from "../core/straggler-report.js";
import { timingRows, type TimingColumns, type TracerColumns } from "../core/step-timing.js";
import { singleValueState } from "../pipeline/reduce-states.js";
import { Scratch } from "./median-scratch.js";
import { DEFAULT_STRAGGLER_OPTIONS, type ResolvedStragglerOptions } from "./straggler-options.js";

export type {
  ChronicRank,
  RankTimingRecord,
  SlowRank,
  StragglerMeasure,
  StragglerReport,
} from "../core/straggler-report.js";

/** One flush's attribution: the report, its internal keys, and the per-rank record for the backends. */
interface StragglerFlush {
  readonly report: StragglerReport;
  readonly states: KeyState[];
  readonly record: RankTimingRecord;
}

/** The chosen Tracer's figures per rank. */
interface Figures {
  readonly tracer: TracerColumns | undefined;
  readonly stepMs: Float64Array;
  readonly waitMs: Float64Array;
  readonly arrivalMs: Float64Array;
}

/** The Tracer whose runs are the step: the one named in the options, else the one with the most time. */
function pickTracer(columns: TimingColumns, wanted: string | undefined): TracerColumns | undefined {
  if (wanted !== undefined) return columns.tracers.find((t) => t.prefix === wanted);
  let best: TracerColumns | undefined;
  let bestMs = 0;
  for (const t of columns.tracers) {
    let ms = 0;
    for (let i = 0; i < t.totalMs.length; i++) if ((t.steps[i] ?? 0) > 0) ms += t.totalMs[i] ?? 0;
    if (ms > bestMs) {
      best = t;
      bestMs = ms;
    }
  }
  return best;
}

function figuresOf(columns: TimingColumns, wanted: string | undefined): Figures {
  const n = timingRows(columns);
  const tracer = pickTracer(columns, wanted);
  const stepMs = new Float64Array(n).fill(NaN);
  const waitMs = new Float64Array(n).fill(NaN);
  const arrivalMs = Float64Array.from(columns.arrivalMs);
  if (tracer === undefined) return { tracer, stepMs, waitMs, arrivalMs };
  const barriers = tracer.phases.filter((p) => p.kind === "barrier");
  for (let i = 0; i < n; i++) {
    const steps = tracer.steps[i] ?? 0;
    if (steps > 0) stepMs[i] = (tracer.totalMs[i] ?? 0) / steps;
    if (barriers.length === 0) continue;
    let total = 0;
    let count = 0;
    for (const p of barriers) {
      total += p.totalMs[i] ?? 0;
      count += p.count[i] ?? 0;
    }
    // Per step of the tracer; a flush that caught barriers but no finished run: per barrier.
    if (steps > 0) waitMs[i] = total / steps;
    else if (count > 0) waitMs[i] = total / count;
  }
  return { tracer, stepMs, waitMs, arrivalMs };
}

/** What one measure says about every rank: each rank's excess over the median, and the bar to pass. */
interface MeasureScores {
  readonly measure: StragglerMeasure;
  readonly excess: Float64Array;
  readonly threshold: number;
  /** Ranks with a figure on this measure. */
  readonly n: number;
}

/** Tracks the chronic window across flushes and analyses each flush. */
export class StragglerTracker {
  private readonly scratch = new Scratch();
  /** Per rank name: the flushes of the window it was named in (bit 0: the latest), and who it is. */
  private readonly history = new Map<string, { bits: number; ref: RankRef }>();

  constructor(readonly options: ResolvedStragglerOptions = DEFAULT_STRAGGLER_OPTIONS) {}

  /** Analyse one flush's timings; undefined when no rank sent any. */
  observe(step: number, timestamp: number, columns: TimingColumns): StragglerFlush | undefined {
    const n = timingRows(columns);
    if (n === 0) {
      this.advance(new Set());
      return undefined;
    }
    const figures = figuresOf(columns, this.options.tracer);
    const medStep = this.scratch.median(figures.stepMs).median;
    const medArrival = this.scratch.median(figures.arrivalMs).median;
    const medWait = this.scratch.median(figures.waitMs).median;
    const latenessMs = new Float64Array(n);
    const causedWaitMs = new Float64Array(n);
    const stepExcess = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      latenessMs[i] = (figures.arrivalMs[i] ?? NaN) - medArrival;
      causedWaitMs[i] = medWait - (figures.waitMs[i] ?? NaN);
      stepExcess[i] = (figures.stepMs[i] ?? NaN) - medStep;
    }
    const scale = Number.isFinite(medStep) ? medStep : 0;
    const scores = [
      this.scores("step", stepExcess, figures.stepMs, medStep, scale),
      this.scores("lateness", latenessMs, figures.arrivalMs, medArrival, scale),
      this.scores("wait", causedWaitMs, figures.waitMs, medWait, scale),
    ];
    const slowRows = this.slowRows(scores);
    const named = new Set([...slowRows.keys()].map((i) => columns.rankNames[i] ?? ""));
    const refOf = (i: number): RankRef => ({
      rank: columns.ranks[i] ?? -1,
      rankName: columns.rankNames[i] ?? "",
      host: columns.hosts[i] ?? "",
    });
    const chronic = this.advance(
      named,
      new Map([...slowRows.keys()].map((i) => [columns.rankNames[i] ?? "", refOf(i)])),
    );
    const chronicNames = new Set(chronic.map((c) => c.rankName));
    const phaseOf = this.phaseHints(figures, [...slowRows.keys()]);
    const slowest: SlowRank[] = [...slowRows.entries()]
      .sort((a, b) => b[1].score - a[1].score)
      .map(([i, s]) => ({
        ...refOf(i),
        stepMs: finiteOrNull(figures.stepMs[i]),
        latenessMs: finiteOrNull(latenessMs[i]),
        waitMs: finiteOrNull(figures.waitMs[i]),
        causedWaitMs: finiteOrNull(causedWaitMs[i]),
        by: s.by,
        phase: phaseOf.get(i) ?? null,
        chronic: chronicNames.has(columns.rankNames[i] ?? ""),
      }));
    let maxStep = -Infinity;
    for (const v of figures.stepMs) if (v > maxStep) maxStep = v;
    const report: StragglerReport = {
      step,
      ranks: n,
      tracer: figures.tracer?.prefix ?? null,
      medianStepMs: finiteOrNull(medStep),
      skew: Number.isFinite(medStep) && medStep > 0 && Number.isFinite(maxStep) ? maxStep / medStep : null,
      medianWaitMs: finiteOrNull(medWait),
      slowest,
      chronic,
    };
    const record: RankTimingRecord = {
      step,
      timestamp,
      ranks: columns.ranks,
      rankNames: columns.rankNames,
      hosts: columns.hosts,
      stepMs: figures.stepMs,
      latenessMs,
      waitMs: figures.waitMs,
      report,
    };
    return { report, states: stragglerStates(report), record };
  }

  /** Each rank's excess on one measure, and the bar: max(minExcessMs, tolerance × median step, MAD_K robust σ). */
  private scores(
    measure: StragglerMeasure,
    excess: Float64Array,
    values: Float64Array,
    median: number,
    scale: number,
  ): MeasureScores {
    const { median: mad, n } = this.scratch.median(values, median);
    return {
      measure,
      excess,
      n,
      threshold: standsOutBar(this.options.minExcessMs, this.options.tolerance, scale, mad),
    };
  }

  /** The rows named on some measure (at most topK per measure), with their measures and a score (excess / bar, at most). */
  private slowRows(scores: readonly MeasureScores[]): Map<number, { by: StragglerMeasure[]; score: number }> {
    const rows = new Map<number, { by: StragglerMeasure[]; score: number }>();
    for (const s of scores) {
      if (s.n < MIN_RANKS_COMPARED) continue;
      const over: number[] = [];
      for (let i = 0; i < s.excess.length; i++) if ((s.excess[i] ?? NaN) > s.threshold) over.push(i);
      over.sort((a, b) => (s.excess[b] ?? 0) - (s.excess[a] ?? 0));
      for (const i of over.slice(0, this.options.topK)) {
        const row = rows.get(i) ?? { by: [], score: 0 };
        row.by.push(s.measure);
        row.score = Math.max(row.score, (s.excess[i] ?? 0) / Math.max(s.threshold, 1e-9));
        rows.set(i, row);
      }
    }
    return rows;
  }

  /** Each slow row's phase furthest above the median rank's (per step of the Tracer). */
  private phaseHints(figures: Figures, rows: readonly number[]): Map<number, NonNullable<SlowRank["phase"]>> {
    const hints = new Map<number, NonNullable<SlowRank["phase"]>>();
    const tracer = figures.tracer;
    if (tracer === undefined || rows.length === 0) return hints;
    const perStep = new Float64Array(figures.stepMs.length);
    for (const p of tracer.phases) {
      if (p.kind !== "phase") continue;
      for (let i = 0; i < perStep.length; i++) {
        const steps = tracer.steps[i] ?? 0;
        const count = p.count[i] ?? 0;
        const ms = p.totalMs[i] ?? 0;
        perStep[i] = steps > 0 ? ms / steps : count > 0 ? ms / count : NaN;
      }
      const median = this.scratch.median(perStep).median;
      for (const i of rows) {
        const ms = perStep[i] ?? NaN;
        const best = hints.get(i);
        if (Number.isFinite(ms) && ms - median > 0 && (best === undefined || ms - median > best.ms - best.medianMs))
          hints.set(i, { name: p.name, ms, medianMs: median });
      }
    }
    return hints;
  }

  /** Move the chronic window one flush on (`named` were slow in it); the chronic ranks now. */
  private advance(named: ReadonlySet<string>, refs: ReadonlyMap<string, RankRef> = new Map()): ChronicRank[] {
    const window = this.options.chronicWindow;
    const mask = window >= 31 ? 0x7fffffff : (1 << window) - 1;
    const needed = Math.ceil(window / 2);
    for (const [name, ref] of refs) if (!this.history.has(name)) this.history.set(name, { bits: 0, ref });
    const chronic: ChronicRank[] = [];
    for (const [name, entry] of this.history) {
      entry.bits = ((entry.bits << 1) | (named.has(name) ? 1 : 0)) & mask;
      const ref = refs.get(name);
      if (ref !== undefined) entry.ref = ref;
      if (entry.bits === 0) {
        this.history.delete(name);
        continue;
      }
      const slowFlushes = popcount(entry.bits);
      if (slowFlushes >= needed) chronic.push({ ...entry.ref, slowFlushes, window });
    }
    return chronic.sort((a, b) => b.slowFlushes - a.slowFlushes || a.rank - b.rank);
  }
}

function popcount(bits: number): number {
  let n = 0;
  for (let b = bits; b !== 0; b &= b - 1) n++;
  return n;
}

function finiteOrNull(v: number | undefined): number | null {
  return v !== undefined && Number.isFinite(v) ? v : null;
}

/** `{rankName}@{host}`: how a rank is named in its internal keys. */
function rankKeyName(ref: RankRef): string {
  return ref.host === "" ? ref.rankName : `${ref.rankName}@${ref.host}`;
}

const MEASURE_KEYS: Record<StragglerMeasure, [key: string, value: (s: SlowRank) => number | null]> = {
  step: ["step_ms", (s) => s.stepMs],
  lateness: ["lateness_ms", (s) => s.latenessMs],
  wait: ["caused_wait_ms", (s) => s.causedWaitMs],
};

/**
 * The report as internal keys (`rankscope/stragglers/…`, hidden by default like every internal
 * key): the skew and medians, how many ranks were named and are chronic, and per named rank its
 * figure on each measure it was named for, and its chronic count.
 */
export function stragglerStates(report: StragglerReport): KeyState[] {
  const states: KeyState[] = [];
  const add = (key: string, value: number | null): void => {
    if (value !== null && Number.isFinite(value))
      states.push({ key: `${STRAGGLER_KEY_PREFIX}${key}`, reduce: "mean", state: singleValueState(value) });
  };
  add("skew", report.skew);
  add("median_step_ms", report.medianStepMs);
  add("median_wait_ms", report.medianWaitMs);
  add("slow_ranks", report.slowest.length);
  add("chronic_ranks", report.chronic.length);
  for (const s of report.slowest)
    for (const m of s.by) add(`${MEASURE_KEYS[m][0]}/${rankKeyName(s)}`, MEASURE_KEYS[m][1](s));
  for (const c of report.chronic) add(`chronic/${rankKeyName(c)}`, c.slowFlushes);
  return states;
}
