/**
 * AReaL's perf tracer: spans, instants and counters as Chrome trace events, one file per rank
 * (`{runDir}/traces/rank-{r}.jsonl`), for waterfall views in Perfetto.
 *
 * The caller's cost is two clock reads and a few stores per span: events wait in a bounded,
 * columnar in-memory buffer (past the bound they are dropped and counted) and are serialised and
 * appended off the hot path, every save interval and at exit.
 *
 * Nesting: the open span is held in an `AsyncLocalStorage`, so a scope opened inside another —
 * synchronously or after any number of awaits — is its child. Children share their parent's row
 * (`tid`, a "lane") while they nest properly; a scope that would overlap a sibling (two
 * concurrent async scopes) gets a lane of its own, so every row of the trace nests cleanly.
 *
 * Here: the tracer and the process-wide calls. Its options are perf-options.ts, its rows
 * lanes.ts, its buffer event-buffer.ts, its lines perf-lines.ts, its file perf-file.ts.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { describeValue } from "../core/collector.js";
import { describeError, reportError } from "../core/diagnostics.js";
import { processWide } from "../core/process-wide.js";
import { isPromiseLike } from "../core/deadline.js";
import { settleAfter } from "./around.js";
import { EventBuffer, PH_COMPLETE, PH_COUNTER, PH_INSTANT } from "./event-buffer.js";
import { Lanes, OpenSpan } from "./lanes.js";
import { PerfTraceFiles } from "./perf-file.js";
import {
  checkCategory,
  DEFAULT_PERF_SETTINGS,
  resolvePerfSettings,
  type PerfTracerOptions,
  type PerfTracerSettings,
  type PerfTracerStats,
  type TraceScopeOptions,
} from "./perf-options.js";
import { appendFileFor, onExitWriteSync, resolveRankFile, whenRunKnown, type RankFileTarget } from "./rank-file.js";
import { rankSelected } from "./rank-selection.js";

export type { PerfTracerOptions, PerfTracerStats, TraceScopeOptions } from "./perf-options.js";

/** A perf tracer. Most code uses the process-wide one through `traceScope`, `traceInstant`, `traceCounter`. */
export class PerfTracer {
  private settings: PerfTracerSettings = DEFAULT_PERF_SETTINGS;
  /** Cleared once the rank is known and not selected, or when disabled: the hot path checks only this. */
  private active = true;
  private buffer: EventBuffer;
  private readonly spans = new AsyncLocalStorage<OpenSpan>();
  private readonly lanes = new Lanes();
  private readonly files = new PerfTraceFiles();
  private readonly stats: PerfTracerStats = { recorded: 0, dropped: 0, written: 0, buffered: 0 };
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private unsubscribeRun: (() => void) | undefined;
  private unregisterExit: (() => void) | undefined;

  constructor(options: PerfTracerOptions = {}) {
    this.buffer = new EventBuffer(this.settings.maxBufferedEvents);
    this.apply(options, true);
  }

  /**
   * Change options (AReaL's `configure`); unset options keep their value. Throws a TypeError for
   * an invalid option, changing nothing.
   */
  configure(options: PerfTracerOptions): void {
    this.apply(options, false);
  }

  /** Validate every option first, then apply; at construction unset ones come from the environment. */
  private apply(options: PerfTracerOptions, fromEnv: boolean): void {
    const settings = resolvePerfSettings(options, this.settings, fromEnv);
    if (settings.maxBufferedEvents !== this.settings.maxBufferedEvents && this.buffer.length === 0)
      this.buffer = new EventBuffer(settings.maxBufferedEvents);
    this.settings = settings;
    this.refreshActive();
    if (this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
      if (this.active) this.startTimer();
    }
  }

  /**
   * Run `fn` as a span named `name`; returns what `fn` returns. Sync and async: for a promise, the
   * span ends when it settles. When `fn` throws or rejects, the span records the error message
   * in `args.error`, and the error is rethrown.
   */
  scope<T>(name: string, options: TraceScopeOptions | undefined, fn: () => T): T {
    if (!this.active) return fn();
    if (typeof name !== "string") throw new TypeError(`traceScope name must be a string, got ${describeValue(name)}`);
    const cat = options === undefined ? "misc" : checkCategory(options.category, name);
    const parent = this.spans.getStore();
    const span = new OpenSpan(name, cat, options?.args, performance.now(), this.lanes.laneFor(parent));
    this.lanes.open(span);
    // The steps of runAround (around.ts), written in place: its two closures per span cost ~8 ns
    // of a ~125 ns span (`npm run bench -- trace`).
    let result: T;
    try {
      result = this.spans.run(span, fn);
    } catch (error) {
      this.endSpan(span, error, true);
      throw error;
    }
    if (isPromiseLike(result))
      return settleAfter(
        result,
        () => this.endSpan(span, undefined, false),
        (error) => this.endSpan(span, error, true),
      );
    this.endSpan(span, undefined, false);
    return result;
  }

  /** A point in time on the current span's row: `ph: "i"`. */
  instant(name: string, args?: Record<string, unknown>): void {
    if (!this.active) return;
    const parent = this.spans.getStore();
    this.push(PH_INSTANT, name, "misc", args, performance.now(), 0, parent === undefined ? 0 : parent.lane, undefined);
  }

  /** Counter values at this moment, drawn as a graph per name: `ph: "C"`, e.g. `{ tokens: 512 }`. */
  counter(name: string, values: Record<string, number>): void {
    if (!this.active) return;
    this.push(PH_COUNTER, name, "misc", values, performance.now(), 0, 0, undefined);
  }

  /** Counts of recorded, dropped, written and buffered events. */
  getStats(): PerfTracerStats {
    return { ...this.stats, buffered: this.buffer.length };
  }

  /**
   * Hand buffered events to the file now (AReaL's `save`) and wait until they are written.
   * While the run directory or rank is not known yet, events stay buffered.
   */
  async save(): Promise<void> {
    const target = this.writeBuffered();
    if (target !== undefined) await appendFileFor(target.path).drain();
  }

  /** Stop the save timer and exit hook (after writing what is buffered). */
  async close(): Promise<void> {
    await this.save();
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.unsubscribeRun?.();
    this.unregisterExit?.();
    this.unsubscribeRun = this.unregisterExit = undefined;
    this.started = false;
  }

  private endSpan(span: OpenSpan, error: unknown, threw: boolean): void {
    const end = performance.now();
    const lane = this.lanes.close(span, end);
    this.push(
      PH_COMPLETE,
      span.name,
      span.cat,
      span.args,
      span.start,
      end,
      lane,
      threw ? describeError(error) : undefined,
    );
  }

  private push(
    ph: number,
    name: string,
    cat: string,
    args: Record<string, unknown> | undefined,
    start: number,
    end: number,
    lane: number,
    error: string | undefined,
  ): void {
    this.stats.recorded++;
    if (!this.buffer.push(ph, name, cat, args, start, end, lane, error)) {
      this.stats.dropped++;
      reportError(
        "trace.bufferFull",
        `the perf tracer's buffer of ${this.settings.maxBufferedEvents} events is full (the trace file is not being written: run directory unknown, or a slow disk); events are dropped and counted`,
      );
      return;
    }
    if (!this.started) this.startWriting();
  }

  private startWriting(): void {
    this.started = true;
    this.startTimer();
    this.unregisterExit = onExitWriteSync(() => this.writeBuffered(true));
    if (resolveRankFile("traces", this.settings.target) === undefined) {
      this.unsubscribeRun = whenRunKnown(() => {
        this.refreshActive();
        this.writeBuffered();
      });
    }
  }

  private startTimer(): void {
    this.timer = setInterval(() => this.writeBuffered(), this.settings.saveIntervalMs);
    this.timer.unref();
  }

  private refreshActive(): void {
    const target = resolveRankFile("traces", this.settings.target);
    this.active = this.settings.enabled && (target === undefined || rankSelected(this.settings.selection, target.rank));
    if (!this.active) this.buffer.clear();
  }

  /** Serialise and append the buffer; returns the target, or undefined while it is unknown. */
  private writeBuffered(sync = false): RankFileTarget | undefined {
    const target = resolveRankFile("traces", this.settings.target);
    if (target === undefined) return undefined;
    if (!this.settings.enabled || !rankSelected(this.settings.selection, target.rank)) {
      this.buffer.clear();
      this.active = false;
      return undefined;
    }
    const n = this.buffer.length;
    if (n === 0 && this.files.has(target.path)) return target;
    this.files.write(this.buffer, target, sync);
    this.buffer.clear();
    this.stats.written += n;
    return target;
  }
}

/** This process's perf tracer (created on first use, options from the environment). */
export function getPerfTracer(): PerfTracer {
  return processWide("perfTracer", () => new PerfTracer());
}

const perfTracer = getPerfTracer();

/**
 * Run `fn` as a span of this rank's perf trace (AReaL's `trace_scope`): sync or async, returns
 * `fn`'s result, records and rethrows its error.
 *
 * ```ts
 * await traceScope("train.rollout", { category: "compute", args: { step } }, () => rollout());
 * ```
 */
export function traceScope<T>(name: string, fn: () => T): T;
export function traceScope<T>(name: string, options: TraceScopeOptions, fn: () => T): T;
export function traceScope<T>(name: string, optionsOrFn: TraceScopeOptions | (() => T), maybeFn?: () => T): T {
  if (typeof optionsOrFn === "function") return perfTracer.scope(name, undefined, optionsOrFn);
  if (typeof maybeFn !== "function")
    throw new TypeError(
      `traceScope("${name}", options, fn) needs a function to run as its last argument, got ${describeValue(maybeFn)}`,
    );
  return perfTracer.scope(name, optionsOrFn, maybeFn);
}

/** Mark a moment on this rank's perf trace. */
export function traceInstant(name: string, args?: Record<string, unknown>): void {
  perfTracer.instant(name, args);
}

/** Record counter values on this rank's perf trace, e.g. `traceCounter("queue", { depth: 3 })`. */
export function traceCounter(name: string, values: Record<string, number>): void {
  perfTracer.counter(name, values);
}

/** Configure this process's perf tracer (ranks, save interval, run directory, ...). */
export function configurePerfTracer(options: PerfTracerOptions): void {
  perfTracer.configure(options);
}

/** Write this process's buffered trace events now and wait for the file. */
export function savePerfTracer(): Promise<void> {
  return perfTracer.save();
}
