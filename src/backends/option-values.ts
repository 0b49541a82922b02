/**
 * Reading a backend's own options once they were validated (`BackendRegistration.validate`): typed
 * values out of `BackendOptions`' `Record<string, unknown>` without casts, with the default for an
 * option that is absent. Shared by every built-in backend, so each reads its options the same way.
 */
import type { BackendOptions } from "./backend.js";

/** A number option, or `fallback` when it is absent (or not a number). */
export function numberOption(options: BackendOptions, name: string, fallback: number): number {
  const value = options[name];
  return typeof value === "number" ? value : fallback;
}

/** A string option, or `fallback`. */
export function stringOption<F extends string | undefined>(
  options: BackendOptions,
  name: string,
  fallback: F,
): string | F {
  const value = options[name];
  return typeof value === "string" ? value : fallback;
}

/** One of `values`, or `fallback`. */
export function enumOption<T extends string>(
  options: BackendOptions,
  name: string,
  values: readonly T[],
  fallback: T,
): T {
  const value = options[name];
  return values.find((v) => v === value) ?? fallback;
}

/** An object option of string values (labels, headers, attributes): its string fields, or `{}` when absent. */
export function stringRecordOption(options: BackendOptions, name: string): Record<string, string> {
  const value = options[name];
  const out: Record<string, string> = {};
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, field] of Object.entries(value)) if (typeof field === "string") out[key] = field;
  }
  return out;
}
