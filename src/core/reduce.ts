/**
 * Reductions: what happens to the values recorded under one key between two flushes.
 *
 * A reduction is a `ReduceDefinition`: it creates accumulators (one per key per process), merges
 * their plain states (across flushes and ranks), and turns a state into values. The controller
 * only ever sees states, so a reduction is defined once and works in every logging mode.
 */

/** A plain, JSON-serialisable snapshot of an accumulator. `v` is the state format's version. */
export interface AccumulatorState {
  readonly v: number;
  /** How many values were appended. A state with count 0 is never sent or logged. */
  readonly count: number;
}

/**
 * The running reduction of one key in one process. `In` is what it accepts: numbers (every
 * built-in but `SAMPLE`) or records (`SampleRecord`).
 */
export interface Accumulator<S extends AccumulatorState = AccumulatorState, In = number> {
  /** Values appended since creation or the last `reset()`. */
  readonly count: number;
  /** Add one recorded value. Must not do I/O; should not allocate for numeric reductions. */
  append(value: In): void;
  /** The reduced value of what was appended so far (same shape as `ReduceDefinition.value`). */
  value(): ReducedScalars;
  /** A plain snapshot of the accumulator, to merge with other ranks' states. */
  state(): S;
  /** Forget every appended value (called at flush, after `state()`). */
  reset(): void;
}

/**
 * The scalar outputs of a reduction: a number is logged under the key itself; an object maps
 * suffixes to numbers, logged as `key/suffix` (e.g. `{ p50: 1.2 }` → `latency/p50`).
 */
export type ReducedScalars = number | Readonly<Record<string, number>>;

/** Buckets of a histogram, in the shape TensorBoard's `HistogramProto` uses. */
export interface HistogramData {
  readonly count: number;
  readonly min: number;
  readonly max: number;
  readonly sum: number;
  readonly sumSquares: number;
  /** Upper edge of each bucket, ascending; bucket i holds values in (limit[i-1], limit[i]]. */
  readonly bucketLimits: readonly number[];
  readonly bucketCounts: readonly number[];
}

/** A record kept by the `SAMPLE` reduction: any plain object, e.g. `{ prompt, response, reward }`. */
export type SampleRecord = Readonly<Record<string, unknown>>;

/** What every reduction has, whatever it accepts (see `ReduceDefinition`). */
export interface ReduceDefinitionBase<S extends AccumulatorState = AccumulatorState> {
  /** The name used in `recordMetric(key, value, name)` and carried in states between ranks. */
  readonly name: string;
  /** Merge states (from several flushes or ranks) into one. Must be associative and commutative. */
  merge(states: readonly S[]): S;
  /** The scalar outputs of a (possibly merged) state. */
  value(state: S): ReducedScalars;
  /** For reductions that keep a distribution: the histogram of a state. */
  histogram?(state: S): HistogramData;
  /** For reductions that keep records: the records of a state. */
  samples?(state: S): SampleRecord[];
  /**
   * What is wrong with a state that arrived from another process (its fields, their types,
   * lengths and ranges), or undefined when it is a valid state of this reduction. The transport
   * checks `v` and `count` itself and drops (and counts) a state this rejects, so a corrupted
   * state never reaches `merge` or `value`. Every built-in reduction has one; without it only
   * `v` and `count` are checked.
   */
  check?(state: Readonly<Record<string, unknown>>): string | undefined;
}

/** A reduction of numbers (and bigints, converted): every built-in but `SAMPLE`. */
export interface NumericReduceDefinition<
  S extends AccumulatorState = AccumulatorState,
> extends ReduceDefinitionBase<S> {
  /** Numbers: the default, so a user-defined reduction may leave it out. */
  readonly input?: "number";
  /** A new, empty accumulator. */
  create(): Accumulator<S, number>;
}

/** A reduction of plain-object records, such as `SAMPLE`. */
export interface RecordReduceDefinition<S extends AccumulatorState = AccumulatorState> extends ReduceDefinitionBase<S> {
  readonly input: "object";
  /** A new, empty accumulator. */
  create(): Accumulator<S, SampleRecord>;
}

/**
 * Everything rankscope needs to know about one reduction. Register your own with `registerReduce`.
 * `input` tells which kind it is, so `definition.create()` is an accumulator of numbers or of
 * records once `input` is checked.
 *
 * The registry holds definitions as `ReduceDefinition<AccumulatorState>`: states arrive from other
 * ranks with only a reduce name, so which state type a definition takes is known at run time (by
 * that name), not to the compiler — the one place where `S` is erased.
 */
export type ReduceDefinition<S extends AccumulatorState = AccumulatorState> =
  NumericReduceDefinition<S> | RecordReduceDefinition<S>;

/** A definition as `registerReduce` takes it: a `ReduceDefinition` without its name. */
export type ReduceDefinitionInput<S extends AccumulatorState = AccumulatorState> =
  Omit<NumericReduceDefinition<S>, "name"> | Omit<RecordReduceDefinition<S>, "name">;

/** The built-in reduction names. */
export type BuiltinReduce = "mean" | "sum" | "max" | "min" | "std" | "quantiles" | "histogram" | "rate" | "sample";

/**
 * Reductions added with `registerReduce`, by name, for the compiler (the values are not used).
 * Declare yours once so `recordMetric(key, v, "last")` type-checks, while a typo such as `"avg"`
 * stays a compile error:
 *
 * ```ts
 * declare module "rankscope" { interface RegisteredReduces { last: true } }
 * ```
 *
 * A reduction of records (`input: "object"`) is declared as `"object"` instead of `true`, so that
 * `recordMetric` takes records for it, and numbers for every other.
 */
export interface RegisteredReduces {
  /** The stats face's mean/min/max reduction (`AVG_MIN_MAX`). */
  avg_min_max: true;
}

/** A reduction name: a built-in, a parameterised built-in (`Reduce.quantiles([...])`), or a registered one (`RegisteredReduces`). */
export type ReduceName =
  | BuiltinReduce
  | `quantiles(${string})`
  | `buckets(${string})`
  | `sample(${string})`
  | (keyof RegisteredReduces & string);

/**
 * The reductions that take records (plain objects) instead of numbers: `sample`, its parameterised
 * forms, and registered ones declared as `"object"` (`interface RegisteredReduces { best: "object" }`).
 */
export type RecordReduceName =
  | "sample"
  | `sample(${string})`
  | {
      [K in keyof RegisteredReduces]: RegisteredReduces[K] extends "object" ? K & string : never;
    }[keyof RegisteredReduces];

/** The reductions that take numbers: every other name. */
export type NumericReduceName = Exclude<ReduceName, RecordReduceName>;
