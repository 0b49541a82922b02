/** Errors of reading a store, in words (no SQLite import: the dashboard server uses these). */

const STORE_FILE = "metrics.db";

/** Why a store could not be read, in a sentence (SQLite's reason and code when it is SQLite's). */
export function describeStoreError(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  return typeof code === "string" && code.startsWith("SQLITE_") ? `${STORE_FILE} cannot be read: ${message} (${code})` : `${STORE_FILE} cannot be read: ${message}`;
}

/** True for an error raised by SQLite while reading a store (corrupt file, not a database, I/O). */
export function isStoreError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_");
}

