/**
 * The backend interface and the registry of backends by name.
 *
 * A backend is where reduced metrics go: the console, a file, a store, TensorBoard, W&B. It is
 * created from its config by a factory registered under a name, and gets the same calls whatever
 * the logging mode; only where it lives differs (the controller for `global_reduce`, every rank
 * for the per-rank modes).
 */
import type { AlertEvent } from "../core/alert.js";
import type { HistogramMetric, LoggingMode, Metric, RankLoss, SampleBatch, StreamRecord } from "../core/metric.js";
import { processWide } from "../core/process-wide.js";
import type { RankIdentity } from "../core/rank-identity.js";
import type { RankTimingRecord } from "../core/straggler-report.js";
import type { CommonBackendOptions } from "./common-options.js";
import type { OptionShape } from "./option-schema.js";

/** Who a rank is (a contract every side reads: it lives in `core/rank-identity.ts`). */
export type { RankIdentity };

/** What a backend is told when it starts. */
export interface BackendContext {
  /** The name the backend is registered under, e.g. `console`. */
  readonly backendName: string;
  /** The name to show as the source: `GlobalReduce` on the controller, the rank name per rank. */
  readonly displayName: string;
  readonly loggingMode: LoggingMode;
  /** `controller` for global backends, `rank` for per-rank ones. */
  readonly role: "controller" | "rank";
  readonly identity: RankIdentity;
  /** The run directory files go under (created by whoever writes first). */
  readonly runDir: string;
  /** Experiment and trial names of the run. */
  readonly experiment: string;
  readonly trial: string;
  /** The step the run resumes from (0 for a fresh run). */
  readonly resumeStep: number;
  /** What this backend's controller-side instance handed to ranks (`metadataForRanks`), if any. */
  readonly primaryMetadata: Readonly<Record<string, unknown>>;
}

/** A logging backend. Only `logBatch` is required. */
export interface Backend {
  /** Called once before anything is logged. */
  init?(context: BackendContext): Promise<void> | void;
  /** Reduced scalars of one flush, sorted by key. */
  logBatch(metrics: readonly Metric[], step: number): Promise<void> | void;
  /** Raw values of `per_rank_no_reduce` mode. Called off the flush path; must not throw for bad I/O. */
  logStream?(batch: readonly StreamRecord[]): Promise<void> | void;
  /** Records of `Reduce.SAMPLE` keys at a flush. */
  logSamples?(samples: SampleBatch, step: number): Promise<void> | void;
  /** Buckets of `Reduce.HISTOGRAM` keys at a flush. */
  logHistograms?(histograms: readonly HistogramMetric[], step: number): Promise<void> | void;
  /** Run configuration / hyperparameters. */
  logHyperparams?(params: Readonly<Record<string, unknown>>): Promise<void> | void;
  /** On the controller: an alert fired or resolved (docs/alerts.md); the store records it for the dashboard. */
  logAlert?(alert: AlertEvent): Promise<void> | void;
  /**
   * On the controller: every rank's step time, lateness and barrier wait at a flush, with the
   * flush's straggler report (docs/stragglers.md); the store keeps it for the dashboard's Ranks view.
   */
  logRankTiming?(record: RankTimingRecord): Promise<void> | void;
  /** On the controller: a rank was lost (or came back); the store records it for the dashboard. */
  logRankLoss?(loss: RankLoss): Promise<void> | void;
  /** On the controller: what per-rank instances of this backend need (e.g. a shared run id). */
  metadataForRanks?(): Readonly<Record<string, unknown>> | undefined;
  /** Write out what is buffered (called after each flush's calls). */
  flushed?(): Promise<void> | void;
  /** Called once at shutdown; release files and connections. */
  finish?(): Promise<void> | void;
}

/** Options every backend accepts, besides its own (declared once, in `common-options.ts`). */
export type { CommonBackendOptions };

/** A backend's config: the common options plus its own. */
export type BackendOptions = CommonBackendOptions & Record<string, unknown>;

/** Creates a backend from its options (already checked against its declared options). */
export type BackendFactory = (options: BackendOptions) => Backend;

/** A registered backend: its factory and the options it understands. */
export interface BackendRegistration {
  readonly factory: BackendFactory;
  /**
   * Its own options, declared once (`registerBackend`'s `options`): every built-in backend has one,
   * and config validation checks each value against it.
   */
  readonly optionShape?: OptionShape;
  /**
   * Option names besides the common ones: the keys of `optionShape`, or the `knownOptions` a user
   * backend gave instead. When declared, an option not listed is a TypeError naming it; a backend
   * registered with neither gets a warning instead (its options are unknown to us).
   */
  readonly knownOptions: readonly string[];
  /** True when the options were declared (`options` or `knownOptions`): unknown options are errors. */
  readonly strictOptions?: boolean;
  /** Checks the shape cannot say (across options, the environment); throw a TypeError that says what was wrong and what is valid. */
  readonly validate?: (options: BackendOptions) => void;
  /**
   * Options naming where the backend sends data (a server's URL): a rank refuses such an option
   * in a per-rank config received over NATS unless its own side allows the destination
   * (`joinRun({ allowedDestinations })`), so the wire cannot send the rank's secrets elsewhere.
   */
  readonly destinationOptions?: readonly string[];
  /** Options naming a file or folder it writes: from the wire, a rank takes them only inside the run directory. */
  readonly pathOptions?: readonly string[];
}

/** What `registerBackend` takes besides the name and factory. */
export interface RegisterBackendOptions {
  /**
   * The backend's own options, declared once as a zod shape (`{ file: z.string().optional() }`,
   * each with its doc comment): their names, their checks, and with `OptionsOf<typeof shape>` their
   * type. Every built-in backend declares one (CONTRIBUTING.md, "Adding a backend").
   */
  options?: OptionShape;
  /** Names only, for a backend that does not use zod: unknown options are errors, values are left to `validate`. */
  knownOptions?: readonly string[];
  /** Checks the shape cannot say (across options, the environment), run after it. */
  validate?: (options: BackendOptions) => void;
  /** See `BackendRegistration.destinationOptions`. */
  destinationOptions?: readonly string[];
  /** See `BackendRegistration.pathOptions`. */
  pathOptions?: readonly string[];
}

function registry(): Map<string, BackendRegistration> {
  return processWide("backendRegistry", () => new Map<string, BackendRegistration>());
}

/**
 * Register a backend under `name`, so `initBackends({ [name]: { loggingMode, ...options } })`
 * creates it. Registering a name again replaces the earlier factory.
 */
export function registerBackend(name: string, factory: BackendFactory, options: RegisterBackendOptions = {}): void {
  if (typeof name !== "string" || name.length === 0)
    throw new TypeError(`registerBackend needs a non-empty name, got ${String(name)}`);
  if (typeof factory !== "function")
    throw new TypeError(`registerBackend("${name}", factory): factory must be a function returning a backend`);
  const { options: optionShape, validate, destinationOptions, pathOptions } = options;
  const knownOptions = optionShape === undefined ? options.knownOptions : Object.keys(optionShape);
  registry().set(name, {
    factory,
    knownOptions: knownOptions ?? [],
    strictOptions: knownOptions !== undefined,
    ...(optionShape === undefined ? {} : { optionShape }),
    ...(validate === undefined ? {} : { validate }),
    ...(destinationOptions === undefined ? {} : { destinationOptions }),
    ...(pathOptions === undefined ? {} : { pathOptions }),
  });
}

/** The registration of a backend, or undefined. */
export function getBackendRegistration(name: string): BackendRegistration | undefined {
  return registry().get(name);
}

/** Names of every registered backend, sorted. */
export function registeredBackends(): string[] {
  return [...registry().keys()].sort();
}

function lazyTable(): Map<string, () => Promise<unknown>> {
  return processWide("lazyBackends", () => new Map<string, () => Promise<unknown>>());
}

/**
 * Declare a backend whose module is loaded only when a config names it: `load` imports the module,
 * which calls `registerBackend(name, ...)`. Keeps heavy backends (SQLite, protobuf, HTTP clients)
 * out of `import { recordMetric } from "rankscope"`.
 */
export function registerLazyBackend(name: string, load: () => Promise<unknown>): void {
  lazyTable().set(name, load);
}

/** The registration of a backend, loading its module first when it was declared lazily. */
export async function resolveBackendRegistration(name: string): Promise<BackendRegistration | undefined> {
  const found = registry().get(name);
  if (found !== undefined) return found;
  const load = lazyTable().get(name);
  if (load === undefined) return undefined;
  await load();
  return registry().get(name);
}

/** Names of every registered or lazily declared backend, sorted. */
export function knownBackendNames(): string[] {
  return [...new Set([...registry().keys(), ...lazyTable().keys()])].sort();
}
