/** Environment-only switches, read through the one settings resolver (`settings.ts`). */
import { flagKind, integerKind, resolveSetting } from "./settings.js";

/**
 * A boolean switch: `true`/`1`/`yes`/`on` (any case) is on; unset or empty is off,
 * `false`/`0`/`no`/`off` is off; anything else is a TypeError naming the variable.
 */
export function envFlag(name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  return resolveSetting(
    { owner: "rankscope", option: name, env: name, kind: flagKind, fallback: false },
    undefined,
    env,
  );
}

/** An integer ≥ min, or the default when unset or empty; anything else is a TypeError naming the variable. */
export function envInteger(name: string, fallback: number, min = 0, env: NodeJS.ProcessEnv = process.env): number {
  return resolveSetting(
    { owner: "rankscope", option: name, env: name, kind: integerKind(min), fallback },
    undefined,
    env,
  );
}
