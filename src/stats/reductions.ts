/**
 * The one reduction AReaL's stats need that the core does not have: average, minimum and maximum
 * of the masked entries in one state (`key/avg`, `key/min`, `key/max`), merged exactly across
 * flushes and ranks (the average weighted by how many entries each rank had).
 *
 * Registered on import of `src/stats`, which `rankscope`'s index imports, so every rank and the
 * controller that load the package know it.
 */
import type { Accumulator, AccumulatorState, ReduceDefinitionInput } from "../core/reduce.js";
import { getReduceDefinition, hasReduce, registerReduce } from "../core/registry.js";
import { firstProblem, numbers, versionOne } from "../core/accumulators/state-check.js";

/** The reduction's name, as carried in states. */
export const AVG_MIN_MAX = "avg_min_max";

/** Sum, count, minimum and maximum of the entries appended. */
export interface AvgMinMaxState extends AccumulatorState {
  readonly sum: number;
  readonly min: number;
  readonly max: number;
}

export class AvgMinMaxAccumulator implements Accumulator<AvgMinMaxState> {
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  append(value: number): void {
    this.sum += value;
    this.count++;
    // Math.min/max keep NaN, so a diverged value shows instead of vanishing.
    this.min = Math.min(this.min, value);
    this.max = Math.max(this.max, value);
  }
  /** Add the moments of many entries at once (what `stats.stat` computed in one pass over a mask). */
  appendMoments(sum: number, count: number, min: number, max: number): void {
    this.sum += sum;
    this.count += count;
    this.min = Math.min(this.min, min);
    this.max = Math.max(this.max, max);
  }
  value(): Record<string, number> {
    return valueOf(this);
  }
  state(): AvgMinMaxState {
    return { v: 1, count: this.count, sum: this.sum, min: this.min, max: this.max };
  }
  reset(): void {
    this.count = 0;
    this.sum = 0;
    this.min = Infinity;
    this.max = -Infinity;
  }
}

function valueOf(s: { count: number; sum: number; min: number; max: number }): Record<string, number> {
  return { avg: s.count > 0 ? s.sum / s.count : 0, min: s.min, max: s.max };
}

const definition: ReduceDefinitionInput<AvgMinMaxState> = {
  create: () => new AvgMinMaxAccumulator(),
  merge(states) {
    let count = 0;
    let sum = 0;
    let min = Infinity;
    let max = -Infinity;
    for (const s of states) {
      count += s.count;
      sum += s.sum;
      min = Math.min(min, s.min);
      max = Math.max(max, s.max);
    }
    return { v: 1, count, sum, min, max };
  },
  value: valueOf,
  check: (s) => firstProblem(versionOne(s), numbers(s, ["sum", "min", "max"])),
};

/** Register `avg_min_max` (idempotent). */
export function registerStatsReductions(): void {
  if (!hasReduce(AVG_MIN_MAX)) registerReduce(AVG_MIN_MAX, definition);
  getReduceDefinition(AVG_MIN_MAX);
}

registerStatsReductions();
