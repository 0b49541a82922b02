/** What a caught value carries: one place to read it, so no caller asserts its type. */

/**
 * The `code` of a thrown value (`"ENOENT"` from Node's fs, `"ERR_WORKER_INVALID_EXEC_ARGV"`,
 * `"SQLITE_BUSY"`), or `""` when it has none: anything may be thrown, so it is checked.
 */
export function errorCode(error: unknown): string {
  const code: unknown = error !== null && typeof error === "object" && "code" in error ? error.code : undefined;
  return typeof code === "string" ? code : "";
}
