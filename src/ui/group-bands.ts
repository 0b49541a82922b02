/**
 * Runs grouped by config keys, drawn as one line per group (the mean across its runs) with a band
 * (± one standard deviation, or min–max): what `/api/groups` answers, computed on the dashboard's
 * server from the lines it reads, so the browser receives a group's few thousand points instead
 * of every run's (DESIGN.md, "Dashboard": measured both ways).
 *
 * Alignment by step: the group's x positions are the union of its runs' steps (evenly spaced
 * steps across the range instead when there are more than `maxPoints`); each run contributes, at
 * each position inside its own first-to-last step, its value there — its point when it has one,
 * else the straight line between its neighbouring points (a run logged every 10 steps still counts
 * at a step another run logged). NaN and ±∞ are left out of the statistics (a line through one is
 * not interpolated); `count` says how many runs a position's figures come from. The standard
 * deviation is the population one (divided by n, numpy's default), 0 for one run.
 */
import { compareCodePoints } from "./run-query.js";

/** One run's line: steps ascending, values of the same length. */
export interface RunLine {
  readonly steps: readonly number[];
  readonly values: readonly number[];
}

/** A group's band: arrays of equal length, one entry per x position (step). */
interface GroupBand {
  readonly steps: number[];
  readonly mean: number[];
  readonly std: number[];
  readonly min: number[];
  readonly max: number[];
  /** Runs with a finite value at the step. */
  readonly count: number[];
}

/** The x positions of a group: every step any run has, or `maxPoints` evenly spaced ones across them. */
function positions(lines: readonly RunLine[], maxPoints: number): number[] {
  const all = new Set<number>();
  for (const line of lines) for (const s of line.steps) if (Number.isFinite(s)) all.add(s);
  const steps = [...all].sort((a, b) => a - b);
  if (steps.length <= maxPoints) return steps;
  const first = steps[0] ?? 0;
  const last = steps[steps.length - 1] ?? 0;
  const out: number[] = [];
  for (let i = 0; i < maxPoints; i++) out.push(first + ((last - first) * i) / (maxPoints - 1));
  return out;
}

/**
 * A line's value at each of `xs` (ascending): its point there, the straight line between its
 * neighbours, or NaN outside its range or next to a non-finite point.
 */
export function valuesAt(line: RunLine, xs: readonly number[]): Float64Array {
  const out = new Float64Array(xs.length).fill(NaN);
  const n = line.steps.length;
  if (n === 0) return out;
  let j = 0;
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i] ?? NaN;
    while (j < n - 1 && (line.steps[j + 1] ?? Infinity) <= x) j++;
    const s0 = line.steps[j] ?? NaN;
    const v0 = line.values[j] ?? NaN;
    if (x === s0) {
      out[i] = v0;
      continue;
    }
    const s1 = line.steps[j + 1];
    const v1 = line.values[j + 1];
    if (x < s0 || s1 === undefined || v1 === undefined || x > s1) continue;
    out[i] = v0 + ((v1 - v0) * (x - s0)) / (s1 - s0);
  }
  return out;
}

/** Mean, population standard deviation, min, max and count of each position across a group's lines. */
export function groupBand(lines: readonly RunLine[], maxPoints: number): GroupBand {
  const xs = positions(lines, maxPoints);
  const columns = lines.map((line) => valuesAt(line, xs));
  const band: GroupBand = { steps: [], mean: [], std: [], min: [], max: [], count: [] };
  for (let i = 0; i < xs.length; i++) {
    let n = 0;
    let sum = 0;
    let min = Infinity;
    let max = -Infinity;
    for (const column of columns) {
      const v = column[i] ?? NaN;
      if (!Number.isFinite(v)) continue;
      n++;
      sum += v;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    if (n === 0) continue;
    const mean = sum / n;
    let squares = 0;
    for (const column of columns) {
      const v = column[i] ?? NaN;
      if (Number.isFinite(v)) squares += (v - mean) ** 2;
    }
    band.steps.push(xs[i] ?? NaN);
    band.mean.push(mean);
    band.std.push(Math.sqrt(squares / n));
    band.min.push(min);
    band.max.push(max);
    band.count.push(n);
  }
  return band;
}

/** A value runs are grouped by: a parameter's, or the run's group, experiment or status. */
export type GroupValue = string | number | boolean | null;

/** What runs are grouped by: `param:NAME`, or the run's `group`, `experiment` or `status`. */
type GroupField =
  { readonly kind: "param"; readonly name: string } | { readonly kind: "group" | "experiment" | "status" };

/** `by` of `/api/groups`, parsed; null when it is not one of the forms. */
export function parseGroupField(raw: string): GroupField | null {
  if (raw === "group" || raw === "experiment" || raw === "status") return { kind: raw };
  if (raw.startsWith("param:") && raw.length > "param:".length)
    return { kind: "param", name: raw.slice("param:".length) };
  return null;
}

/** The field's name as a group's label shows it. */
export function fieldLabel(field: GroupField): string {
  return field.kind === "param" ? field.name : field.kind;
}

function rank(v: GroupValue): number {
  return typeof v === "number" ? 0 : typeof v === "string" ? 1 : typeof v === "boolean" ? 2 : 3;
}

/** Groups in order of their values: numbers, text (by code point), booleans, then none, field by field. */
export function compareGroupValues(a: readonly GroupValue[], b: readonly GroupValue[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i] ?? null;
    const y = b[i] ?? null;
    const d = rank(x) - rank(y);
    if (d !== 0) return d;
    if (typeof x === "number" && typeof y === "number" && x !== y) return x - y;
    if (typeof x === "string" && typeof y === "string" && x !== y) return compareCodePoints(x, y);
    if (typeof x === "boolean" && typeof y === "boolean" && x !== y) return Number(x) - Number(y);
  }
  return a.length - b.length;
}
