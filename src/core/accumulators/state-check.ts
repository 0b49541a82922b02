/**
 * The checks the built-in reductions' `check` use on a state that arrived from another process:
 * small predicates, so each reduction's rule reads as its list of fields.
 */

/** A number of any value (NaN and ±Infinity included: recorded values may be those). */
const isNumber = (value: unknown): value is number => typeof value === "number";

/** A count: a finite number ≥ 0. */
export const isCount = (value: unknown): value is number =>
  typeof value === "number" && Number.isFinite(value) && value >= 0;

/** The first of `fields` that is not a number, as a problem; undefined when all are. */
export function numbers(state: Readonly<Record<string, unknown>>, fields: readonly string[]): string | undefined {
  for (const field of fields)
    if (!isNumber(state[field])) return `${field} must be a number, got ${describe(state[field])}`;
  return undefined;
}

/** The first of `fields` that is not a count, as a problem; undefined when all are. */
export function counts(state: Readonly<Record<string, unknown>>, fields: readonly string[]): string | undefined {
  for (const field of fields)
    if (!isCount(state[field])) return `${field} must be a finite number ≥ 0, got ${describe(state[field])}`;
  return undefined;
}

/** Version 1 is the only state version of the built-ins. */
export function versionOne(state: Readonly<Record<string, unknown>>): string | undefined {
  return state["v"] === 1 ? undefined : `v must be 1, got ${describe(state["v"])}`;
}

/** The first problem of several checks. */
export function firstProblem(...problems: Array<string | undefined>): string | undefined {
  return problems.find((p) => p !== undefined);
}

/** A short rendering of a value for a problem (strings quoted, long ones cut). */
export function describe(value: unknown): string {
  let text: string;
  try {
    text =
      typeof value === "string"
        ? JSON.stringify(value)
        : typeof value === "object" && value !== null
          ? JSON.stringify(value)
          : String(value);
  } catch {
    text = String(value);
  }
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}
