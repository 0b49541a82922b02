/**
 * The request API: `startRequest({ model, provider, operation })`, then `firstToken()`, `token()`,
 * and `end({ inputTokens, outputTokens })` or `fail(errorType)`. What it records are ordinary keys
 * of the collector — the conventions' instruments with their attributes, each a `Reduce.buckets`
 * with the conventions' boundaries, and rankscope's counts as `Reduce.RATE` — so they are merged
 * across threads, processes and hosts by the one reduce machinery, and reach every sink.
 *
 * The hot path: a model's instruments are bound once (`inferenceModel`, or `startRequest`'s cache),
 * a request is one small object and a clock read, a server-side token mark is one add (a
 * client-side chunk mark also reads the clock and appends the gap); nothing is awaited, no I/O.
 */
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

function now(): number {
  return performance.now();
}

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

  constructor(
    readonly collector: Collector,
    options: InferenceModelOptions,
  ) {
    this.side = options.side ?? "server";
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
  }

  /** Start a request now. */
  start(): InferenceRequest {
    return new InferenceRequest(this, now());
  }

  /** True while its entries are the collector's (a `clear()` of the collector makes new ones). */
  get current(): boolean {
    const entry = this.requests;
    return entry === undefined || this.collector.entries.get(entry.key) === entry;
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

  constructor(
    private readonly model: InferenceModel,
    private readonly started: number,
  ) {}

  /** The first output token (or chunk) arrived: time to first token. Counts one token. */
  firstToken(): void {
    if (this.first >= 0 || this.ended) return;
    this.first = this.last = now();
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
    const model = this.model;
    if (model.side === "client" && !this.ended) {
      const at = now();
      model.record(model.perToken, (at - this.last) / 1000);
      this.last = at;
    }
  }

  /** The request succeeded: records its duration, TTFT, TPOT, token counts and usage. */
  end(usage?: InferenceUsage): void {
    if (this.ended) return;
    this.ended = true;
    const m = this.model;
    const at = now();
    const output = usage?.outputTokens ?? this.tokens;
    const input = usage?.inputTokens;
    m.record(m.duration, (at - this.started) / 1000);
    if (this.first >= 0) {
      m.record(m.firstToken, (this.first - this.started) / 1000);
      if (m.side === "server" && output > 1) m.record(m.perToken, (at - this.first) / 1000 / (output - 1));
    }
    m.record(m.requests, 1);
    m.record(m.outputTokens, output);
    if (input !== undefined) m.record(m.inputTokens, input);
    if (m.side === "client") {
      if (input !== undefined) m.record(m.inputUsage, input);
      m.record(m.outputUsage, output);
    }
  }

  /** The request failed with `errorType` (`error.type`: `"timeout"`, `"500"`, an exception's name…). */
  fail(errorType: string): void {
    if (this.ended) return;
    this.ended = true;
    const m = this.model;
    const [duration, errors] = m.failure(errorType);
    m.record(duration, (now() - this.started) / 1000);
    m.record(m.requests, 1);
    m.record(errors, 1);
  }
}

/** Models bound by `startRequest`, by side, provider, operation and model (then further attributes' key); past this many, a model is bound per call. */
const MAX_CACHED_MODELS = 10_000;
type Level<T> = Map<string, T>;
const models: Level<Level<Level<Level<Map<string, InferenceModel>>>>> = new Map();
let cachedModels = 0;

function level<T>(map: Map<string, Map<string, T>>, key: string): Map<string, T> {
  let value = map.get(key);
  if (value === undefined) map.set(key, (value = new Map<string, T>()));
  return value;
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
 * is a few `Map.get`s on the option strings, no key is built unless `attributes` are given.
 */
export function startRequest(options: InferenceModelOptions): InferenceRequest {
  const side = options.side ?? "server";
  const operation = options.operation ?? "chat";
  const extra = options.attributes === undefined ? "" : attributedKey("_", options.attributes);
  let model = models.get(side)?.get(options.provider)?.get(operation)?.get(options.model)?.get(extra);
  if (model === undefined || !model.current) {
    const fresh = model === undefined;
    model = inferenceModel(options);
    if (!fresh || cachedModels < MAX_CACHED_MODELS) {
      level(level(level(level(models, side), options.provider), operation), options.model).set(extra, model);
      if (fresh) cachedModels++;
    }
  }
  return model.start();
}
