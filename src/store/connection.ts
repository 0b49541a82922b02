/**
 * Connections to a run's store. Kept apart from `schema.ts` so that no public declaration file
 * imports `better-sqlite3` (its types are a devDependency: a user with `skipLibCheck: false` would
 * get TS7016 from `rankscope/store`).
 */
import { sqliteDriver, type Database } from "./sqlite.js";
import { mkdirSync } from "node:fs";
import {
  BUSY_TIMEOUT_MS,
  RANKS_V2_COLUMNS,
  SCHEMA,
  SCHEMA_VERSION,
  STORE_FILE,
  storePath,
  withBusyRetry,
} from "./schema.js";
import { errorCode } from "../core/errors.js";

/** Open (creating when missing) a run's store for writing: WAL, the schema, the busy timeout. */
export function openForWriting(runDir: string): Database {
  mkdirSync(runDir, { recursive: true });
  const Driver = sqliteDriver();
  const db = new Driver(storePath(runDir), { timeout: BUSY_TIMEOUT_MS });
  try {
    withBusyRetry(() => db.pragma("journal_mode = WAL"));
    db.pragma("synchronous = NORMAL");
    withBusyRetry(() =>
      db
        .transaction(() => {
          db.exec(SCHEMA);
          migrate(db);
          db.pragma(`user_version = ${SCHEMA_VERSION}`);
        })
        .immediate(),
    );
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/** Columns added after version 1, by table: a file written by an older version gets them here. */
const ADDED_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  ranks: RANKS_V2_COLUMNS,
  writers: ["host TEXT", "heartbeat_at REAL"],
};

/** Bring a store written by an older version up to this schema (inside the opening transaction; new tables come from SCHEMA). */
function migrate(db: Database): void {
  for (const [table, columns] of Object.entries(ADDED_COLUMNS)) {
    const have = new Set(
      db
        .prepare<[], { name: string }>(`SELECT name FROM pragma_table_info('${table}')`)
        .all()
        .map((c) => c.name),
    );
    for (const column of columns)
      if (!have.has(column.split(" ")[0] ?? "")) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column}`);
  }
}

/**
 * Open a run's store for reading. Throws an Error naming the run directory when it has no store.
 * Read-only where SQLite allows it; WAL lets it read while writers write.
 */
export function openForReading(runDir: string): Database {
  const path = storePath(runDir);
  const Driver = sqliteDriver();
  let db: Database;
  try {
    db = new Driver(path, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    if (errorCode(error) === "SQLITE_CANTOPEN")
      throw new Error(
        `no rankscope store in ${runDir}: ${STORE_FILE} is missing (is it a run directory written with the "store" backend?)`,
        { cause: error },
      );
    throw error;
  }
  return db;
}
