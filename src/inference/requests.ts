/**
 * The request API: `startRequest({ model, provider, operation })`, then `firstToken()`, `token()`,
 * and `end({ inputTokens, outputTokens })` or `fail(errorType)`. What it records are ordinary keys
 * of the collector — the conventions' instruments with their attributes, each a `Reduce.buckets`
 * with the conventions' boundaries, and rankscope's counts as `Reduce.RATE` — so they are merged
 * across threads, processes and hosts by the one reduce machinery, and reach every sink.
 *
 * The hot path: a model's instruments are bound once (`inferenceModel`, or `startRequest`'s cache),
 * a request is one small object and a clock read, a server-side token mark is one add (a
 * client-side chunk mark also reads the clock and stores the gap in its model's pending chunk
 * times, appended at a request's end or before a flush: see `InferenceModel.chunk`); nothing is
 * awaited, no I/O.
 */
import { performance } from "node:perf_hooks";
import type { MetricAttributes } from "../core/attributes.js";
import { attributedKey } from "../core/attributes.js";
import { getCollector, type Collector, type NumericEntry } from "../core/collector.js";
import { Reduce } from "../core/registry.js";
import {
  GENAI_ATTRIBUTES as A,
  GENAI_INSTRUMENTS as I,
  INFERENCE_COUNTS,
  instrumentReduce,
  type GenAiInstrument,
} from "./conventions.js";

/** Who measures: a model server (`gen_ai.server.*`) or a client calling one (`gen_ai.client.*`). */
export type InferenceSide = "server" | "client";

/** What a request is: its model, provider and operation, and any further attributes. */
export interface InferenceModelOptions {
  /** `gen_ai.request.model`, e.g. `"llama-3.1-8b"`. */
  readonly model: string;
  /** `gen_ai.provider.name`, e.g. `"openai"`, or your server's name for a model you serve. */
  readonly provider: string;
  /** `gen_ai.operation.name`; default `"chat"`. */
  readonly operation?: string;
  /** `"server"` (default): TTFT and TPOT; `"client"`: time to first chunk, per chunk, token usage. */
  readonly side?: InferenceSide;
  /** Further attributes on every instrument (`server.address`, `gen_ai.response.model`, …). */
  readonly attributes?: MetricAttributes;
}

/** Token counts at the end of a request. */
export interface InferenceUsage {
  /** Input (prompt) tokens. */
  readonly inputTokens?: number;
  /** Output tokens; default: the tokens marked with `firstToken` and `token`. */
  readonly outputTokens?: number;
}

/** One instrument's entry (undefined while recording is disabled or its key was dropped at a bound). */
type Slot = NumericEntry | undefined;

/**
 * The clock: `perf_hooks`' `performance`, held here (the global `performance` is a getter on
 * `globalThis`, a few ns more per read).
 */
const clock = performance;

/**
 * A client model's chunk times held before they are appended (2 KiB per client model): past this
 * many, they are appended at the next mark.
 */
const PENDING_CHUNKS = 256;

/** A model's instruments, bound once: what a request records into. */
export class InferenceModel {
  readonly side: InferenceSide;
  /** The attributes every instrument of this model carries. */
  readonly attributes: MetricAttributes;
  readonly duration: Slot;
  readonly firstToken: Slot;
  /** Server: time per output token, one value per request; client: time per output chunk, one per chunk. */
  readonly perToken: Slot;
  readonly inputUsage: Slot;
  readonly outputUsage: Slot;
  readonly requests: Slot;
  readonly inputTokens: Slot;
  readonly outputTokens: Slot;
  private readonly failures = new Map<string, readonly [duration: Slot, errors: Slot]>();
  /** The collector's `epoch` when bound: its entries are current while they are equal. */
  private readonly epoch: number;
  /** Client side: chunk times (seconds) not yet appended. */
  private readonly pending: Float64Array;
  private pendingCount = 0;
  /** True while the collector holds this model to append its chunk times before the next take (`Collector.held`). */
  private held = false;

  constructor(
    readonly collector: Collector,
    options: InferenceModelOptions,
  ) {
    this.side = options.side ?? "server";
    this.epoch = collector.epoch;
    this.attributes = Object.freeze({
      ...options.attributes,
      [A.operation]: options.operation ?? "chat",
      [A.provider]: options.provider,
      [A.requestModel]: options.model,
    });
    const server = this.side === "server";
    this.duration = this.bind(server ? I.serverRequestDuration : I.clientOperationDuration);
    this.firstToken = this.bind(server ? I.serverTimeToFirstToken : I.clientTimeToFirstChunk);
    this.perToken = this.bind(server ? I.serverTimePerOutputToken : I.clientTimePerOutputChunk);
    this.inputUsage = server ? undefined : this.bind(I.clientTokenUsage, { [A.tokenType]: "input" });
    this.outputUsage = server ? undefined : this.bind(I.clientTokenUsage, { [A.tokenType]: "output" });
    this.requests = this.count(INFERENCE_COUNTS.requests);
    this.inputTokens = this.count(INFERENCE_COUNTS.inputTokens);
    this.outputTokens = this.count(INFERENCE_COUNTS.outputTokens);
    this.pending = new Float64Array(server ? 0 : PENDING_CHUNKS);
  }

  /** Start a request now. */
  start(): InferenceRequest {
    return new InferenceRequest(this, clock.now());
  }

  /** True while its entries are the collector's (a `clear()` of the collector makes new ones). */
  get current(): boolean {
    return this.epoch === this.collector.epoch;
  }

  /** The duration and error-count entries of one `error.type`. */
  failure(errorType: string): readonly [Slot, Slot] {
    let slots = this.failures.get(errorType);
    if (slots === undefined) {
      const extra = { [A.errorType]: errorType };
      slots = [
        this.bind(this.side === "server" ? I.serverRequestDuration : I.clientOperationDuration, extra),
        this.count(INFERENCE_COUNTS.errors, extra),
      ];
      this.failures.set(errorType, slots);
    }
    return slots;
  }

  private bind(instrument: GenAiInstrument, extra?: MetricAttributes): Slot {
    const attributes = extra === undefined ? this.attributes : { ...this.attributes, ...extra };
    return this.collector.numericEntryFor(instrument.name, instrumentReduce(instrument), "startRequest", attributes);
  }

  private count(name: string, extra?: MetricAttributes): Slot {
    const attributes = extra === undefined ? this.attributes : { ...this.attributes, ...extra };
    return this.collector.numericEntryFor(name, Reduce.RATE, "startRequest", attributes);
  }

  /** Record one value into a slot, as a bound handle does. */
  record(slot: Slot, value: number): void {
    const collector = this.collector;
    if (slot === undefined) {
      if (!collector.disabled) collector.droppedKeyRecords++;
      return;
    }
    slot.accumulator.append(value);
    if (collector.stream !== null) collector.stream.record(slot, value, collector.step);
  }

  /**
   * `record` for an instrument's slot (`Reduce.buckets`), and `recordCount` for a count's
   * (`Reduce.RATE`): the same body, so that each `append` call site sees one accumulator class
   * (a monomorphic call V8 inlines) — the hot path of a request's end and of a client mark.
   */
  recordValue(slot: Slot, value: number): void {
    if (slot === undefined) return this.record(slot, value);
    slot.accumulator.append(value);
    const stream = this.collector.stream;
    if (stream !== null) stream.record(slot, value, this.collector.step);
  }

  /** See `recordValue`. */
  recordCount(slot: Slot, value: number): void {
    if (slot === undefined) return this.record(slot, value);
    slot.accumulator.append(value);
    const stream = this.collector.stream;
    if (stream !== null) stream.record(slot, value, this.collector.step);
  }

  /**
   * One client chunk's time, in seconds: held in `pending` and appended (`appendChunks`) at the end
   * or failure of any of this model's requests, when `PENDING_CHUNKS` are held, and before the
   * collector's states are taken at a flush (`Collector.held`) — so a mark is a clock read and a
   * store, and each chunk's time reaches the flush it was measured in, with the same value.
   */
  chunk(seconds: number): void {
    let n = this.pendingCount;
    if (n === this.pending.length) {
      this.appendChunks();
      n = 0;
    }
    if (!this.held) {
      this.held = true;
      this.collector.held.hold(this);
    }
    this.pending[n] = seconds;
    this.pendingCount = n + 1;
  }

  /** The collector's call before it takes the states (`Collector.held`). */
  appendHeld(): void {
    this.held = false;
    this.appendChunks();
  }

  /** Append the chunk times `chunk` holds. */
  appendChunks(): void {
    const n = this.pendingCount;
    this.pendingCount = 0;
    for (let i = 0; i < n; i++) this.recordChunk(this.pending[i] ?? 0);
  }

  /** One client chunk's time (`recordValue` with a call site of its own). */
  private recordChunk(value: number): void {
    const slot = this.perToken;
    if (slot === undefined) return this.record(slot, value);
    slot.accumulator.append(value);
    const stream = this.collector.stream;
    if (stream !== null) stream.record(slot, value, this.collector.step);
  }
}

/**
 * One request in flight. Mark its first token, further tokens, then `end` or `fail` it once; a
 * mark after the end is ignored.
 */
export class InferenceRequest {
  private first = -1;
  private last = 0;
  private tokens = 0;
  private ended = false;
  /** Client side, until the end: a further mark is a chunk whose time since the previous one is recorded. */
  private chunks: boolean;

  constructor(
    private readonly model: InferenceModel,
    private readonly started: number,
  ) {
    this.chunks = model.side === "client";
  }

  /** The first output token (or chunk) arrived: time to first token. Counts one token. */
  firstToken(): void {
    if (this.first >= 0 || this.ended) return;
    this.first = this.last = clock.now();
    this.tokens++;
  }

  /**
   * `count` further output tokens (default 1). On the client side each call is one chunk and its
   * time since the previous chunk is recorded; on the server side it only counts. The first call
   * before `firstToken` is the first token.
   */
  token(count = 1): void {
    if (this.first < 0) {
      this.firstToken();
      this.tokens += count - 1;
      return;
    }
    this.tokens += count;
    if (this.chunks) {
      const at = clock.now();
      this.model.chunk((at - this.last) / 1000);
      this.last = at;
    }
  }

  /** The request succeeded: records its duration, TTFT, TPOT, token counts and usage. */
  end(usage?: InferenceUsage): void {
    if (this.ended) return;
    this.ended = true;
    this.chunks = false;
    const m = this.model;
    const at = clock.now();
    m.appendChunks();
    const output = usage?.outputTokens ?? this.tokens;
    const input = usage?.inputTokens;
    m.recordValue(m.duration, (at - this.started) / 1000);
    if (this.first >= 0) {
      m.recordValue(m.firstToken, (this.first - this.started) / 1000);
      if (m.side === "server" && output > 1) m.recordValue(m.perToken, (at - this.first) / 1000 / (output - 1));
    }
    m.recordCount(m.requests, 1);
    m.recordCount(m.outputTokens, output);
    if (input !== undefined) m.recordCount(m.inputTokens, input);
    if (m.side === "client") {
      if (input !== undefined) m.recordValue(m.inputUsage, input);
      m.recordValue(m.outputUsage, output);
    }
  }

  /** The request failed with `errorType` (`error.type`: `"timeout"`, `"500"`, an exception's name…). */
  fail(errorType: string): void {
    if (this.ended) return;
    this.ended = true;
    this.chunks = false;
    const m = this.model;
    m.appendChunks();
    const [duration, errors] = m.failure(errorType);
    m.recordValue(duration, (clock.now() - this.started) / 1000);
    m.recordCount(m.requests, 1);
    m.recordCount(errors, 1);
  }
}

/**
 * The models `startRequest` bound, by model name: each name's list holds its (side, provider,
 * operation) combinations, each with its model without further attributes and its models by the
 * further attributes' key. Past `MAX_CACHED_MODELS` models, a model is bound per call.
 */
interface CachedModels {
  readonly side: InferenceSide;
  readonly provider: string;
  readonly operation: string;
  plain: InferenceModel | undefined;
  readonly byAttributes: Map<string, InferenceModel>;
}
const MAX_CACHED_MODELS = 10_000;
/** The key of a frozen `attributes` object, found again by identity (no key built per call). */
const frozenAttributeKeys = new WeakMap<MetricAttributes, string>();

/** The cache key of a model's further attributes. */
function attributesKey(attributes: MetricAttributes): string {
  if (!Object.isFrozen(attributes)) return attributedKey("_", attributes);
  let key = frozenAttributeKeys.get(attributes);
  if (key === undefined) frozenAttributeKeys.set(attributes, (key = attributedKey("_", attributes)));
  return key;
}
const models = new Map<string, CachedModels[]>();
let cachedModels = 0;

/** The cache entry of a model name's (side, provider, operation), made when absent. */
function cachedFor(model: string, side: InferenceSide, provider: string, operation: string): CachedModels {
  let list = models.get(model);
  if (list === undefined) models.set(model, (list = []));
  for (let i = 0; i < list.length; i++) {
    const c = list[i]!;
    if (c.provider === provider && c.operation === operation && c.side === side) return c;
  }
  const made: CachedModels = { side, provider, operation, plain: undefined, byAttributes: new Map() };
  list.push(made);
  return made;
}

/**
 * Bind a model's instruments once, then `model.start()` per request: the cheapest form for a
 * server that knows its models. Validates the options now.
 */
export function inferenceModel(options: InferenceModelOptions): InferenceModel {
  return new InferenceModel(getCollector(), options);
}

/**
 * Start a request: `const r = startRequest({ model, provider }); r.firstToken(); r.token(); r.end({ inputTokens })`.
 * A model's instruments are bound at its first request and reused (docs/inference.md): the lookup
 * is one `Map.get` on the model name and a comparison of the other options; no key is built unless
 * `attributes` are given (and then once for a frozen object, found again by identity).
 */
export function startRequest(options: InferenceModelOptions): InferenceRequest {
  const side = options.side ?? "server";
  const operation = options.operation ?? "chat";
  const cached = cachedFor(options.model, side, options.provider, operation);
  const attributes = options.attributes === undefined ? undefined : attributesKey(options.attributes);
  let model = attributes === undefined ? cached.plain : cached.byAttributes.get(attributes);
  if (model === undefined || !model.current) {
    const fresh = model === undefined;
    model = inferenceModel(options);
    if (!fresh || cachedModels < MAX_CACHED_MODELS) {
      if (attributes === undefined) cached.plain = model;
      else cached.byAttributes.set(attributes, model);
      if (fresh) cachedModels++;
    }
  }
  return model.start();
}
