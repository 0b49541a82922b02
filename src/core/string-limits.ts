/**
 * One set of limits for every string a job sends the team server (metric keys, tags, the group,
 * rank names, hyperparameter names and values, the config): checked where the value enters the
 * job (`recordMetric` throws for such a key, a rank's flush drops and counts it), by the sync
 * before a batch is packed (a string that breaks them is left out, named and counted), and by the
 * server's batch check (`src/sync/wire.ts`: the part holding it is refused, named and counted, the
 * rest of the batch lands). PostgreSQL `text` holds neither a NUL character nor half of a UTF-16
 * surrogate pair, hence those two rules besides the lengths.
 */

/** Characters at most, by what the string is. */
export const STRING_LIMITS = {
  /** A metric key, a tag, a group, a rank name, a hyperparameter's name, a host name. */
  name: 1_000,
  /** A hyperparameter's value (text) as the runs list filters on it. */
  paramValue: 10_000,
} as const;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** What is wrong with `value` as a string the server stores (over `max` characters, a NUL, a lone surrogate), or undefined. */
export function stringProblem(value: string, max: number): string | undefined {
  if (value.length > max) return `is longer than ${max} characters (${value.length})`;
  if (value.includes("\u0000")) return "holds a NUL character, which PostgreSQL text cannot hold";
  if (LONE_SURROGATE.test(value)) return "holds a lone UTF-16 surrogate, which PostgreSQL text cannot hold";
  return undefined;
}
