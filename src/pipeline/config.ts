/**
 * The backends config given to `initBackends` after validation. The check itself, with zod and
 * every backend's option shape, is `config-check.ts`, loaded at the first `initBackends`, so
 * `import "rankscope"` does not load zod (BENCHMARKS.md, "Install and import").
 */
import type { UncheckedBackendsConfig } from "../backends/options.js";
import type { ValidatedBackend } from "./config-check.js";
export type { BackendsConfig, UncheckedBackendsConfig } from "../backends/options.js";
export type { ValidatedBackend } from "./config-check.js";

/**
 * Check a backends config and resolve each backend's registration (loading lazily declared
 * backends). Throws a TypeError naming the backend and what was wrong (an option a backend that
 * declared its options does not know included); warns about options of a backend that declared
 * none and about `perRankShareRun` under `global_reduce` (a no-op there).
 */
export async function validateBackendsConfig(config: UncheckedBackendsConfig): Promise<ValidatedBackend[]> {
  const { checkBackendsConfig } = await import("./config-check.js");
  return checkBackendsConfig(config);
}
