/** Reading rankscope's environment variables, with errors that name the variable. */
import { warn } from "./diagnostics.js";

const TRUE = new Set(["1", "true", "yes", "on"]);
const FALSE = new Set(["", "0", "false", "no", "off"]);

/** A boolean switch: `true`/`1`/`yes`/`on` (any case) is on; unset, `false`/`0`/`no`/`off` is off. */
export function envFlag(name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env[name];
  if (raw === undefined) return false;
  const value = raw.trim().toLowerCase();
  if (TRUE.has(value)) return true;
  if (!FALSE.has(value)) {
    warn(`env.${name}`, `${name}=${JSON.stringify(raw)} is not a boolean; valid: true/1/yes/on or false/0/no/off. Treating it as off.`);
  }
  return false;
}

/** An integer ≥ min, or the default when unset; an invalid value is a warning and the default. */
export function envInteger(name: string, fallback: number, min = 0, env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) {
    warn(`env.${name}`, `${name}=${JSON.stringify(raw)} is not an integer ≥ ${min}; using the default ${fallback}.`);
    return fallback;
  }
  return value;
}
