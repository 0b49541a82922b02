/**
 * Validation of the backends config given to `initBackends`, all of it before any backend starts
 * (Forge's rule: validate at init, never change the user's arguments silently, a warning and a
 * no-op is fine). Loaded by `config.ts` at the first `initBackends`: zod and the option shapes stay
 * out of `import "rankscope"`.
 */
import { z } from "zod";
import { warn } from "../core/diagnostics.js";
import { COMMON_OPTIONS_SCHEMA, COMMON_OPTION_NAMES } from "../backends/common-options.js";
import { checkOptions, type OptionShape } from "../backends/option-schema.js";
import type { LoggingMode } from "../core/metric.js";
import {
  knownBackendNames,
  resolveBackendRegistration,
  type BackendOptions,
  type BackendRegistration,
} from "../backends/backend.js";
import type { UncheckedBackendsConfig } from "../backends/options.js";

/** One backend after validation. */
export interface ValidatedBackend {
  /** The config key (what messages call it). */
  readonly name: string;
  /** The registered backend it instantiates (the key, or `type` when given). */
  readonly type: string;
  readonly loggingMode: LoggingMode;
  readonly options: BackendOptions;
  readonly registration: BackendRegistration;
}

/** Each backend's options schema, built once from its shape. */
const schemas = new WeakMap<OptionShape, z.AnyZodObject>();
function schemaOf(shape: OptionShape): z.AnyZodObject {
  let schema = schemas.get(shape);
  if (schema === undefined) schemas.set(shape, (schema = z.object(shape)));
  return schema;
}

/** `validateBackendsConfig` of config.ts. */
export async function checkBackendsConfig(config: UncheckedBackendsConfig): Promise<ValidatedBackend[]> {
  if (config === null || typeof config !== "object" || Array.isArray(config)) {
    throw new TypeError(
      `initBackends takes an object of backend configs, e.g. { console: { loggingMode: "global_reduce" } }, got ${String(config)}`,
    );
  }
  const validated: ValidatedBackend[] = [];
  for (const [name, raw] of Object.entries(config)) {
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
      throw new TypeError(
        `backend "${name}": config must be an object such as { loggingMode: "global_reduce" }, got ${JSON.stringify(raw)}`,
      );
    }
    const parsed = COMMON_OPTIONS_SCHEMA.safeParse(raw);
    if (!parsed.success) {
      const messages = parsed.error.issues.map((i) => i.message);
      throw new TypeError(`backend "${name}": ${messages.join("; ")}`);
    }
    const type = parsed.data.type ?? name;
    const registration = await resolveBackendRegistration(type);
    if (registration === undefined) {
      throw new TypeError(
        `unknown backend "${type}"${type === name ? "" : ` (config "${name}")`}; registered: ${knownBackendNames().join(", ")}`,
      );
    }
    const options: BackendOptions = { ...raw, ...parsed.data };
    for (const key of Object.keys(raw)) {
      if (!COMMON_OPTION_NAMES.includes(key) && !registration.knownOptions.includes(key)) {
        // The settings policy (core/settings.ts): a typo in a declared option set is an error.
        if (registration.strictOptions === true) {
          throw new TypeError(
            `backend "${name}": unknown option "${key}"; valid: ${[...COMMON_OPTION_NAMES, ...registration.knownOptions].join(", ")}`,
          );
        }
        warn(
          `config.unknownOption:${name}.${key}`,
          `backend "${name}": unknown option "${key}" is ignored; options: ${[...COMMON_OPTION_NAMES, ...registration.knownOptions].join(", ")}`,
        );
      }
    }
    if (parsed.data.perRankShareRun === true && parsed.data.loggingMode === "global_reduce") {
      warn(
        `config.perRankShareRun:${name}`,
        `backend "${name}": perRankShareRun only applies to per-rank modes; under global_reduce there is one run already, so it is ignored`,
      );
    }
    if (parsed.data.every !== undefined && parsed.data.every > 1 && parsed.data.loggingMode === "per_rank_no_reduce") {
      warn(
        `config.everyStream:${name}`,
        `backend "${name}": every only applies to reduced flushes (global_reduce, per_rank_reduce); raw streams are logged as they come, so it is ignored`,
      );
    }
    // Each value against the backend's declared options, then what the declaration cannot say.
    if (registration.optionShape !== undefined)
      checkOptions(`backend "${name}"`, schemaOf(registration.optionShape), raw);
    registration.validate?.(options);
    validated.push({ name, type, loggingMode: parsed.data.loggingMode, options, registration });
  }
  return validated;
}
