/**
 * Names from users' jobs (runs, keys, ranks) as display text. Control characters, bidi
 * overrides/isolates and zero-width characters are shown as visible `\u{…}` escapes: a
 * right-to-left override in a run name must not reverse what the page shows after it.
 */

/** C0/C1 controls, DEL, bidi marks/embeddings/overrides/isolates, zero-width characters, BOM. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/gu;

/** The name with every invisible or direction-changing character written as `\u{202E}`. */
export function visibleName(name: string): string {
  return name.replace(INVISIBLE, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}}`);
}

/**
 * Keys rankscope writes for itself (counts of a mean's samples, rank bookkeeping, dropped stream
 * values): hidden by default. The server says so per key (`internal`); this rule is its fallback.
 */
export function isInternalKey(key: string, internal?: boolean): boolean {
  if (internal !== undefined) return internal;
  return key.endsWith("__count") || key.startsWith("rankscope/");
}

export { searchMatcher } from "../search-text.js";

/** The section a key belongs to: the part before its first `/`, or "" for keys without one. */
export function sectionOf(key: string): string {
  const slash = key.indexOf("/");
  return slash > 0 ? key.slice(0, slash) : "";
}
