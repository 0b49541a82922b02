/**
 * The collector: one per process (per JavaScript realm), holding an accumulator per key.
 *
 * `recordMetric` is the hot path: one `Map.get`, one string comparison, one `append`. Everything
 * else — new keys, wrong types, bigints, samples, the key bound, the disabled switch — lives on the
 * slow path, which a known numeric key never reaches. Accumulators are created once per key and
 * reset at flush (their states are taken first), so a key recorded every step never allocates.
 *
 * The collector is held by `processWide` (a versioned `Symbol.for` key), so two copies of the package
 * loaded in one process (a bundler, a dependency pinning another version) still share it.
 *
 * One key's entry, its stand-in while closed and the values it takes are `metric-entry.ts`.
 */
import { warn } from "./diagnostics.js";
import { envFlag, envInteger } from "./env.js";
import { isRecord } from "./json.js";
import type { NumericReduceName, RecordReduceName, ReduceName, SampleRecord } from "./reduce.js";
import { getReduceDefinition } from "./registry.js";
import { processWide } from "./process-wide.js";
import { HeldValues } from "./held-values.js";
import { StepTimings } from "./step-timing.js";
import { watchForNoLogger } from "./no-logger.js";
import { STRING_LIMITS, stringProblem } from "./string-limits.js";
import type { KeyState } from "./key-state.js";
import { isReportingWorker, linkWorkerCollector, workerGatherer } from "./worker-link.js";
import { AttributedEntries } from "./attributed-entries.js";
import type { MetricAttributes } from "./attributes.js";
import {
  ClosedAccumulator,
  describeValue,
  swapAccumulator,
  toNumber,
  type MetricEntry,
  type NumericEntry,
  type StreamProducer,
} from "./metric-entry.js";

export {
  describeValue,
  type MetricEntry,
  type MetricEntryBase,
  type NumericEntry,
  type RecordEntry,
  type StreamProducer,
} from "./metric-entry.js";

/** Default bound on distinct keys per process. */
export const DEFAULT_MAX_KEYS = 100_000;

/** The per-process collector. Use `recordMetric` and `metric`; this class is the machinery. */
export class Collector {
  /** Accumulators by key. Keys are never removed, so bound handles stay valid across flushes. */
  readonly entries = new Map<string, MetricEntry>();
  /** `entries` sorted by key (see `takeStates`); null after a key was added. */
  private sortedEntries: MetricEntry[] | null = null;
  /** When true (RANKSCOPE_DISABLE_METRICS), recording is a no-op. */
  disabled: boolean;
  /** New keys past this many are dropped and counted. */
  maxKeys: number;
  /** Records dropped because their key was new and the bound was reached. */
  droppedKeyRecords = 0;
  /** The step raw values recorded now belong to: the last flushed step + 1 (Forge's rule). */
  step = 0;
  /** Raw value consumer, set while a `per_rank_no_reduce` backend is active in this process. */
  stream: StreamProducer | null = null;
  /** Called once, when the first key is created (a user's worker thread links to the main thread then). */
  onFirstKey: (() => void) | null = null;
  /** Values recorded while closed (after the controller's `shutdown()`, before a new logger): never logged. */
  recordedAfterClose = 0;
  /** This thread's Tracer step timings since the last flush (carried with a rank's answer for straggler attribution). */
  readonly timings = new StepTimings();
  /** True once a logger or a rank (`RankRuntime`) flushes this collector. */
  hasFlusher = false;
  /**
   * Values recorded in a process that never had a logger (no `getOrCreateMetricLogger`, no rank):
   * never logged. Counted when the process ends, and warned about (`no-logger.ts`).
   */
  neverLogged = 0;
  /** The entries of attributed keys (`name{a=x}`), by name and attributes. */
  readonly attributed = new AttributedEntries(this);
  /** Counts `clear()`s: an entry bound before the last one is no longer this collector's. */
  epoch = 0;
  /** Values recorded but appended later (client chunk times), appended before each take. */
  readonly held = new HeldValues();
  /** While closed: what puts each entry's real accumulator back (run by `reopen`). */
  private reopeners: Array<() => void> | null = null;

  constructor() {
    this.disabled = envFlag("RANKSCOPE_DISABLE_METRICS");
    this.maxKeys = envInteger("RANKSCOPE_MAX_KEYS", DEFAULT_MAX_KEYS, 1);
  }

  /**
   * Close the collector (the controller's `shutdown()`): a value recorded from now on, until a new
   * logger reopens it, is never logged, so it is counted in `recordedAfterClose` and warned about
   * once. Costs the hot path nothing: each entry's accumulator is swapped for a counting stand-in
   * (what was recorded before stays in the real one, for a next logger's flush).
   */
  close(): void {
    if (this.reopeners !== null) return;
    this.reopeners = [];
    for (const entry of this.entries.values()) this.closeEntry(entry);
  }

  /** Reopen after `close` (a new logger): recording is logged again. */
  reopen(): void {
    const reopeners = this.reopeners;
    if (reopeners === null) return;
    this.reopeners = null;
    for (const reopen of reopeners) reopen();
  }

  /** True between `close` and `reopen`. */
  get closed(): boolean {
    return this.reopeners !== null;
  }

  private closeEntry(entry: MetricEntry): void {
    // One branch per kind, so each stand-in accepts what the entry's accumulator accepts.
    if (entry.numeric) this.reopeners?.push(swapAccumulator(entry, new ClosedAccumulator(this)));
    else this.reopeners?.push(swapAccumulator(entry, new ClosedAccumulator(this)));
  }

  /** Everything `recordMetric`'s fast path does not handle. */
  recordSlow(key: unknown, value: unknown, reduce: unknown): void {
    if (this.disabled) return;
    this.recordInto(this.entryFor(key, reduce), value);
  }

  /** `recordMetric` with attributes: the value goes to the key `key{a=x,…}` (see `attributes.ts`). */
  recordAttributed(key: unknown, value: unknown, reduce: unknown, attributes: MetricAttributes): void {
    if (this.disabled) return;
    this.recordInto(this.attributed.entry(key, reduce, attributes), value);
  }

  private recordInto(entry: MetricEntry | undefined, value: unknown): void {
    if (entry === undefined) return;
    if (entry.numeric) {
      const number = toNumber(entry.key, value);
      entry.accumulator.append(number);
      if (this.stream !== null) this.stream.record(entry, number, this.step);
    } else {
      if (!isRecord(value)) {
        throw new TypeError(
          `recordMetric("${entry.key}", ..., "${entry.reduce}") takes a plain object record (e.g. { prompt, reward }), got ${describeValue(value)}`,
        );
      }
      entry.accumulator.append(value);
    }
  }

  /**
   * The entry for a key, created on first use. Throws for an invalid key or reduce, or a reduce
   * that differs from the one the key was first recorded with; returns undefined (and counts)
   * when the key is new and the key bound is reached.
   */
  entryFor(key: unknown, reduce: unknown): MetricEntry | undefined {
    if (typeof key !== "string" || key.length === 0) {
      throw new TypeError(`recordMetric key must be a non-empty string, got ${describeValue(key)}`);
    }
    const existing = this.entries.get(key);
    if (existing !== undefined) {
      if (existing.reduce !== reduce) {
        throw new TypeError(
          `metric "${key}" was first recorded with reduce "${existing.reduce}" and is now recorded with ${describeValue(reduce)}; ` +
            `a key keeps one reduction per process: use a different key for the other reduction`,
        );
      }
      return existing;
    }
    const keyProblem = stringProblem(key, STRING_LIMITS.name);
    if (keyProblem !== undefined) {
      throw new TypeError(
        `recordMetric key ${JSON.stringify(key.slice(0, 80))}${key.length > 80 ? "…" : ""} ${keyProblem}: the team server and the dashboard keep keys of at most ${STRING_LIMITS.name} characters of valid text`,
      );
    }
    if (typeof reduce !== "string") {
      throw new TypeError(
        `recordMetric("${key}", ...) reduce must be a Reduce name such as Reduce.MEAN, got ${describeValue(reduce)}`,
      );
    }
    const definition = getReduceDefinition(reduce);
    if (this.entries.size >= this.maxKeys) {
      this.droppedKeyRecords++;
      warn(
        "collector.maxKeys",
        `more than ${this.maxKeys} distinct metric keys in this process; new keys (first: "${key}") are dropped and counted. ` +
          `Keys that embed ids (per-request, per-sample) are the usual cause; raise the bound with RANKSCOPE_MAX_KEYS if the keys are real.`,
      );
      return undefined;
    }
    const id = this.entries.size;
    // Both literals list the same fields in the same order, so every entry has one shape.
    const entry: MetricEntry =
      definition.input === "object"
        ? {
            id,
            key,
            reduce,
            definition,
            accumulator: definition.create(),
            numeric: false,
            streamId: -1,
            streamGeneration: 0,
          }
        : {
            id,
            key,
            reduce,
            definition,
            accumulator: definition.create(),
            numeric: true,
            streamId: -1,
            streamGeneration: 0,
          };
    this.entries.set(key, entry);
    this.sortedEntries = null;
    if (this.onFirstKey !== null) {
      const first = this.onFirstKey;
      this.onFirstKey = null;
      first();
    }
    if (this.reopeners !== null) this.closeEntry(entry);
    return entry;
  }

  /**
   * `entryFor` for a key whose reduction must take numbers (handles, the stats face): throws, naming
   * `caller`, when it takes records instead.
   */
  numericEntryFor(
    key: unknown,
    reduce: unknown,
    caller = "metric",
    attributes?: MetricAttributes,
  ): NumericEntry | undefined {
    const entry =
      attributes === undefined ? this.entryFor(key, reduce) : this.attributed.entry(key, reduce, attributes);
    if (entry === undefined || entry.numeric) return entry;
    throw new TypeError(
      `${caller}("${entry.key}", "${entry.reduce}") binds numeric reductions only; record samples with recordMetric`,
    );
  }

  /**
   * Take the state of every key recorded since the last call and reset it, synchronously: values
   * recorded after this call belong to the next flush. Sorted by key.
   */
  takeStates(): KeyState[] {
    this.held.appendHeld();
    const states: KeyState[] = [];
    for (const entry of this.entriesInKeyOrder()) {
      if (entry.accumulator.count === 0) continue;
      states.push({ key: entry.key, reduce: entry.reduce, state: entry.accumulator.state() });
      entry.accumulator.reset();
    }
    return states;
  }

  /**
   * Every entry, sorted by key (for `takeStates`, and the wire encoder that takes states straight
   * from the accumulators). Sorted again only after a new key: sorting 1,000 keys at every flush
   * cost more than taking their states. Do not modify the array.
   */
  entriesInKeyOrder(): readonly MetricEntry[] {
    return (this.sortedEntries ??= [...this.entries.values()].sort((a, b) =>
      a.key < b.key ? -1 : a.key > b.key ? 1 : 0,
    ));
  }

  /** Forget every key and count (tests, and a process that starts a new run). Invalidates handles. */
  clear(): void {
    this.reopen();
    this.epoch++;
    this.held.clear();
    this.entries.clear();
    this.attributed.clear();
    this.sortedEntries = null;
    this.droppedKeyRecords = 0;
    this.step = 0;
    this.timings.take();
  }
}

/**
 * This thread's collector (created on first use). In a user's worker thread it links to the main
 * thread when its first key is recorded, so its values reach the main thread's flush (see
 * `worker-link.ts`); in the main thread it starts listening for such workers.
 */
export { NO_LOGGER_WARN_MS, pendingValues } from "./no-logger.js";

export function getCollector(): Collector {
  return processWide("collector", () => {
    const created = new Collector();
    if (isReportingWorker()) {
      created.onFirstKey = () => linkWorkerCollector(created);
    } else {
      workerGatherer();
      created.onFirstKey = () => watchForNoLogger(created);
    }
    return created;
  });
}

const collector = getCollector();

/**
 * Record a value under `key`, reduced with `reduce` (default `Reduce.MEAN`) until the next flush.
 * Callable from anywhere in any rank; synchronous; no I/O, no promise, and no allocation for a
 * key already seen.
 *
 * @param key non-empty metric name, e.g. `"loss"` or `"rollout/reward"`
 * @param value a number or bigint; for `Reduce.SAMPLE`, a plain object
 * @param reduce how values are combined: `Reduce.MEAN`, `SUM`, `MAX`, `MIN`, `STD`, `QUANTILES`,
 *   `HISTOGRAM`, `BUCKETS`, `RATE`, `SAMPLE`, a parameterised form, or a registered name
 * @param attributes optional attributes (`{ "gen_ai.request.model": "a" }`): the value is recorded
 *   under `key{name=value,…}` (docs/api.md, "Attributes"), a key of its own. Pass a frozen object,
 *   or bind a handle with `metric(key, reduce, attributes)`, for a call that builds no key.
 * @throws TypeError for an empty or non-string key, a value of the wrong type, invalid attributes,
 *   or a key recorded earlier in this process with a different reduce
 */
export function recordMetric(
  key: string,
  value: number | bigint,
  reduce?: NumericReduceName,
  attributes?: MetricAttributes,
): void;
export function recordMetric(
  key: string,
  value: SampleRecord,
  reduce: RecordReduceName,
  attributes?: MetricAttributes,
): void;
export function recordMetric(
  key: string,
  value: number | bigint | SampleRecord,
  reduce: ReduceName = "mean",
  attributes?: MetricAttributes,
): void {
  if (attributes !== undefined) {
    collector.recordAttributed(key, value, reduce, attributes);
    return;
  }
  const entry = collector.entries.get(key);
  // `=== true`, not a truthiness test: V8 ran the truthiness form 0.4-2 ns slower per call here.
  if (entry !== undefined && entry.reduce === reduce && typeof value === "number" && entry.numeric === true) {
    entry.accumulator.append(value);
    if (collector.stream !== null) collector.stream.record(entry, value, collector.step);
    return;
  }
  collector.recordSlow(key, value, reduce);
}

/** A metric bound to its key and reduction, for hot loops: `record` is about one add. */
export interface MetricHandle {
  readonly key: string;
  readonly reduce: ReduceName;
  /** Record a value (same rules as `recordMetric`). */
  record(value: number | bigint): void;
}

class BoundMetric implements MetricHandle {
  constructor(
    readonly key: string,
    readonly reduce: ReduceName,
    private readonly entry: NumericEntry | undefined,
  ) {}
  record(value: number | bigint): void {
    const entry = this.entry;
    if (entry !== undefined && typeof value === "number") {
      entry.accumulator.append(value);
      if (collector.stream !== null) collector.stream.record(entry, value, collector.step);
      return;
    }
    collector.recordSlow(this.key, value, this.reduce);
  }
}

/**
 * Bind a key and a reduction once, then `handle.record(v)` in the loop:
 * `const loss = metric("loss", Reduce.MEAN); loss.record(v);`.
 * Validates the key and reduction now, so a mistake shows at the binding, not in the loop. With
 * `attributes`, the handle records under `key{name=value,…}` (its `key`), at the same cost.
 */
export function metric(key: string, reduce: NumericReduceName = "mean", attributes?: MetricAttributes): MetricHandle {
  if (collector.disabled) {
    return { key, reduce, record: () => {} };
  }
  const entry = collector.numericEntryFor(key, reduce, "metric", attributes);
  if (entry === undefined && attributes !== undefined) {
    // A set dropped at the bound stays dropped: each value is counted, as `recordMetric`'s are.
    return { key, reduce, record: () => void collector.droppedKeyRecords++ };
  }
  return new BoundMetric(entry?.key ?? key, reduce, entry);
}
