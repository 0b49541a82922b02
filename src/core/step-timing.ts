/**
 * Step timings a rank carries with its flush answer, for straggler attribution on the controller
 * (docs/stragglers.md): each `Tracer`'s completed steps and their total time, each phase
 * (`tracer.step(name)`) and each marked barrier (`tracer.barrier(name)`), summed since the last
 * flush. The controller compares ranks with them; it never sees a rank's clock, only durations the
 * rank measured on its own monotonic clock.
 *
 * On the rank, a Tracer adds to this thread's `StepTimings` (held by the thread's collector) by
 * slot: a slot is a (prefix, name, kind) interned once per thread, and a step adds to two numbers
 * of a typed array — no lookup, no allocation. `take()` builds the answer's `TracerTiming`s at a
 * flush and resets the sums.
 *
 * `TimingColumns` is the same information for many ranks, column by column: what a host agent
 * forwards for its ranks, and what the controller analyses (src/controller/stragglers.ts).
 */

/** A phase is a `tracer.step(name)`; a barrier is a `tracer.barrier(name)` (time spent waiting at a synchronisation point). */
export type PhaseKind = "phase" | "barrier";

/** One phase (or barrier) of a Tracer at one rank since the last flush. */
interface PhaseTiming {
  readonly name: string;
  readonly kind: PhaseKind;
  /** How many times it was marked. */
  readonly count: number;
  /** Their total duration, ms. */
  readonly totalMs: number;
}

/** One Tracer (by prefix) at one rank since the last flush. */
export interface TracerTiming {
  readonly prefix: string;
  /** Completed runs (`start()` … `stop()`). */
  readonly steps: number;
  /** Their total duration, ms. */
  readonly totalMs: number;
  readonly phases: readonly PhaseTiming[];
}

/** What a rank's flush answer carries about its steps (`RankSnapshot.timing`). */
export interface RankTiming {
  /** The rank's number (its identity's). */
  readonly rank: number;
  /** The host it runs on. */
  readonly host: string;
  readonly tracers: readonly TracerTiming[];
}

/** At most this many (prefix, name, kind) slots are timed per thread; later ones are not (their metrics still are). */
const MAX_TIMING_SLOTS = 4096;

interface SlotInfo {
  readonly prefix: string;
  /** Empty for the Tracer's own slot (its whole runs). */
  readonly name: string;
  readonly kind: PhaseKind | "total";
}

/** This thread's slots, in id order (modules are per thread, so is this table). */
const slots: SlotInfo[] = [];

/**
 * The slot of a Tracer's whole runs (`name` undefined), or of one of its phases or barriers; -1
 * once `MAX_TIMING_SLOTS` are taken. Callers cache the id (the Tracer keeps it with its keys).
 */
export function timingSlot(prefix: string, name?: string, kind: PhaseKind = "phase"): number {
  if (slots.length >= MAX_TIMING_SLOTS) return -1;
  slots.push(name === undefined ? { prefix, name: "", kind: "total" } : { prefix, name, kind });
  return slots.length - 1;
}

/** `ms` to the microsecond: what an answer carries (shorter JSON; the clock is not finer in practice). */
export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** A rank's step timings since the last flush, by slot. One per collector. */
export class StepTimings {
  private counts = new Float64Array(64);
  private sums = new Float64Array(64);
  /** Highest slot added to since the last take, + 1 (0: nothing to take). */
  private used = 0;

  /** Add one duration (ms) to a slot. A negative slot (the table was full) is ignored. */
  add(slot: number, ms: number): void {
    if (slot < 0) return;
    if (slot >= this.sums.length) this.grow(slot);
    this.counts[slot] = (this.counts[slot] ?? 0) + 1;
    this.sums[slot] = (this.sums[slot] ?? 0) + ms;
    if (slot >= this.used) this.used = slot + 1;
  }

  /** True when nothing was added since the last `take`. */
  get empty(): boolean {
    return this.used === 0;
  }

  /** The Tracers' timings since the last call (in the order their slots were made), and reset; [] when none. */
  take(): TracerTiming[] {
    const byPrefix = new Map<string, { steps: number; totalMs: number; phases: PhaseTiming[] }>();
    for (let slot = 0; slot < this.used; slot++) {
      const count = this.counts[slot] ?? 0;
      if (count === 0) continue;
      const info = slots[slot];
      const totalMs = this.sums[slot] ?? 0;
      this.counts[slot] = 0;
      this.sums[slot] = 0;
      if (info === undefined) continue;
      let tracer = byPrefix.get(info.prefix);
      if (tracer === undefined) {
        tracer = { steps: 0, totalMs: 0, phases: [] };
        byPrefix.set(info.prefix, tracer);
      }
      if (info.kind === "total") {
        tracer.steps += count;
        tracer.totalMs += roundMs(totalMs);
      } else tracer.phases.push({ name: info.name, kind: info.kind, count, totalMs: roundMs(totalMs) });
    }
    this.used = 0;
    return boundedTracerTimings(
      [...byPrefix].map(([prefix, t]) => ({ prefix, steps: t.steps, totalMs: t.totalMs, phases: t.phases })),
    );
  }

  private grow(slot: number): void {
    const size = Math.min(MAX_TIMING_SLOTS, Math.max(slot + 1, this.sums.length * 2));
    const counts = new Float64Array(size);
    const sums = new Float64Array(size);
    counts.set(this.counts);
    sums.set(this.sums);
    this.counts = counts;
    this.sums = sums;
  }
}

/** Two answers' timings as one (a late answer carried into the next): sums add, per prefix and phase. */
export function mergeTracerTimings(a: readonly TracerTiming[], b: readonly TracerTiming[]): TracerTiming[] {
  if (a.length === 0) return [...b];
  if (b.length === 0) return [...a];
  const out = new Map<string, { steps: number; totalMs: number; phases: Map<string, PhaseTiming> }>();
  for (const t of [...a, ...b]) {
    const into = out.get(t.prefix) ?? { steps: 0, totalMs: 0, phases: new Map<string, PhaseTiming>() };
    into.steps += t.steps;
    into.totalMs += t.totalMs;
    for (const p of t.phases) {
      const id = `${p.kind}:${p.name}`;
      const seen = into.phases.get(id);
      into.phases.set(
        id,
        seen === undefined ? p : { ...p, count: seen.count + p.count, totalMs: seen.totalMs + p.totalMs },
      );
    }
    out.set(t.prefix, into);
  }
  return [...out].map(([prefix, t]) => ({
    prefix,
    steps: t.steps,
    totalMs: t.totalMs,
    phases: [...t.phases.values()],
  }));
}

/** One phase of one Tracer across the ranks of a `TimingColumns` (NaN/0 where a rank had none). */
interface PhaseColumns {
  readonly name: string;
  readonly kind: PhaseKind;
  readonly count: number[];
  readonly totalMs: number[];
}

/** One Tracer across the ranks of a `TimingColumns` (0 steps where a rank had none). */
export interface TracerColumns {
  readonly prefix: string;
  readonly steps: number[];
  readonly totalMs: number[];
  readonly phases: PhaseColumns[];
}

/**
 * Many ranks' timings at one flush, column by column (row i is one rank in every column): what a
 * host agent forwards for its ranks, and what the controller analyses. `arrivalMs` is when the
 * rank's answer arrived, in ms after its receiver asked (the controller for its direct ranks, the
 * agent for its host's).
 */
export interface TimingColumns {
  readonly rankNames: string[];
  readonly ranks: number[];
  readonly hosts: string[];
  readonly arrivalMs: number[];
  readonly tracers: TracerColumns[];
}

/** An empty `TimingColumns`. */
export function emptyTimingColumns(): TimingColumns {
  return { rankNames: [], ranks: [], hosts: [], arrivalMs: [], tracers: [] };
}

/** The number of ranks (rows) in `columns`. */
export function timingRows(columns: Pick<TimingColumns, "rankNames">): number {
  return columns.rankNames.length;
}

function tracerColumns(columns: TimingColumns, prefix: string, rows: number): TracerColumns {
  let tracer = columns.tracers.find((t) => t.prefix === prefix);
  if (tracer === undefined) {
    tracer = { prefix, steps: new Array<number>(rows).fill(0), totalMs: new Array<number>(rows).fill(0), phases: [] };
    columns.tracers.push(tracer);
  }
  return tracer;
}

function phaseColumns(tracer: TracerColumns, name: string, kind: PhaseKind, rows: number): PhaseColumns {
  let phase = tracer.phases.find((p) => p.name === name && p.kind === kind);
  if (phase === undefined) {
    phase = { name, kind, count: new Array<number>(rows).fill(0), totalMs: new Array<number>(rows).fill(0) };
    tracer.phases.push(phase);
  }
  return phase;
}

/** Pad every column to `rows` (a rank without a Tracer or phase has 0 of it). */
function padColumns(columns: TimingColumns, rows: number): void {
  for (const t of columns.tracers) {
    while (t.steps.length < rows) t.steps.push(0);
    while (t.totalMs.length < rows) t.totalMs.push(0);
    for (const p of t.phases) {
      while (p.count.length < rows) p.count.push(0);
      while (p.totalMs.length < rows) p.totalMs.push(0);
    }
  }
}

/** Append one rank (its answer's arrival and timings) to `columns`. */
export function appendRankTiming(
  columns: TimingColumns,
  rankName: string,
  rank: number,
  host: string,
  arrivalMs: number,
  tracers: readonly TracerTiming[],
): void {
  const row = timingRows(columns);
  columns.rankNames.push(rankName);
  columns.ranks.push(rank);
  columns.hosts.push(host);
  columns.arrivalMs.push(arrivalMs);
  padColumns(columns, row + 1);
  for (const t of tracers) {
    const tc = tracerColumns(columns, t.prefix, row + 1);
    tc.steps[row] = t.steps;
    tc.totalMs[row] = t.totalMs;
    for (const p of t.phases) {
      const pc = phaseColumns(tc, p.name, p.kind, row + 1);
      pc.count[row] = p.count;
      pc.totalMs[row] = p.totalMs;
    }
  }
}

/** `to.push(...from)` without spreading (a spread of thousands of arguments is slow, and bounded by the stack). */
function pushAll<T>(to: T[], from: readonly T[]): void {
  for (let i = 0; i < from.length; i++) to.push(from[i] as T);
}

/** Append every row of `more` to `columns` (a host's ranks to the flush's). */
export function appendTimingColumns(columns: TimingColumns, more: TimingColumns): void {
  const start = timingRows(columns);
  const added = timingRows(more);
  pushAll(columns.rankNames, more.rankNames);
  pushAll(columns.ranks, more.ranks);
  pushAll(columns.hosts, more.hosts);
  pushAll(columns.arrivalMs, more.arrivalMs);
  padColumns(columns, start);
  for (const t of more.tracers) {
    const tc = tracerColumns(columns, t.prefix, start);
    pushAll(tc.steps, t.steps);
    pushAll(tc.totalMs, t.totalMs);
    for (const p of t.phases) {
      const pc = phaseColumns(tc, p.name, p.kind, start);
      pushAll(pc.count, p.count);
      pushAll(pc.totalMs, p.totalMs);
    }
  }
  padColumns(columns, start + added);
}

/** At most this many Tracers ride in one answer, with at most this many phases each; names at most this long (the receiver refuses more). */
export const MAX_ANSWER_TRACERS = 64;
export const MAX_TRACER_PHASES = 64;
export const MAX_TIMING_NAME = 256;

/** `tracers` within the bounds a receiver accepts: Tracers and phases past them are left out (the metrics still have them). */
function boundedTracerTimings(tracers: TracerTiming[]): TracerTiming[] {
  const kept = tracers.filter((t) => t.prefix.length <= MAX_TIMING_NAME).slice(0, MAX_ANSWER_TRACERS);
  return kept.map((t) =>
    t.phases.length <= MAX_TRACER_PHASES && t.phases.every((p) => p.name.length <= MAX_TIMING_NAME)
      ? t
      : { ...t, phases: t.phases.filter((p) => p.name.length <= MAX_TIMING_NAME).slice(0, MAX_TRACER_PHASES) },
  );
}

/**
 * A host's ranks' timings as its agent forwards them (`HostStatesHeader.timing`): `TimingColumns`
 * without the names, which the controller already holds — `rows` are indexes into the answer's
 * rank list (the `ranks` of its membership version), one per rank that answered with timings.
 */
export interface HostTiming {
  readonly rows: number[];
  readonly ranks: number[];
  readonly arrivalMs: number[];
  readonly tracers: TracerColumns[];
}
