/**
 * The store's file format as a golden file: any change to the tables a reader depends on shows as
 * a diff of `golden/schema.sql`. Regenerate with `RANKSCOPE_UPDATE_GOLDEN=1`.
 */
import assert from "node:assert/strict";
import { sqliteDriver } from "../../src/store/sqlite.js";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { SCHEMA_VERSION } from "../../src/store/schema.js";
import { closeStores, rankTiming, ranks } from "../../src/store/reader.js";
import { StoreWriter } from "../../src/store/writer.js";
import { tempDir } from "../helpers.js";

/** better-sqlite3's `Database` class, of the build this Node.js runs. */
const Database = sqliteDriver();

const GOLDEN = fileURLToPath(new URL("./golden/schema.sql", import.meta.url));

test("metrics.db has the documented tables, indexes and schema version", () => {
  const dir = tempDir();
  StoreWriter.open({ runDir: dir, role: "controller", rank: -1, rankName: "g", experiment: "e", trial: "t" }).finish();
  const db = new Database(join(dir, "metrics.db"), { readonly: true });
  const rows = db.prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name").all() as {
    sql: string;
  }[];
  assert.equal(db.pragma("user_version", { simple: true }), SCHEMA_VERSION);
  assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
  db.close();
  const text = `-- metrics.db, schema version ${SCHEMA_VERSION}\n${rows.map((r) => `${r.sql};`).join("\n")}\n`;
  if (process.env["RANKSCOPE_UPDATE_GOLDEN"] === "1") writeFileSync(GOLDEN, text);
  assert.equal(text, readFileSync(GOLDEN, "utf8"));
});

test("a version-1 store (before lines were named) is read as it is and migrated when opened for writing", () => {
  const dir = tempDir();
  // A file as version 1 wrote it: its schema (golden/schema-v1.sql) and a global and a rank line.
  const v1 = new Database(join(dir, "metrics.db"));
  v1.exec(
    readFileSync(fileURLToPath(new URL("./golden/schema-v1.sql", import.meta.url)), "utf8").replace(/^--.*$/gm, ""),
  );
  v1.pragma("user_version = 1");
  v1.exec(
    "INSERT INTO run (id, experiment, trial, status, started_at) VALUES (1, 'e', 't', 'finished', 1); INSERT INTO ranks VALUES (-1, 'global'), (0, 'Trainer_0_r0')",
  );
  v1.close();
  assert.deepEqual(
    ranks(dir).map((r) => [r.rank, r.rankName, r.role, r.thread, r.host, r.label]),
    [
      [-1, "global", "global", 0, null, "global"],
      [0, "Trainer_0_r0", "rank", 0, null, "rank 0"],
    ],
    "read as version 1: role and thread from the line",
  );
  assert.deepEqual(rankTiming(dir).steps, [], "read as version 1: no per-rank timings (no rank_timing table)");
  closeStores();
  StoreWriter.open({
    runDir: dir,
    role: "rank",
    rank: 1,
    rankName: "Trainer_0_r1",
    host: "h1",
    experiment: "e",
    trial: "t",
  }).finish();
  const db = new Database(join(dir, "metrics.db"), { readonly: true });
  assert.equal(db.pragma("user_version", { simple: true }), SCHEMA_VERSION);
  const tables = db
    .prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('rank_timing', 'rank_lists', 'lost_ranks') ORDER BY name",
    )
    .all();
  assert.deepEqual(
    tables,
    [{ name: "lost_ranks" }, { name: "rank_lists" }, { name: "rank_timing" }],
    "migrated: version 2's tables exist",
  );
  db.close();
  assert.deepEqual(
    ranks(dir).map((r) => [r.rank, r.rankName, r.role, r.host]),
    [
      [-1, "global", "global", null],
      [0, "Trainer_0_r0", "rank", null],
      [1, "Trainer_0_r1", "rank", "h1"],
    ],
  );
  closeStores();
});
