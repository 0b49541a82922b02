/**
 * The built-in backends. Light ones register on import; heavy ones (native modules, protobuf,
 * HTTP clients) are declared lazily and load only when a config names them.
 */
import "./console/index.js";
import "./jsonl/index.js";
import { registerLazyBackend } from "./backend.js";
registerLazyBackend("tensorboard", () => import("./tensorboard/index.js"));
registerLazyBackend("wandb", () => import("./wandb/index.js"));
registerLazyBackend("store", () => import("./store/index.js"));
registerLazyBackend("prometheus", () => import("./prometheus/index.js"));
registerLazyBackend("prometheus_remote_write", () => import("./prometheus/index.js"));
registerLazyBackend("otlp", () => import("./otlp/index.js"));
