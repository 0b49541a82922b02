/**
 * The store's file format as a golden file: any change to the tables a reader depends on shows as
 * a diff of `golden/schema.sql`. Regenerate with `RANKSCOPE_UPDATE_GOLDEN=1`.
 */
import assert from "node:assert/strict";
import { Database } from "../../../src/backends/store/sqlite.js";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { SCHEMA_VERSION } from "../../../src/backends/store/schema.js";
import { StoreWriter } from "../../../src/backends/store/writer.js";
import { tempDir } from "../../helpers.js";

const GOLDEN = fileURLToPath(new URL("./golden/schema.sql", import.meta.url));

test("metrics.db has the documented tables, indexes and schema version", () => {
  const dir = tempDir();
  StoreWriter.open({ runDir: dir, role: "controller", rank: -1, rankName: "g", experiment: "e", trial: "t" }).finish();
  const db = new Database(join(dir, "metrics.db"), { readonly: true });
  const rows = db.prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name").all() as { sql: string }[];
  assert.equal(db.pragma("user_version", { simple: true }), SCHEMA_VERSION);
  assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
  db.close();
  const text = `-- metrics.db, schema version ${SCHEMA_VERSION}\n${rows.map((r) => `${r.sql};`).join("\n")}\n`;
  if (process.env["RANKSCOPE_UPDATE_GOLDEN"] === "1") writeFileSync(GOLDEN, text);
  assert.equal(text, readFileSync(GOLDEN, "utf8"));
});
