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
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createFileOnce } from "../io/atomic-write.js";
import { isMainThread, threadId } from "node:worker_threads";
import { describeValue } from "../core/collector.js";
import { describeError, reportError, warn } from "../core/diagnostics.js";
import { envFlag, envInteger } from "../core/env.js";
import { resolveSetting, type SettingKind } from "../core/settings.js";
import { appendFileFor, onExitWriteSync, resolveRankFile, whenRunKnown, type RankFileOptions, type RankFileTarget } from "./rank-file.js";
import { parseRankSelection, rankSelected, type RankSelection } from "./rank-selection.js";
import { EventBuffer, PH_COMPLETE, PH_COUNTER, PH_INSTANT } from "./event-buffer.js";
import { processMetadata, threadMetadata, TRACE_CATEGORIES, TRACE_FILE_HEADER, traceEventLine, type TraceCategory } from "./trace-events.js";
import { processWide } from "../core/process-wide.js";

/** Options of a perf tracer (`configurePerfTracer`, or `new PerfTracer`). */
export interface PerfTracerOptions extends RankFileOptions {
  /** Record at all (default true; `RANKSCOPE_DISABLE_TRACING` turns it off). */
  enabled?: boolean;
  /** Ranks that write traces: `"all"`, `"0,2"`, `"0-3"`, or an array (default env `RANKSCOPE_TRACE_RANKS`, else all). */
  ranks?: string | readonly number[];
  /** How often buffered events are written, in ms (default 1000, env `RANKSCOPE_TRACE_SAVE_INTERVAL_MS`). */
  saveIntervalMs?: number;
  /** Events held in memory between saves; past it they are dropped and counted (default 100000). */
  maxBufferedEvents?: number;
}

/** Options of one `traceScope`. */
export interface TraceScopeOptions {
  /** What kind of work (default `"misc"`). */
  category?: TraceCategory;
  /** Extra fields shown on the span (JSON-serialisable). */
  args?: Record<string, unknown>;
}

/** Counts of what a perf tracer did. */
export interface PerfTracerStats {
  /** Events recorded (kept or not). */
  recorded: number;
  /** Events dropped because the buffer was full. */
  dropped: number;
  /** Events handed to the file. */
  written: number;
  /** Events waiting in memory. */
  buffered: number;
}

const CATEGORY_SET: ReadonlySet<string> = new Set(TRACE_CATEGORIES);

/** A span while it is open: its row, start, and what it will be written with. */
class OpenSpan {
  constructor(
    readonly name: string,
    readonly cat: string,
    readonly args: Record<string, unknown> | undefined,
    readonly start: number,
    readonly lane: number,
  ) {}
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === "object" || typeof value === "function") && typeof (value as { then?: unknown }).then === "function";
}

/**
 * Timestamps are written as µs since the epoch on a quarter-µs grid: at today's epoch (2^50..2^51
 * µs, until 2041) a double holds exactly quarters, so the text parses back to the value written
 * and `ts + dur` of a child never exceeds its parent's. Writing the whole part as an integer also
 * avoids formatting a 16-digit fractional double, which is several times slower.
 */
const ORIGIN_US = Math.round(performance.timeOrigin * 1000);
const ORIGIN_REST_US = performance.timeOrigin * 1000 - ORIGIN_US;
const QUARTERS = ["", ".25", ".5", ".75"];
/** Bounds on the byte chunks a batch is encoded into (about 256 bytes an event in between). */
const MIN_CHUNK_BYTES = 4 * 1024;
const MAX_CHUNK_BYTES = 1024 * 1024;

/**
 * Lines encoded straight into byte chunks as they are formatted. A batch built as one long string
 * keeps every line alive through young-generation collections, and copying them there cost more
 * than formatting them; encoded at once, each line is garbage immediately.
 */
class ByteChunks {
  readonly chunks: Buffer[] = [];
  private buffer: Buffer;
  private offset = 0;

  constructor(private readonly chunkBytes: number) {
    this.buffer = Buffer.allocUnsafe(chunkBytes);
  }

  write(text: string): void {
    // A UTF-16 code unit takes at most 3 bytes in UTF-8.
    if (this.offset + text.length * 3 > this.buffer.length) {
      this.seal();
      if (text.length * 3 > this.buffer.length) {
        this.chunks.push(Buffer.from(text));
        return;
      }
    }
    this.offset += this.buffer.write(text, this.offset);
  }

  /** Close the current chunk (if it holds anything) and start a new one. */
  seal(): void {
    if (this.offset === 0) return;
    this.chunks.push(this.buffer.subarray(0, this.offset));
    this.buffer = Buffer.allocUnsafe(this.chunkBytes);
    this.offset = 0;
  }
}

/** A `performance.now()` reading as quarter-µs since ORIGIN_US (monotonic in its argument). */
function quarterMicros(ms: number): number {
  return Math.round((ms * 1000 + ORIGIN_REST_US) * 4) / 4;
}

/** The epoch-µs text of a `quarterMicros` value. */
function epochText(quarters: number): string {
  const whole = Math.floor(quarters);
  return `${ORIGIN_US + whole}${QUARTERS[(quarters - whole) * 4]!}`;
}

function checkCategory(category: unknown, name: string): string {
  if (category === undefined) return "misc";
  if (typeof category === "string" && CATEGORY_SET.has(category)) return category;
  throw new TypeError(`traceScope("${name}") category ${describeValue(category)} is not valid; valid: ${TRACE_CATEGORIES.join(", ")}`);
}

/** A perf tracer. Most code uses the process-wide one through `traceScope`, `traceInstant`, `traceCounter`. */
export class PerfTracer {
  private enabled: boolean;
  private selection: RankSelection;
  private saveIntervalMs: number;
  private maxBufferedEvents: number;
  private target: RankFileOptions;
  /** Cleared once the rank is known and not selected, or when disabled: the hot path checks only this. */
  private active: boolean;
  private buffer: EventBuffer;
  private readonly spans = new AsyncLocalStorage<OpenSpan>();
  /** Open spans per lane, innermost last. */
  private readonly lanes: OpenSpan[][] = [[]];
  /** When the last span written on each lane ended. */
  private readonly laneLastEnd: number[] = [0];
  private readonly stats: PerfTracerStats = { recorded: 0, dropped: 0, written: 0, buffered: 0 };
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private unsubscribeRun: (() => void) | undefined;
  private unregisterExit: (() => void) | undefined;
  /** Files this tracer has begun (header and process metadata written), and their named lanes. */
  private readonly begun = new Map<string, Set<number>>();

  constructor(options: PerfTracerOptions = {}) {
    this.enabled = true;
    this.selection = "all";
    this.saveIntervalMs = 1000;
    this.maxBufferedEvents = 100_000;
    this.target = {};
    this.active = true;
    this.buffer = new EventBuffer(this.maxBufferedEvents);
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
    if (options === null || typeof options !== "object") throw new TypeError(`perf tracer options must be an object, got ${describeValue(options)}`);
    const { runDir, rank, role } = options;
    if (rank !== undefined && (!Number.isInteger(rank) || rank < 0)) throw new TypeError(`perf tracer rank must be an integer ≥ 0, got ${describeValue(rank)}`);
    if (runDir !== undefined && (typeof runDir !== "string" || runDir.length === 0)) throw new TypeError(`perf tracer runDir must be a non-empty path, got ${describeValue(runDir)}`);
    if (role !== undefined && typeof role !== "string") throw new TypeError(`perf tracer role must be a string such as "Trainer", got ${describeValue(role)}`);
    const selection = options.ranks !== undefined ? parseRankSelection(options.ranks, "perf tracer ranks") : fromEnv ? rankSelectionFromEnv() : this.selection;
    const saveIntervalMs =
      options.saveIntervalMs !== undefined
        ? positiveInteger(options.saveIntervalMs, "saveIntervalMs")
        : fromEnv
          ? envInteger("RANKSCOPE_TRACE_SAVE_INTERVAL_MS", 1000, 1)
          : this.saveIntervalMs;
    const maxBufferedEvents = options.maxBufferedEvents !== undefined ? positiveInteger(options.maxBufferedEvents, "maxBufferedEvents") : this.maxBufferedEvents;

    if (options.enabled !== undefined) this.enabled = options.enabled === true;
    else if (fromEnv) this.enabled = !envFlag("RANKSCOPE_DISABLE_TRACING");
    this.selection = selection;
    this.saveIntervalMs = saveIntervalMs;
    if (maxBufferedEvents !== this.maxBufferedEvents && this.buffer.length === 0) this.buffer = new EventBuffer(maxBufferedEvents);
    this.maxBufferedEvents = maxBufferedEvents;
    this.target = { runDir: runDir ?? this.target.runDir, rank: rank ?? this.target.rank, role: role ?? this.target.role };
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
    const lane = this.laneFor(parent);
    const span = new OpenSpan(name, cat, options?.args, performance.now(), lane);
    this.lanes[lane]!.push(span);
    let result: T;
    try {
      result = this.spans.run(span, fn);
    } catch (error) {
      this.endSpan(span, error, true);
      throw error;
    }
    if (isPromiseLike(result)) {
      return Promise.resolve(result).then(
        (value) => {
          this.endSpan(span, undefined, false);
          return value;
        },
        (error: unknown) => {
          this.endSpan(span, error, true);
          throw error;
        },
      ) as T;
    }
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

  private laneFor(parent: OpenSpan | undefined): number {
    if (parent !== undefined) {
      const stack = this.lanes[parent.lane]!;
      if (stack[stack.length - 1] === parent) return parent.lane;
    }
    const lanes = this.lanes;
    for (let i = 0; i < lanes.length; i++) if (lanes[i]!.length === 0) return i;
    lanes.push([]);
    this.laneLastEnd.push(0);
    return lanes.length - 1;
  }

  /**
   * A row for a span that ends while spans opened inside it on its row are still open (children
   * not awaited): there it would end before them. Any row with nothing open and nothing written
   * after the span's start takes it without overlapping anything, now or later.
   */
  private detachedLane(start: number): number {
    const lanes = this.lanes;
    for (let i = 0; i < lanes.length; i++) if (lanes[i]!.length === 0 && this.laneLastEnd[i]! <= start) return i;
    lanes.push([]);
    this.laneLastEnd.push(0);
    return lanes.length - 1;
  }

  private endSpan(span: OpenSpan, error: unknown, threw: boolean): void {
    const end = performance.now();
    let lane = span.lane;
    const stack = this.lanes[lane]!;
    if (stack[stack.length - 1] === span) stack.pop();
    else {
      const at = stack.lastIndexOf(span);
      if (at >= 0) stack.splice(at, 1);
      lane = this.detachedLane(span.start);
    }
    if (end > this.laneLastEnd[lane]!) this.laneLastEnd[lane] = end;
    this.push(PH_COMPLETE, span.name, span.cat, span.args, span.start, end, lane, threw ? describeError(error) : undefined);
  }

  private push(ph: number, name: string, cat: string, args: Record<string, unknown> | undefined, start: number, end: number, lane: number, error: string | undefined): void {
    this.stats.recorded++;
    if (!this.buffer.push(ph, name, cat, args, start, end, lane, error)) {
      this.stats.dropped++;
      reportError("trace.bufferFull", `the perf tracer's buffer of ${this.maxBufferedEvents} events is full (the trace file is not being written: run directory unknown, or a slow disk); events are dropped and counted`);
      return;
    }
    if (!this.started) this.startWriting();
  }

  private startWriting(): void {
    this.started = true;
    this.startTimer();
    this.unregisterExit = onExitWriteSync(() => this.writeBuffered(true));
    if (resolveRankFile("traces", this.target) === undefined) {
      this.unsubscribeRun = whenRunKnown(() => {
        this.refreshActive();
        this.writeBuffered();
      });
    }
  }

  private startTimer(): void {
    this.timer = setInterval(() => this.writeBuffered(), this.saveIntervalMs);
    this.timer.unref();
  }

  private refreshActive(): void {
    const target = resolveRankFile("traces", this.target);
    this.active = this.enabled && (target === undefined || rankSelected(this.selection, target.rank));
    if (!this.active) this.buffer.clear();
  }

  /** Serialise and append the buffer; returns the target, or undefined while it is unknown. */
  private writeBuffered(sync = false): RankFileTarget | undefined {
    const target = resolveRankFile("traces", this.target);
    if (target === undefined) return undefined;
    if (!this.enabled || !rankSelected(this.selection, target.rank)) {
      this.buffer.clear();
      this.active = false;
      return undefined;
    }
    const buffer = this.buffer;
    const n = buffer.length;
    if (n === 0 && this.begun.has(target.path)) return target;
    const out = new ByteChunks(Math.min(MAX_CHUNK_BYTES, Math.max(MIN_CHUNK_BYTES, n * 256)));
    let lanes = this.begun.get(target.path);
    if (lanes === undefined) {
      lanes = new Set();
      this.begun.set(target.path, lanes);
      beginFile(target.path);
      for (const m of processMetadata(target)) out.write(traceEventLine(m));
    }
    const identity = `"rank":${target.rank},"role":${JSON.stringify(target.role)}`;
    for (let i = 0; i < n; i++) {
      const lane = buffer.lane[i]!;
      if (!lanes.has(lane)) {
        lanes.add(lane);
        out.write(traceEventLine(threadMetadata(target.pid, TID_BASE + lane, laneName(lane))));
      }
      out.write(this.line(buffer, i, target.pid, identity));
    }
    out.seal();
    buffer.clear();
    this.stats.written += n;
    const file = appendFileFor(target.path);
    if (sync) file.writeQueuedSync(Buffer.concat(out.chunks));
    else for (const chunk of out.chunks) file.append(chunk);
    return target;
  }

  /** One event as a line, written by hand: the writer's cost is mostly here. */
  private line(buffer: EventBuffer, i: number, pid: number, identity: string): string {
    const start = quarterMicros(buffer.start[i]!);
    const ts = epochText(start);
    const name = quote(buffer.name[i]!);
    const args = argsText(buffer.args[i], buffer.name[i]!);
    const ph = buffer.ph[i];
    if (ph === PH_COMPLETE) {
      const dur = quarterMicros(buffer.end[i]!) - start;
      const error = buffer.error[i];
      const errorText = error === undefined ? "" : `,"error":${JSON.stringify(error)}`;
      return `{"name":${name},"cat":"${buffer.cat[i]!}","ph":"X","ts":${ts},"dur":${dur},"pid":${pid},"tid":${TID_BASE + buffer.lane[i]!},"args":{${args}${identity}${errorText}}},\n`;
    }
    if (ph === PH_INSTANT) {
      return `{"name":${name},"cat":"${buffer.cat[i]!}","ph":"i","s":"t","ts":${ts},"pid":${pid},"tid":${TID_BASE + buffer.lane[i]!},"args":{${args}${identity}}},\n`;
    }
    return `{"name":${name},"ph":"C","ts":${ts},"pid":${pid},"tid":${TID_BASE},"args":{${args.slice(0, -1)}}},\n`;
  }
}

const quoted = new Map<string, string>();

/** A name as a JSON string, cached: span names repeat. */
function quote(name: string): string {
  let text = quoted.get(name);
  if (text === undefined) {
    text = JSON.stringify(name);
    if (quoted.size < 10_000) quoted.set(name, text);
  }
  return text;
}

/** The members of a span's args as JSON text followed by a comma ("" for none). */
function argsText(args: Record<string, unknown> | undefined, name: string): string {
  if (args === undefined) return "";
  let json: string | undefined;
  try {
    json = JSON.stringify(args);
  } catch (error) {
    warn("trace.args", `the args of trace event "${name}" are not JSON-serialisable (${describeError(error)}); the event is written without them`);
    return `"argsError":${JSON.stringify(describeError(error))},`;
  }
  if (json === undefined || json[0] !== "{") {
    warn("trace.args", `the args of trace event "${name}" must be a plain object; the event is written without them`);
    return "";
  }
  return json.length > 2 ? `${json.slice(1, -1)},` : "";
}

/**
 * Start a rank file with its `[`, once, whoever gets there first: the file is created exclusively,
 * so a worker thread or a second process tracing as the same rank never writes a second `[`.
 * Synchronous, once per file, off the caller's path.
 */
function beginFile(path: string): void {
  createFileOnce(path, TRACE_FILE_HEADER, "trace events are dropped and counted");
}

/**
 * Rows of worker threads are numbered from `threadId × 1000`, so threads of one rank writing the
 * same file never share a row.
 */
const TID_BASE = isMainThread ? 0 : threadId * 1000;

function laneName(lane: number): string {
  const thread = isMainThread ? "main" : `worker ${threadId}`;
  return lane === 0 ? thread : `${thread} async ${lane}`;
}

function positiveInteger(value: unknown, name: string): number {
  if (!Number.isInteger(value) || (value as number) < 1) throw new TypeError(`perf tracer ${name} must be an integer ≥ 1, got ${describeValue(value)}`);
  return value as number;
}

/** `RANKSCOPE_TRACE_RANKS`, through the one settings resolver (an invalid value is a TypeError). */
const RANK_SELECTION_KIND: SettingKind<RankSelection> = {
  valid: 'a rank selection such as "0", "0,2", "1-3" or "all"',
  fromOption: () => undefined,
  fromEnv: (raw) => {
    try {
      return parseRankSelection(raw, "RANKSCOPE_TRACE_RANKS");
    } catch {
      return undefined;
    }
  },
};

function rankSelectionFromEnv(): RankSelection {
  return resolveSetting<RankSelection>({ owner: "perf tracer", option: "ranks", env: "RANKSCOPE_TRACE_RANKS", kind: RANK_SELECTION_KIND, fallback: "all" }, undefined);
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
  if (typeof maybeFn !== "function") throw new TypeError(`traceScope("${name}", options, fn) needs a function to run as its last argument, got ${describeValue(maybeFn)}`);
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
