/**
 * The compile-time shape of a backends config: `initBackends({ console: { loggingMode: "global_reduce" } })`.
 *
 * Types only (no runtime code): each option set is declared once, as a zod shape in its backend's
 * folder (`<name>/options.ts`, common ones in `common-options.ts`); its type comes from there, and
 * config validation (`pipeline/config.ts`) checks JavaScript callers and configs read from files
 * against the same shape. These types make the same mistakes compile errors for TypeScript
 * callers: a `loggingMode` that is not one of the three, an option a backend
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
import type { BUILTIN_BACKENDS, BuiltinBackend } from "./builtin.js";
import type { CommonBackendOptions } from "./common-options.js";
import type { OptionShape, OptionsOf } from "./option-schema.js";
import type { ConsoleBackendOptions } from "./console/options.js";
import type { JsonlBackendOptions } from "./jsonl/options.js";
import type { OtlpBackendOptions } from "./otlp/options.js";
import type { PrometheusBackendOptions, PrometheusRemoteWriteBackendOptions } from "./prometheus/options.js";
import type { StoreBackendOptions } from "./store/options.js";
import type { TensorboardBackendOptions } from "./tensorboard/options.js";
import type { WandbOptions } from "./wandb/options.js";

// Each backend's options are declared once, in its own folder (`<name>/options.ts`).
export type {
  ConsoleBackendOptions,
  JsonlBackendOptions,
  OtlpBackendOptions,
  PrometheusBackendOptions,
  PrometheusRemoteWriteBackendOptions,
  StoreBackendOptions,
  TensorboardBackendOptions,
};

/** Options of the `wandb` backend. */
export type WandbBackendOptions = WandbOptions;

/** The shape a built-in backend's table line names (`builtin.ts`). */
type BuiltinShape<N extends keyof typeof BUILTIN_BACKENDS> =
  (typeof BUILTIN_BACKENDS)[N] extends BuiltinBackend<infer M, infer K>
    ? M[K] extends OptionShape
      ? M[K]
      : never
    : never;

/** The built-in backends' options, by name: from their lines in `builtin.ts`, declared in their folders. */
export type BuiltinBackendOptionsMap = { [N in keyof typeof BUILTIN_BACKENDS]: OptionsOf<BuiltinShape<N>> };

/**
 * Each registered backend's own options, by name. Built-in: `console`, `jsonl`, `store`,
 * `tensorboard`, `wandb`, `prometheus`, `prometheus_remote_write`, `otlp` (`BuiltinBackendOptionsMap`).
 * Add yours with declaration merging (see the module comment); a backend not listed here can still
 * be used from JavaScript or through a `BackendsConfig` cast.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- an interface, so users add their backends by declaration merging
export interface BackendOptionsMap extends BuiltinBackendOptionsMap {}

/** The name of a backend known to the compiler (a key of `BackendOptionsMap`). */
export type BackendName = keyof BackendOptionsMap & string;

/** Options every backend config takes besides its own: `CommonBackendOptions` without `type`. */
export type BackendConfigBase = Omit<CommonBackendOptions, "type">;

/** The config of backend `N`: the common options, its own, and optionally `type: N`. */
export type BackendConfigOf<N extends BackendName> = BackendConfigBase & BackendOptionsMap[N] & { type?: N };

/** A config entry under an alias key: `type` names the backend, whose options it takes. */
export type AliasedBackendConfig = {
  [N in BackendName]: BackendConfigBase & BackendOptionsMap[N] & { type: N };
}[BackendName];

/** Any one backend's config (for a key the compiler cannot see, e.g. `Record<string, …>`). */
export type AnyBackendConfig = { [N in BackendName]: BackendConfigOf<N> }[BackendName];

/**
 * The config allowed under key `K`: a backend name takes its own options, any other key needs
 * `type`. For such a key the union also holds `UnknownBackendName<K>`, a sentence naming the key,
 * so the compiler's error for a misspelt backend (`tensorbaord`) names it and says what to do.
 */
export type BackendConfigFor<K> = string extends K
  ? AnyBackendConfig
  : K extends BackendName
    ? BackendConfigOf<K> | AliasedBackendConfig
    : AliasedBackendConfig | UnknownBackendName<K>;

/** What the compiler shows for a config key that is neither a backend name nor an alias with `type`. */
export type UnknownBackendName<K> =
  `"${K & string}" is not a backend name: use a registered backend (a key of BackendOptionsMap), or give this entry type: "<backend>"`;

/**
 * The config of every backend, by name: `{ console: { loggingMode: "global_reduce" } }`.
 *
 * Without a type argument (a variable annotated `BackendsConfig`), any key is allowed and each
 * value must be some backend's config. Functions that take a config (`initBackends`, `Logger`)
 * infer `C` from the literal, so a key must be a backend name or carry `type`.
 */
export type BackendsConfig<C extends object = Readonly<Record<string, AnyBackendConfig>>> = {
  readonly [K in keyof C]: Readonly<BackendConfigFor<K>>;
};

/** A backends config as the runtime sees it before validation (from JavaScript, a file, or a rank's init message). */
export type UncheckedBackendsConfig = Readonly<Record<string, Readonly<Record<string, unknown>>>>;

/** A `Logger` switch for a built-in backend: `true` for its defaults, or its options (`loggingMode` defaults to `global_reduce`). */
export type BackendSwitchOf<N extends BackendName> =
  boolean | Readonly<Partial<BackendConfigBase> & BackendOptionsMap[N]>;
