/**
 * AReaL's stats tracker as a face of the collector: scopes that prefix keys, boolean-mask
 * denominators with masked statistics, scalars with a `__count` for weighted merges, and timings.
 *
 * Every value goes into this process's collector (`recordMetric` and its accumulators), so it is
 * flushed, merged across ranks and logged like any other metric; nothing here does I/O.
 *
 * Scopes live in an `AsyncLocalStorage`: each async task sees the scopes it entered and its
 * parents', never a concurrent task's. Keys are built once per scope and name and then reused, so
 * a scalar recorded every step in the same scope does not allocate.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { describeValue, getCollector, recordMetric } from "../core/collector.js";
import { AVG_MIN_MAX, AvgMinMaxAccumulator } from "./reductions.js";
import { processWide } from "../core/process-wide.js";

/** How `stat` reduces the masked entries of one array. */
export const StatReduce = {
  /** `key/avg`, `key/min`, `key/max` (the default). */
  AVG_MIN_MAX: "avg_min_max",
  /** `key`: the average over the masked entries. */
  AVG: "avg",
  /** `key`: the sum of the masked entries. */
  SUM: "sum",
  /** `key`: the smallest masked entry. */
  MIN: "min",
  /** `key`: the largest masked entry. */
  MAX: "max",
} as const;

/** One of `StatReduce`'s values. */
export type StatReduceName = (typeof StatReduce)[keyof typeof StatReduce];

const STAT_REDUCE_TO_CORE: Readonly<Record<StatReduceName, string>> = {
  avg_min_max: AVG_MIN_MAX,
  avg: "mean",
  sum: "sum",
  min: "min",
  max: "max",
};

/** A boolean mask: `true`/non-zero entries count. */
export type Mask = readonly boolean[] | Uint8Array;

/** Values of a masked statistic, one per mask entry. */
export type StatValues = Float32Array | Float64Array | readonly number[];

/** Options of `stat`. */
export interface StatOptions {
  /** Name of a mask set with `denominator` in this scope (or a parent scope). */
  denominator: string;
  /** How the masked entries are reduced (default `StatReduce.AVG_MIN_MAX`). */
  reduce?: StatReduceName;
}

/** Keys already built for one scope prefix. */
interface KeyCache {
  readonly prefix: string;
  readonly keys: Map<string, string>;
  readonly counts: Map<string, string>;
}

/**
 * One entered scope. `open` turns false when a `using` scope is disposed: a context that still
 * holds the frame (the caller of an async function that entered it) then resolves to the parent.
 */
interface Frame {
  readonly cache: KeyCache;
  readonly parent: Frame | undefined;
  open: boolean;
}

/** A disposable handle: leave a scope or stop a timer with `using` or `[Symbol.dispose]()`. */
export interface ScopeHandle extends Disposable {
  /** The key prefix inside the scope, e.g. `ppo_actor/update/`. */
  readonly prefix: string;
}

const SCOPE_NAME = /^[^/]+(\/[^/]+)*$/;

/** A named stats tracker. Get the default one as `stats` and named ones with `stats.get(name)`. */
export class StatsTracker {
  /** The innermost scope of each async context; undefined is the tracker's root. */
  private readonly storage = new AsyncLocalStorage<Frame | undefined>();
  private readonly caches = new Map<string, KeyCache>();
  private readonly root: KeyCache;
  private readonly masks = new Map<string, Mask>();
  private readonly trackers: Map<string, StatsTracker>;

  /** @param name tracker name, the first segment of every key ("" for the default tracker). */
  constructor(
    readonly name: string = "",
    trackers?: Map<string, StatsTracker>,
  ) {
    if (name !== "" && !SCOPE_NAME.test(name))
      throw new TypeError(
        `stats tracker name must be a non-empty key segment without leading or trailing "/", got ${describeValue(name)}`,
      );
    this.root = this.cacheFor(name === "" ? "" : `${name}/`);
    this.trackers = trackers ?? new Map();
  }

  /** The tracker named `name` (created on first use): `stats.get("rollout").scalar({ reward })` → `rollout/reward`. */
  get(name: string): StatsTracker {
    let tracker = this.trackers.get(name);
    if (tracker === undefined) {
      tracker = new StatsTracker(name, this.trackers);
      this.trackers.set(name, tracker);
    }
    return tracker;
  }

  /** The key prefix of the current scope (`""` at the root of the default tracker). */
  get prefix(): string {
    return this.current().prefix;
  }

  /**
   * Run `fn` inside scope `name`: keys recorded in it (and in what it awaits) get the prefix
   * `name/`. Returns what `fn` returns (its promise, for an async function). Without `fn`, enters
   * the scope until the returned handle is disposed: `using _ = stats.scope("update")`.
   */
  scope<T>(name: string, fn: () => T): T;
  scope(name: string): ScopeHandle;
  scope<T>(name: string, fn?: () => T): T | ScopeHandle {
    if (typeof name !== "string" || !SCOPE_NAME.test(name)) {
      throw new TypeError(
        `stats.scope(name) takes a non-empty name without leading or trailing "/", e.g. "ppo_actor", got ${describeValue(name)}`,
      );
    }
    const parent = this.currentFrame();
    const frame: Frame = {
      cache: this.cacheFor(`${parent?.cache.prefix ?? this.root.prefix}${name}/`),
      parent,
      open: true,
    };
    if (fn !== undefined) return this.storage.run(frame, fn);
    this.storage.enterWith(frame);
    return {
      prefix: frame.cache.prefix,
      [Symbol.dispose]: () => {
        if (!frame.open) return;
        frame.open = false;
        // Restore the parent here; contexts that captured the frame meanwhile skip it (open = false).
        this.storage.enterWith(parent);
      },
    };
  }

  /**
   * Record scalars: each `key` gets its mean over the flush and `key__count`, how many values it
   * had, so ranks merge weighted by count (A: 0.5, 1.0; B: 0.0 → 0.5 with count 3).
   */
  scalar(values: Readonly<Record<string, number>>): void {
    const cache = this.current();
    for (const name in values) {
      const value = values[name];
      if (typeof value !== "number")
        throw new TypeError(`stats.scalar({ ${name} }) takes numbers, got ${describeValue(value)}`);
      recordMetric(keyOf(cache, name), value, "mean");
      recordMetric(countKeyOf(cache, name), 1, "sum");
    }
  }

  /**
   * Set boolean masks by name, for `stat(..., { denominator })` in this scope and its children.
   * Each mask is also recorded as a SUM of its true entries under its own key (e.g.
   * `nValidTokens`), as AReaL does.
   */
  denominator(masks: Readonly<Record<string, Mask>>): void {
    const cache = this.current();
    for (const name in masks) {
      const mask = masks[name];
      if (!Array.isArray(mask) && !(mask instanceof Uint8Array)) {
        throw new TypeError(
          `stats.denominator({ ${name} }) takes a boolean[] or a Uint8Array mask, got ${describeValue(mask)}`,
        );
      }
      const key = keyOf(cache, name);
      this.masks.set(key, mask);
      recordMetric(key, countTrue(mask), "sum");
    }
  }

  /**
   * Record masked statistics: for each array, the entries where the denominator's mask is true,
   * reduced with `reduce` (default `key/avg`, `key/min`, `key/max`). Arrays must have the mask's
   * length. A key whose mask has no true entry records nothing (and is not logged).
   */
  stat(values: Readonly<Record<string, StatValues>>, options: StatOptions): void {
    if (options === null || typeof options !== "object" || typeof options.denominator !== "string") {
      throw new TypeError(
        `stats.stat(values, { denominator }) needs the name of a mask set with stats.denominator(), got ${describeValue(options)}`,
      );
    }
    const reduceName = options.reduce ?? StatReduce.AVG_MIN_MAX;
    const reduce = STAT_REDUCE_TO_CORE[reduceName];
    if (reduce === undefined) {
      throw new TypeError(
        `stats.stat reduce ${describeValue(reduceName)} is not valid; valid: ${Object.keys(STAT_REDUCE_TO_CORE).join(", ")} (StatReduce.*)`,
      );
    }
    const cache = this.current();
    const mask = this.findMask(cache.prefix, options.denominator);
    const collector = getCollector();
    for (const name in values) {
      const array = values[name];
      if (!Array.isArray(array) && !(array instanceof Float32Array) && !(array instanceof Float64Array)) {
        throw new TypeError(
          `stats.stat({ ${name} }) takes a Float32Array, Float64Array or number[], got ${describeValue(array)}`,
        );
      }
      if (array.length !== mask.length) {
        throw new TypeError(
          `stats.stat: "${name}" has ${array.length} values but denominator "${options.denominator}" has ${mask.length} entries; they must have the same length`,
        );
      }
      if (collector.disabled) continue;
      const count = maskedMoments(array, mask);
      if (count === 0) continue;
      const entry = collector.numericEntryFor(keyOf(cache, name), reduce, "stats.stat");
      if (entry === undefined) continue;
      // One pass over the mask, then one append per array (per entry only for AVG, whose mean
      // must weigh every entry).
      const accumulator = entry.accumulator;
      if (accumulator instanceof AvgMinMaxAccumulator)
        accumulator.appendMoments(moments.sum, count, moments.min, moments.max);
      else if (reduceName === "sum") accumulator.append(moments.sum);
      else if (reduceName === "min") accumulator.append(moments.min);
      else if (reduceName === "max") accumulator.append(moments.max);
      else for (let i = 0; i < array.length; i++) if (mask[i]) accumulator.append(array[i] ?? NaN);
    }
  }

  /**
   * Time `fn` (sync or async) and record its duration in seconds as a scalar under
   * `timeperf/{name}` (the tracker's name first, never a scope: timings are fixed there, as
   * AReaL's). Without `fn`, times until the returned handle is disposed.
   */
  recordTiming<T>(name: string, fn: () => T): T;
  recordTiming(name: string): Disposable;
  recordTiming<T>(name: string, fn?: () => T): T | Disposable {
    if (typeof name !== "string" || !SCOPE_NAME.test(name))
      throw new TypeError(`stats.recordTiming(name) takes a non-empty key name, got ${describeValue(name)}`);
    const start = performance.now();
    const key = `timeperf/${name}`;
    const done = (): void => {
      const seconds = (performance.now() - start) / 1000;
      recordMetric(keyOf(this.root, key), seconds, "mean");
      recordMetric(countKeyOf(this.root, key), 1, "sum");
    };
    if (fn === undefined) {
      let open = true;
      return {
        [Symbol.dispose]: () => {
          if (open) done();
          open = false;
        },
      };
    }
    let result: T;
    try {
      result = fn();
    } catch (error) {
      done();
      throw error;
    }
    // The caller gets its own promise back; the timing ends when it settles (before the caller's
    // own continuation runs, as this handler was attached first).
    if (result instanceof Promise) result.then(done, done);
    else done();
    return result;
  }

  private current(): KeyCache {
    return this.currentFrame()?.cache ?? this.root;
  }

  /** The innermost scope still open in this async context. */
  private currentFrame(): Frame | undefined {
    let frame = this.storage.getStore();
    while (frame !== undefined && !frame.open) frame = frame.parent;
    return frame;
  }

  private cacheFor(prefix: string): KeyCache {
    let cache = this.caches.get(prefix);
    if (cache === undefined) {
      cache = { prefix, keys: new Map(), counts: new Map() };
      this.caches.set(prefix, cache);
    }
    return cache;
  }

  /** The mask named `name` in the scope `prefix` or the nearest parent scope that set it. */
  private findMask(prefix: string, name: string): Mask {
    let scope = prefix;
    for (;;) {
      const mask = this.masks.get(`${scope}${name}`);
      if (mask !== undefined) return mask;
      if (scope.length === 0 || scope === this.root.prefix) break;
      const cut = scope.lastIndexOf("/", scope.length - 2);
      scope = cut < 0 ? "" : scope.slice(0, cut + 1);
    }
    throw new TypeError(
      `stats.stat: denominator "${name}" is not set in scope "${prefix}" or its parents; call stats.denominator({ ${name}: mask }) first`,
    );
  }
}

function keyOf(cache: KeyCache, name: string): string {
  let key = cache.keys.get(name);
  if (key === undefined) {
    key = `${cache.prefix}${name}`;
    cache.keys.set(name, key);
  }
  return key;
}

function countKeyOf(cache: KeyCache, name: string): string {
  let key = cache.counts.get(name);
  if (key === undefined) {
    key = `${cache.prefix}${name}__count`;
    cache.counts.set(name, key);
  }
  return key;
}

/** Scratch output of `maskedMoments`, reused so a call allocates nothing. */
const moments = { sum: 0, min: Infinity, max: -Infinity };

/** Sum, minimum and maximum of the masked entries into `moments`; returns how many there were. */
function maskedMoments(values: StatValues, mask: Mask): number {
  let sum = 0;
  let count = 0;
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < values.length; i++) {
    if (!mask[i]) continue;
    const v = values[i] ?? NaN;
    sum += v;
    count++;
    // Math.min/max keep NaN, so a diverged entry shows instead of vanishing.
    min = Math.min(min, v);
    max = Math.max(max, v);
  }
  moments.sum = sum;
  moments.min = min;
  moments.max = max;
  return count;
}

function countTrue(mask: Mask): number {
  let n = 0;
  for (let i = 0; i < mask.length; i++) if (mask[i]) n++;
  return n;
}

function defaultTracker(): StatsTracker {
  return processWide("stats", () => new StatsTracker(""));
}

/**
 * The default stats tracker (one per process): `stats.scalar({ reward })`, `stats.scope("actor", fn)`,
 * `stats.denominator({ nValidTokens: mask })`, `stats.stat({ loss }, { denominator: "nValidTokens" })`,
 * `stats.recordTiming("rollout", fn)`, and `stats.get(name)` for named trackers.
 */
export const stats: StatsTracker = defaultTracker();
