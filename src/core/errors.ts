/** What a caught value carries: one place to read it, so no caller asserts its type. */

/**
 * The `code` of a thrown value (`"ENOENT"` from Node's fs, `"ERR_WORKER_INVALID_EXEC_ARGV"`,
 * `"SQLITE_BUSY"`), or undefined when it has none: anything may be thrown, so it is checked.
 */
export function errorCode(error: unknown): string | undefined {
  if (error === null || typeof error !== "object" || !("code" in error)) return undefined;
  return typeof error.code === "string" ? error.code : undefined;
}
