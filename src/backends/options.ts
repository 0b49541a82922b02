/**
 * The compile-time shape of a backends config: `initBackends({ console: { loggingMode: "global_reduce" } })`.
 *
 * Types only (no runtime code): the runtime checks stay in `pipeline/config.ts` (zod, for
 * JavaScript callers and configs read from files). These types make the same mistakes compile
 * errors for TypeScript callers: a `loggingMode` that is not one of the three, an option a backend
 * does not know (`evrey`), a backend name that is not registered (`tensorbaord`).
 *
 * Each backend's own options live in `BackendOptionsMap`, keyed by its registered name. A backend
 * added with `registerBackend` gets typed options with one declaration (declaration merging):
 *
 * ```ts
 * declare module "rankscope" {
 *   interface BackendOptionsMap { csv: { file?: string } }
 * }
 * ```
 *
 * A config entry whose key is not a backend name (an alias, `store_per_rank`) must say `type`.
 */
import type { LoggingMode } from "../core/metric.js";
import type { WandbOptions } from "./wandb/options.js";

/** Options of the `console` backend. */
export type ConsoleBackendOptions = {
  /** `"list"` (default, one key per line) or `"grid"` (AReaL's box-drawn table). */
  layout?: "list" | "grid";
  /** Key/value pairs per row of the grid (default 4). */
  pairsPerRow?: number;
};

/** Options of the `jsonl` backend. */
export type JsonlBackendOptions = {
  /** The file, relative to the run directory (default `metrics.jsonl` on the controller, `metrics-{rankName}.jsonl` per rank). */
  file?: string;
};

/** Options of the `store` backend (the embedded SQLite store the dashboard reads). */
export type StoreBackendOptions = {
  /** Write from a worker thread (default true), so SQLite never blocks the loop. */
  worker?: boolean;
  /** `finish()` waits for every write (default false: bounded by the deadline). */
  waitForWrites?: boolean;
  /** Batches queued for the writer before new ones are dropped and counted (default 256). */
  maxPendingBatches?: number;
  /** Milliseconds between commits (default 200). */
  commitIntervalMs?: number;
  /** A team server to stream the run to (`RANKSCOPE_SERVER_URL`; docs/server.md). */
  server?: string;
  /** A write token of the project (`RANKSCOPE_SERVER_TOKEN`). */
  serverToken?: string;
  /** The project the token must belong to (`RANKSCOPE_SERVER_PROJECT`; optional). */
  serverProject?: string;
  /** How often the sync looks at the store (default 1000 ms). */
  syncIntervalMs?: number;
  /** How long the run's end waits for the sync to deliver the rest (default 10,000 ms). */
  syncFinishDeadlineMs?: number;
  /** How long one batch is retried before the sync's pass gives up (default 30,000 ms). */
  syncSendDeadlineMs?: number;
};

/** Options of the `tensorboard` backend. */
export type TensorboardBackendOptions = {
  /** The event-file directory, relative to the run directory (default `tensorboard`). */
  dir?: string;
  /** Also write rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal?: boolean;
};

/** Options of the `wandb` backend. */
export type WandbBackendOptions = { [K in keyof WandbOptions]: WandbOptions[K] };

/** Options of the `prometheus` backend (docs/prometheus.md). */
export type PrometheusBackendOptions = {
  /** Address to listen on (default `127.0.0.1`). */
  host?: string;
  /** The controller's process listens here (default 9464); rank r on `port + 1 + r`; 0: any free port. */
  port?: number;
  /** Default `/metrics`. */
  path?: string;
  /** `false`: no server of its own; mount `metricsHandler()` from `rankscope/prometheus`. */
  serve?: boolean;
  /** Constant labels on every series. */
  labels?: Readonly<Record<string, string>>;
  /** `init` fails if it cannot listen by then (default 5000 ms). */
  listenDeadlineMs?: number;  /** Also export rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal?: boolean;
};

/** Options of the `prometheus_remote_write` backend (docs/prometheus.md). */
export type PrometheusRemoteWriteBackendOptions = {
  /** The receiver, e.g. `http://127.0.0.1:9090/api/v1/write`. */
  url: string;
  /** Extra request headers (never logged). */
  headers?: Readonly<Record<string, string>>;
  /** Constant labels on every series. */
  labels?: Readonly<Record<string, string>>;
  /** Deadline of one request (default 5000 ms). */
  timeoutMs?: number;
  /** How long a failing request is retried (default 30 000 ms). */
  retryBudgetMs?: number;
  /** The send queue's bound (default 100 000 samples). */
  maxQueuedSamples?: number;
  /** Samples per request (default 2000). */
  maxSamplesPerSend?: number;
  /** At shutdown, what is not sent by then is counted lost (default 8000 ms). */
  finishDeadlineMs?: number;  /** Also export rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal?: boolean;
};

/** Options of the `otlp` backend (docs/otlp.md). */
export type OtlpBackendOptions = {
  /** OTLP/HTTP metrics endpoint (default `http://127.0.0.1:4318/v1/metrics`). */
  url?: string;
  /** Extra request headers (never logged). */
  headers?: Readonly<Record<string, string>>;
  /** `service.name` (default `rankscope`). */
  serviceName?: string;
  /** Extra resource attributes. */
  resourceAttributes?: Readonly<Record<string, string>>;
  /** `cumulative` (default) or `delta`. */
  temporality?: "cumulative" | "delta";
  /** Deadline of one export (default 10 000 ms). */
  timeoutMs?: number;
  /** Exports waiting while one is in flight (default 100). */
  maxQueuedExports?: number;
  /** At shutdown, what is still queued then is counted lost (default 8000 ms). */
  finishDeadlineMs?: number;  /** Also export rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal?: boolean;
};

/**
 * Each registered backend's own options, by name. Built-in: `console`, `jsonl`, `store`,
 * `tensorboard`, `wandb`, `prometheus`, `prometheus_remote_write`, `otlp`. Add yours with declaration merging (see the module comment); a backend
 * not listed here can still be used from JavaScript or through a `BackendsConfig` cast.
 */
export interface BackendOptionsMap {
  console: ConsoleBackendOptions;
  jsonl: JsonlBackendOptions;
  store: StoreBackendOptions;
  tensorboard: TensorboardBackendOptions;
  wandb: WandbBackendOptions;
  prometheus: PrometheusBackendOptions;
  prometheus_remote_write: PrometheusRemoteWriteBackendOptions;
  otlp: OtlpBackendOptions;
}

/** The name of a backend known to the compiler (a key of `BackendOptionsMap`). */
export type BackendName = keyof BackendOptionsMap & string;

/** Options every backend config takes besides its own (see `CommonBackendOptions` for their meaning). */
export type BackendConfigBase = {
  /** Required: how this backend sees the ranks. */
  loggingMode: LoggingMode;
  /** With a per-rank mode: ranks share one run (e.g. one W&B run) instead of one each. */
  perRankShareRun?: boolean;
  /**
   * Log only every N-th flush. The skipped flushes are not lost: their values are merged into the
   * one that is logged (a `mean` over all N flushes, a `sum` of all of them).
   */
  every?: number;
  /** Milliseconds one call of this backend may take before the caller goes on without it. */
  deadlineMs?: number;
};

/** The config of backend `N`: the common options, its own, and optionally `type: N`. */
export type BackendConfigOf<N extends BackendName> = BackendConfigBase & BackendOptionsMap[N] & { type?: N };

/** A config entry under an alias key: `type` names the backend, whose options it takes. */
export type AliasedBackendConfig = { [N in BackendName]: BackendConfigBase & BackendOptionsMap[N] & { type: N } }[BackendName];

/** Any one backend's config (for a key the compiler cannot see, e.g. `Record<string, …>`). */
export type AnyBackendConfig = { [N in BackendName]: BackendConfigOf<N> }[BackendName];

/**
 * The config allowed under key `K`: a backend name takes its own options, any other key needs
 * `type`. For such a key the union also holds `UnknownBackendName<K>`, a sentence naming the key,
 * so the compiler's error for a misspelt backend (`tensorbaord`) names it and says what to do.
 */
export type BackendConfigFor<K> = string extends K ? AnyBackendConfig : K extends BackendName ? BackendConfigOf<K> | AliasedBackendConfig : AliasedBackendConfig | UnknownBackendName<K>;

/** What the compiler shows for a config key that is neither a backend name nor an alias with `type`. */
export type UnknownBackendName<K> = `"${K & string}" is not a backend name: use a registered backend (a key of BackendOptionsMap), or give this entry type: "<backend>"`;

/**
 * The config of every backend, by name: `{ console: { loggingMode: "global_reduce" } }`.
 *
 * Without a type argument (a variable annotated `BackendsConfig`), any key is allowed and each
 * value must be some backend's config. Functions that take a config (`initBackends`, `Logger`)
 * infer `C` from the literal, so a key must be a backend name or carry `type`.
 */
export type BackendsConfig<C extends object = Readonly<Record<string, AnyBackendConfig>>> = { readonly [K in keyof C]: Readonly<BackendConfigFor<K>> };

/** A backends config as the runtime sees it before validation (from JavaScript, a file, or a rank's init message). */
export type UncheckedBackendsConfig = Readonly<Record<string, Readonly<Record<string, unknown>>>>;

/** A `Logger` switch for a built-in backend: `true` for its defaults, or its options (`loggingMode` defaults to `global_reduce`). */
export type BackendSwitchOf<N extends BackendName> = boolean | Readonly<Partial<BackendConfigBase> & BackendOptionsMap[N]>;
