/**
 * The store's file name, and what can be wrong with a store file, in words. No SQLite here: the
 * dashboard server names and explains store files without loading the database driver.
 */

import { errorCode } from "../core/errors.js";
import { describeError } from "../core/diagnostics.js";

/** The store's file name inside a run directory. */
export const STORE_FILE = "metrics.db";

/**
 * What is wrong with a store that could not be read, in words (`metrics.db is not a SQLite
 * database`), from SQLite's error code; the error's own message when the code says nothing more.
 */
export function storeFault(error: unknown): string {
  const code = errorCode(error);
  const detail = describeError(error);
  if (code === "SQLITE_NOTADB")
    return `${STORE_FILE} is not a SQLite database (damaged, or not written by rankscope): ${detail}`;
  if (code.startsWith("SQLITE_CORRUPT")) return `${STORE_FILE} is damaged (SQLite reports corruption): ${detail}`;
  if (code.startsWith("SQLITE_IOERR")) return `${STORE_FILE} could not be read (I/O error): ${detail}`;
  if (code.startsWith("SQLITE_CANTOPEN")) return `${STORE_FILE} could not be opened: ${detail}`;
  if (code === "SQLITE_ERROR" && /no such (table|column)/.test(detail))
    return `${STORE_FILE} does not have the store's tables (an older or foreign file): ${detail}`;
  return detail;
}
