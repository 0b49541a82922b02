/**
 * `Reduce.RATE`: a count per flush and per second — requests/s, tokens/s. `key/total` is the sum
 * of the values recorded since the last flush (exact across ranks), `key/per_s` that sum over the
 * seconds since the key's previous flush in each recording thread (or since its first value),
 * added across threads, processes and hosts: the run's throughput is the sum of each replica's.
 *
 * The window is taken where the values are (`Date.now()` at reset and at `state()`, never per
 * value), so appending is one add. A key idle through whole flushes averages over them at its next
 * one; a late answer merged into the next flush adds its rate to that flush's.
 */
import type { Accumulator, AccumulatorState, NumericReduceDefinition } from "../reduce.js";
import { firstProblem, numbers, versionOne } from "./state-check.js";

/** Plain state: the sum, and that sum per second of its window (added across recorders). */
export interface RateState extends AccumulatorState {
  readonly sum: number;
  readonly perSecond: number;
}

/** The shortest window a rate is taken over, in ms (two flushes in one millisecond). */
const MIN_WINDOW_MS = 1;

class RateAccumulator implements Accumulator<RateState> {
  count = 0;
  private sum = 0;
  private since = Date.now();
  append(value: number): void {
    this.count++;
    this.sum += value;
  }
  value(): Record<string, number> {
    return rateValue(this.state());
  }
  state(): RateState {
    const seconds = Math.max(Date.now() - this.since, MIN_WINDOW_MS) / 1000;
    return { v: 1, count: this.count, sum: this.sum, perSecond: this.sum / seconds };
  }
  reset(): void {
    this.count = 0;
    this.sum = 0;
    this.since = Date.now();
  }
}

function rateValue(s: RateState): Record<string, number> {
  return { total: s.sum, per_s: s.perSecond };
}

/** `Reduce.RATE`. */
export const rateReduce: NumericReduceDefinition<RateState> = {
  name: "rate",
  create: () => new RateAccumulator(),
  merge(states) {
    let count = 0;
    let sum = 0;
    let perSecond = 0;
    for (const s of states) {
      count += s.count;
      sum += s.sum;
      perSecond += s.perSecond;
    }
    return { v: 1, count, sum, perSecond };
  },
  value: rateValue,
  check: (s) => firstProblem(versionOne(s), numbers(s, ["sum", "perSecond"])),
};
