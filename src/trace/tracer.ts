/**
 * Forge's `Tracer`: step timers and memory, recorded as metrics through `recordMetric`.
 *
 * `start()`, then `step(name)` after each stage, then `stop()`. Each step records the time since
 * the previous step (or start) under `{prefix}/{step}/duration_avg_s` (MEAN) and
 * `{prefix}/{step}/duration_max_s` (MAX); `stop()` records the whole span under
 * `{prefix}/total_duration_avg_s` and `{prefix}/total_duration_max_s`. With `trackMemory`, the
 * V8 heap in use is sampled at start, at every step and at stop:
 * `{prefix}/memory_delta_end_start_avg_gb` (MEAN of stop − start) and `{prefix}/memory_peak_max_gb`
 * (MAX of the samples); the process's resident set size gets its own pair
 * (`rss_delta_end_start_avg_gb`, `rss_peak_max_gb`), sampled at the same points. Reading the RSS
 * is one read of /proc (~1.5 µs, see rss.ts), so a step with `trackMemory` costs that much more
 * than one without (~70 ns). Gigabytes are GiB (1024³ bytes), as in Forge.
 *
 * Key strings are built once per prefix and step name and cached, so a step in a loop costs one
 * clock read, two map lookups, two `recordMetric` calls and one add to the thread's step timings —
 * no allocation.
 *
 * Step timings (src/core/step-timing.ts) ride with the rank's flush answer: each completed run,
 * each phase and each marked barrier (`barrier(name)`: the time since the previous mark was spent
 * waiting at a synchronisation point, e.g. an all-reduce). The controller compares ranks with them
 * to name stragglers (docs/stragglers.md).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { getHeapStatistics } from "node:v8";
import { describeValue, getCollector, recordMetric } from "../core/collector.js";
import { warn } from "../core/diagnostics.js";
import { Reduce } from "../core/registry.js";
import { envFlag } from "../core/env.js";
import { timingSlot, type PhaseKind } from "../core/step-timing.js";
import { runAround } from "./around.js";
import { residentSetSize } from "./rss.js";

/** The timers a Tracer can use. Node has one clock worth measuring with: the monotonic one. */
const TIMER_KINDS = ["cpu"] as const;
/** `"cpu"`: `performance.now()`, monotonic, sub-microsecond resolution. */
export type TimerKind = (typeof TIMER_KINDS)[number];

/** Options of a `Tracer` (and of `trace` and `@traced`). */
export interface TracerOptions {
  /** Sample memory at start, each step and stop (default false). */
  trackMemory?: boolean;
  /** Which clock measures durations (default `"cpu"`, the only one). */
  timer?: TimerKind;
}

const TIMER_KIND_SET: ReadonlySet<unknown> = new Set(TIMER_KINDS);

function isTimerKind(value: unknown): value is TimerKind {
  return TIMER_KIND_SET.has(value);
}

const GIB = 1024 ** 3;
/** Bounds on cached prefixes and step names per prefix; names past them still work, built per call. */
const MAX_CACHED_PREFIXES = 10_000;
const MAX_CACHED_STEPS = 10_000;

/** Process-wide switches, read once: `RANKSCOPE_DISABLE_TRACING` turns every Tracer into a no-op. */
const tracingSettings = { disabled: envFlag("RANKSCOPE_DISABLE_TRACING") };

/** A step's (or barrier's) two keys and its step-timing slot. */
interface MarkKeys {
  readonly avg: string;
  readonly max: string;
  readonly slot: number;
}

interface PrefixKeys {
  /** Step-timing slot of the tracer's whole runs. */
  readonly slot: number;
  readonly totalAvg: string;
  readonly totalMax: string;
  readonly memoryDelta: string;
  readonly memoryPeak: string;
  readonly rssDelta: string;
  readonly rssPeak: string;
  readonly steps: Map<string, MarkKeys>;
  readonly barriers: Map<string, MarkKeys>;
}

const keysByPrefix = new Map<string, PrefixKeys>();

function keysFor(prefix: string): PrefixKeys {
  let keys = keysByPrefix.get(prefix);
  if (keys === undefined) {
    keys = {
      slot: keysByPrefix.size < MAX_CACHED_PREFIXES ? timingSlot(prefix) : -1,
      totalAvg: `${prefix}/total_duration_avg_s`,
      totalMax: `${prefix}/total_duration_max_s`,
      memoryDelta: `${prefix}/memory_delta_end_start_avg_gb`,
      memoryPeak: `${prefix}/memory_peak_max_gb`,
      rssDelta: `${prefix}/rss_delta_end_start_avg_gb`,
      rssPeak: `${prefix}/rss_peak_max_gb`,
      steps: new Map(),
      barriers: new Map(),
    };
    if (keysByPrefix.size < MAX_CACHED_PREFIXES) keysByPrefix.set(prefix, keys);
  }
  return keys;
}

/** The keys of a step (or barrier) `name`; past the cache bound they are built per call and not timed. */
function markKeys(keys: PrefixKeys, prefix: string, name: string, kind: PhaseKind): MarkKeys {
  const cache = kind === "barrier" ? keys.barriers : keys.steps;
  const cached = cache.get(name);
  if (cached !== undefined) return cached;
  const caching = cache.size < MAX_CACHED_STEPS && keys.slot >= 0;
  const mark = {
    avg: `${prefix}/${name}/duration_avg_s`,
    max: `${prefix}/${name}/duration_max_s`,
    slot: caching ? timingSlot(prefix, name, kind) : -1,
  };
  if (caching) cache.set(name, mark);
  return mark;
}

/** This thread's step timings (its collector's), which every Tracer of the thread adds to. */
const timings = getCollector().timings;

/**
 * The Tracer tracking memory in the current async context. Memory is process-wide, so a second
 * tracker inside the first would count the same bytes twice; Forge skips the inner one.
 */
const memoryOwner = new AsyncLocalStorage<MemoryOwner>();

/**
 * A fresh box per context: `AsyncLocalStorage.run` skips saving and restoring when the store is
 * the same value as the current one, which would let an `enterWith` inside leak out.
 */
interface MemoryOwner {
  readonly tracer: Tracer | undefined;
}

/** The box of a context where no Tracer tracks memory. */
const NO_OWNER: MemoryOwner = { tracer: undefined };

function heapUsed(): number {
  return getHeapStatistics().used_heap_size;
}

/**
 * Times the stages of a piece of work and records them as metrics (Forge's `Tracer`).
 *
 * ```ts
 * const t = new Tracer("train_step", { trackMemory: true });
 * t.start();
 * forward(); t.step("fwd");
 * backward(); t.step("bwd");
 * t.stop();
 * ```
 * Reusable: `start()` again after `stop()`. Also usable with `using t = new Tracer(p).start()`,
 * which stops it at the end of the block.
 */
export class Tracer implements Disposable {
  readonly prefix: string;
  readonly trackMemory: boolean;
  readonly timer: TimerKind;
  private readonly keys: PrefixKeys;
  private running = false;
  /** False while disabled (env) for this run of start..stop. */
  private recording = false;
  private memoryThisRun = false;
  private previousOwner: MemoryOwner | undefined = undefined;
  private ownBox: MemoryOwner | undefined = undefined;
  private startMs = 0;
  private lastMs = 0;
  private heapStart = 0;
  private heapPeak = 0;
  private rssStart = 0;
  private rssPeak = 0;

  constructor(prefix: string, options: TracerOptions = {}) {
    if (typeof prefix !== "string" || prefix.length === 0) {
      throw new TypeError(
        `Tracer prefix must be a non-empty string such as "train_step", got ${describeValue(prefix)}`,
      );
    }
    if (options === null || typeof options !== "object") {
      throw new TypeError(
        `Tracer("${prefix}") options must be an object like { trackMemory: true, timer: "cpu" }, got ${describeValue(options)}`,
      );
    }
    const timer = options.timer ?? "cpu";
    if (!isTimerKind(timer)) {
      throw new TypeError(
        `Tracer("${prefix}") timer ${describeValue(timer)} is not valid; valid timers: ${TIMER_KINDS.map((t) => `"${t}"`).join(", ")}`,
      );
    }
    this.prefix = prefix;
    this.trackMemory = options.trackMemory === true;
    this.timer = timer;
    this.keys = keysFor(prefix);
  }

  /** True between `start()` and `stop()`. */
  get isRunning(): boolean {
    return this.running;
  }

  /** Start timing (and sampling memory). Returns the tracer, for `using t = tracer.start()`. */
  start(): this {
    if (this.running) {
      throw new Error(
        `Tracer("${this.prefix}").start() was called while it is already running; call stop() before starting it again`,
      );
    }
    this.running = true;
    this.recording = !tracingSettings.disabled && !getCollector().disabled;
    this.memoryThisRun = false;
    if (this.recording && this.trackMemory) this.startMemory();
    this.startMs = this.lastMs = performance.now();
    return this;
  }

  /** Record the time since the previous step (or start) under `{prefix}/{name}/duration_*_s`. */
  step(name: string): void {
    if (!this.running) {
      throw new Error(
        `Tracer("${this.prefix}").step(${JSON.stringify(name)}) was called before start(); call start() first`,
      );
    }
    if (this.recording) this.mark(name, "phase");
  }

  /**
   * Mark the end of a wait at a synchronisation point all ranks reach — an all-reduce, a barrier:
   * the time since the previous `step()` (or `start()`) is this rank's time there, from its arrival
   * to its release. Call `step()` right before entering the collective and `barrier(name)` right
   * after it returns. Recorded like a step (`{prefix}/{name}/duration_*_s`) and marked as a wait in
   * the rank's step timings: the rank the others waited for is the one that waited least, and the
   * controller names it from the others' wait (docs/stragglers.md).
   */
  barrier(name: string): void {
    if (!this.running) {
      throw new Error(
        `Tracer("${this.prefix}").barrier(${JSON.stringify(name)}) was called before start(); call start() first`,
      );
    }
    if (this.recording) this.mark(name, "barrier");
  }

  private mark(name: string, kind: PhaseKind): void {
    const now = performance.now();
    const ms = now - this.lastMs;
    const seconds = ms / 1000;
    this.lastMs = now;
    const keys = markKeys(this.keys, this.prefix, name, kind);
    recordMetric(keys.avg, seconds, Reduce.MEAN);
    recordMetric(keys.max, seconds, Reduce.MAX);
    timings.add(keys.slot, ms);
    if (this.memoryThisRun) {
      const heap = heapUsed();
      if (heap > this.heapPeak) this.heapPeak = heap;
      const rss = residentSetSize();
      if (rss > this.rssPeak) this.rssPeak = rss;
    }
  }

  /** Record the total duration (and memory) and stop; the tracer can be started again. */
  stop(): void {
    if (!this.running) {
      throw new Error(`Tracer("${this.prefix}").stop() was called before start(); call start() first`);
    }
    this.running = false;
    if (!this.recording) return;
    const ms = performance.now() - this.startMs;
    const seconds = ms / 1000;
    recordMetric(this.keys.totalAvg, seconds, Reduce.MEAN);
    recordMetric(this.keys.totalMax, seconds, Reduce.MAX);
    timings.add(this.keys.slot, ms);
    if (this.memoryThisRun) this.stopMemory();
  }

  /** `using` support: stops the tracer if it is still running. */
  [Symbol.dispose](): void {
    if (this.running) this.stop();
  }

  private startMemory(): void {
    const box = memoryOwner.getStore();
    const owner = box?.tracer;
    if (owner !== undefined && owner !== this && owner.memoryThisRun && owner.running) {
      warn(
        `tracer.nestedMemory:${this.prefix}`,
        `Tracer("${this.prefix}") tracks memory inside Tracer("${owner.prefix}"), which already does; memory is process-wide, ` +
          `so the inner one skips memory tracking (its durations are still recorded). Set trackMemory only on the outer tracer.`,
      );
      return;
    }
    this.memoryThisRun = true;
    this.previousOwner = box;
    this.ownBox = { tracer: this };
    // enterWith scopes the owner to this async context and the ones it starts from here on.
    memoryOwner.enterWith(this.ownBox);
    this.heapStart = this.heapPeak = heapUsed();
    this.rssStart = this.rssPeak = residentSetSize();
  }

  private stopMemory(): void {
    const heap = heapUsed();
    const rss = residentSetSize();
    if (heap > this.heapPeak) this.heapPeak = heap;
    recordMetric(this.keys.memoryDelta, (heap - this.heapStart) / GIB, Reduce.MEAN);
    recordMetric(this.keys.memoryPeak, this.heapPeak / GIB, Reduce.MAX);
    recordMetric(this.keys.rssDelta, (rss - this.rssStart) / GIB, Reduce.MEAN);
    recordMetric(this.keys.rssPeak, Math.max(rss, this.rssPeak) / GIB, Reduce.MAX);
    this.memoryThisRun = false;
    if (memoryOwner.getStore() === this.ownBox) memoryOwner.enterWith(this.previousOwner ?? NO_OWNER);
    this.previousOwner = this.ownBox = undefined;
  }
}

/**
 * Run `fn` between a Tracer's `start()` and `stop()` (Forge's `trace` as a wrapper). Works for sync
 * and async functions: returns what `fn` returns, and records even when `fn` throws or rejects,
 * then rethrows. `fn` gets the tracer, to call `step()`.
 *
 * Each call runs in its own async context, so concurrent calls each measure their own time and
 * memory tracking inside one call does not see another call's tracker.
 */
export function trace<T>(prefix: string, fn: (tracer: Tracer) => T): T;
export function trace<T>(prefix: string, options: TracerOptions, fn: (tracer: Tracer) => T): T;
export function trace<T>(
  prefix: string,
  optionsOrFn: TracerOptions | ((tracer: Tracer) => T),
  maybeFn?: (tracer: Tracer) => T,
): T {
  const options = typeof optionsOrFn === "function" ? {} : optionsOrFn;
  const fn = typeof optionsOrFn === "function" ? optionsOrFn : maybeFn;
  if (typeof fn !== "function") {
    throw new TypeError(
      `trace("${prefix}", options, fn) needs a function to run as its last argument, got ${describeValue(fn)}`,
    );
  }
  const tracer = new Tracer(prefix, options);
  return memoryOwner.run({ tracer: memoryOwner.getStore()?.tracer }, () => {
    tracer.start();
    return runAround(
      () => fn(tracer),
      () => tracer.stop(),
    );
  });
}

/**
 * Method decorator (TypeScript 5+ standard decorators): every call of the method runs inside
 * `trace(prefix, options, ...)`. The prefix defaults to the method's name.
 *
 * ```ts
 * class Rewarder {
 *   @traced("my_reward_fn", { timer: "cpu" })
 *   async reward(x: number) { return x > 0 ? 1 : 0; }
 * }
 * ```
 */
export function traced(prefix?: string, options: TracerOptions = {}) {
  return function decorate<This, Args extends unknown[], Return>(
    method: (this: This, ...args: Args) => Return,
    context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Return>,
  ): (this: This, ...args: Args) => Return {
    const name = prefix ?? String(context.name);
    // Validate now, so a bad option shows where the class is defined, not at the first call.
    new Tracer(name, options);
    return function tracedMethod(this: This, ...args: Args): Return {
      return trace(name, options, () => method.apply(this, args));
    };
  };
}
