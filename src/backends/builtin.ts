/**
 * The built-in backends, one line each: the name, its declared options (type only) and the module
 * that registers it. A module loads only when a config names it, so `import "rankscope"` stays light
 * (native modules, protobuf, HTTP clients, and zod: even console and jsonl declare zod shapes); `BackendOptionsMap` takes each backend's typed options
 * from this table (`backends/options.ts`).
 */
import { registerLazyBackend } from "./backend.js";

/**
 * A built-in backend: the module that registers it and, as types only, the module `M` that declares
 * its options and the name `K` of their shape there (named, so the published types keep the doc comments).
 */
export interface BuiltinBackend<M, K extends keyof M> {
  readonly load: () => Promise<unknown>;
  /** Only its type is used. */
  readonly options?: { readonly module: M; readonly name: K };
}

function builtin<M, K extends keyof M>(load: () => Promise<unknown>): BuiltinBackend<M, K> {
  return { load };
}

export const BUILTIN_BACKENDS = {
  console: builtin<typeof import("./console/options.js"), "CONSOLE_OPTIONS">(() => import("./console/index.js")),
  jsonl: builtin<typeof import("./jsonl/options.js"), "JSONL_OPTIONS">(() => import("./jsonl/index.js")),
  store: builtin<typeof import("./store/options.js"), "STORE_OPTIONS">(() => import("./store/index.js")),
  tensorboard: builtin<typeof import("./tensorboard/options.js"), "TENSORBOARD_OPTIONS">(
    () => import("./tensorboard/index.js"),
  ),
  wandb: builtin<typeof import("./wandb/options.js"), "WANDB_OPTIONS">(() => import("./wandb/index.js")),
  prometheus: builtin<typeof import("./prometheus/options.js"), "PROMETHEUS_OPTIONS">(
    () => import("./prometheus/index.js"),
  ),
  prometheus_remote_write: builtin<typeof import("./prometheus/options.js"), "PROMETHEUS_REMOTE_WRITE_OPTIONS">(
    () => import("./prometheus/index.js"),
  ),
  otlp: builtin<typeof import("./otlp/options.js"), "OTLP_OPTIONS">(() => import("./otlp/index.js")),
};

for (const [name, backend] of Object.entries(BUILTIN_BACKENDS)) registerLazyBackend(name, backend.load);
