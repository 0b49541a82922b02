/**
 * The one place `better-sqlite3` is loaded. Two builds of the same API, by Node.js major:
 * - Node 22 and later: better-sqlite3 13 (`better-sqlite3-napi`, an optional dependency): Node-API,
 *   with prebuilt binaries for every platform in the package, so nothing is compiled. Version 12
 *   aborts the process on Node 24.19+ (`Assertion failed: (env) != nullptr` in
 *   `RemoveEnvironmentCleanupHook`, reached from `Statement::~Statement` during a GC: Node 24
 *   changed `node::ObjectWrap`, which 12 derives from; nodejs/node#65446).
 * - Node 20: better-sqlite3 12, an optional peer dependency the user installs
 *   (`npm install better-sqlite3@^12.11.1`; without it the store names that line). Version 13
 *   requires Node 22 (on 20 it crashes with a segmentation fault), so npm skips the optional
 *   dependency there.
 */
import { createRequire } from "node:module";
import type BetterSqlite3 from "better-sqlite3";
import { requireOptional } from "../core/optional-packages.js";

const require = createRequire(import.meta.url);

/** The package name that was loaded (`better-sqlite3-napi` or `better-sqlite3`). */
export let sqlitePackage = "better-sqlite3";

function load(): typeof BetterSqlite3 {
  const major = Number(process.versions.node.split(".")[0]);
  if (major >= 22) {
    try {
      const napi: typeof BetterSqlite3 = require("better-sqlite3-napi");
      sqlitePackage = "better-sqlite3-napi";
      return napi;
    } catch (error) {
      // Not installed (npm skipped the optional package): fall back to 12, which runs on 22 and
      // on 24 up to 24.18.
      if (!(error instanceof Error && "code" in error && error.code === "MODULE_NOT_FOUND")) throw error;
    }
  }
  // An optional peer dependency: npm does not install it, and a missing one is an error naming the
  // `npm install` line (Node 20 is past its end of life; 12 and its install script's 35 packages
  // are no longer in every install: DESIGN.md, "Dependencies").
  return requireOptional<typeof BetterSqlite3>("sqlite", "better-sqlite3");
}

let driver: typeof BetterSqlite3 | undefined;

/**
 * better-sqlite3's `Database` class, from the build that runs on this Node.js, loaded when the first
 * store is opened (not when a module that may open one is imported: `rankscope ui` on Node 20
 * without better-sqlite3 starts, and says what to install when it opens a run's store).
 */
export function sqliteDriver(): typeof BetterSqlite3 {
  driver ??= load();
  return driver;
}
/** A better-sqlite3 connection. */
export type Database = BetterSqlite3.Database;

/** The version of the better-sqlite3 build in use. */
export function sqliteVersion(): string {
  sqliteDriver();
  const manifest: unknown = require(`${sqlitePackage}/package.json`);
  return typeof manifest === "object" &&
    manifest !== null &&
    "version" in manifest &&
    typeof manifest.version === "string"
    ? manifest.version
    : "unknown";
}
