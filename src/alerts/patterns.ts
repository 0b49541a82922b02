/** Which keys a rule's key or `*` pattern names (docs/alerts.md). */
import { isInternalKey } from "../core/internal-keys.js";

/** `*` matches any run of characters (slashes included); everything else literally. */
export function globMatches(pattern: string, key: string): boolean {
  const parts = pattern.split("*");
  const first = parts[0] ?? "";
  const last = parts[parts.length - 1] ?? "";
  if (!key.startsWith(first) || key.length < first.length + last.length || !key.endsWith(last)) return false;
  let at = first.length;
  const end = key.length - last.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i] ?? "";
    const found = key.indexOf(part, at);
    if (found === -1 || found + part.length > end) return false;
    at = found + part.length;
  }
  return true;
}

/** Whether a rule's pattern names `key`: an exact name always; a `*` pattern never one of rankscope's own keys unless it starts with `rankscope/`. */
export function patternNames(pattern: string, key: string): boolean {
  if (pattern === key) return true;
  return (
    pattern.includes("*") && (!isInternalKey(key) || pattern.startsWith("rankscope/")) && globMatches(pattern, key)
  );
}
