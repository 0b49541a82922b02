/**
 * One key's entry in the collector (`collector.ts`): what it holds (its reduction and accumulator,
 * its ids), the stand-in that takes its values while the collector is closed, and the values a
 * numeric entry takes (a number, or a bigint as the nearest float64).
 */
import { warn } from "./diagnostics.js";
import type {
  Accumulator,
  AccumulatorState,
  NumericReduceDefinition,
  RecordReduceDefinition,
  SampleRecord,
} from "./reduce.js";

/** What every key's entry has, whatever its reduction accepts (see `MetricEntry`). */
export interface MetricEntryBase {
  /** Interned id of the key, stable for the life of the process (used by the stream ring). */
  readonly id: number;
  readonly key: string;
  readonly reduce: string;
  /** The stream ring's id for this key, valid while `streamGeneration` is the stream's (its cache). */
  streamId: number;
  streamGeneration: number;
}

/** A key whose reduction takes numbers (every built-in but `SAMPLE`). */
export interface NumericEntry extends MetricEntryBase {
  readonly numeric: true;
  readonly definition: NumericReduceDefinition;
  /** Swapped for a counting stand-in while the collector is closed (see `Collector.close`). */
  accumulator: Accumulator<AccumulatorState, number>;
}

/** A key whose reduction takes plain-object records (`SAMPLE`). */
export interface RecordEntry extends MetricEntryBase {
  readonly numeric: false;
  readonly definition: RecordReduceDefinition;
  /** Swapped for a counting stand-in while the collector is closed (see `Collector.close`). */
  accumulator: Accumulator<AccumulatorState, SampleRecord>;
}

/** One key's accumulator in this process; `numeric` tells what its accumulator accepts. */
export type MetricEntry = NumericEntry | RecordEntry;

/**
 * Receives every raw numeric value as it is recorded, for `per_rank_no_reduce` backends. It runs on
 * the caller's thread inside `recordMetric`, so it must not do I/O or block.
 */
export interface StreamProducer {
  record(entry: NumericEntry, value: number, step: number): void;
}

/**
 * Stands in for every accumulator while the collector is closed: counts what is recorded (the user
 * is told once) and holds nothing, so a flush sends nothing for it.
 */
export class ClosedAccumulator<In> implements Accumulator<AccumulatorState, In> {
  readonly count = 0;
  constructor(private readonly collector: { recordedAfterClose: number }) {}
  append(_value: In): void {
    if (this.collector.recordedAfterClose++ === 0) {
      warn(
        "collector.recordAfterShutdown",
        "a value was recorded after the logger's shutdown(): values recorded now are not logged (counted in getCollector().recordedAfterClose) until getOrCreateMetricLogger() starts a new logger",
      );
    }
  }
  value(): number {
    return NaN;
  }
  state(): AccumulatorState {
    return { v: 1, count: 0 };
  }
  reset(): void {}
}

/** Put `stand-in` in place of an entry's accumulator; returns what puts the real one back. */
export function swapAccumulator<In>(
  entry: { accumulator: Accumulator<AccumulatorState, In> },
  standIn: Accumulator<AccumulatorState, In>,
): () => void {
  const real = entry.accumulator;
  entry.accumulator = standIn;
  return () => {
    entry.accumulator = real;
  };
}

/** A value as the number a numeric reduction takes: a number as is, a bigint rounded (with a warning), else a TypeError. */
export function toNumber(key: string, value: unknown): number {
  if (typeof value === "number") return value;
  if (typeof value === "bigint") {
    // Reductions are float64 arithmetic: a bigint becomes the nearest double, exact up to ±2^53.
    const number = Number(value);
    if (!Number.isFinite(number)) {
      throw new RangeError(
        `recordMetric("${key}", value): the bigint ${value} is beyond the range of a float64 (about ±1.8e308) and would become ${number}; scale it down first`,
      );
    }
    if (BigInt(number) !== value) {
      warn(
        `recordMetric.bigintRounded:${key}`,
        `recordMetric("${key}", ${value}n): metric values are float64, exact up to ±2^53; this bigint was recorded as the nearest one, ${number.toExponential()} (off by ${BigInt(number) - value}). Keep exact integers in a sample record or the run config, or scale the value down.`,
      );
    }
    return number;
  }
  throw new TypeError(
    `recordMetric("${key}", value) takes a number or a bigint, got ${describeValue(value)}; ` +
      `for records (objects) use Reduce.SAMPLE`,
  );
}

/** A short description of a value for error messages: its type and, when short, its text. */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (typeof value === "string")
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (typeof value === "object") return `an object (${value.constructor?.name ?? "Object"})`;
  return `${typeof value} ${String(value)}`;
}
