// The store's SQL statements: every one prepares against the real schema (a SQL typo fails here,
// not in a user's run), and the statement sets are object types, so a misspelt name or a wrong
// parameter list is a compile error (the @ts-expect-error lines fail `tsc` if they ever compile).
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, it } from "node:test";
import { openForReading, openForWriting } from "../../src/store/connection.js";
import { prepareReaderStatements, type ReaderStatements } from "../../src/store/reader-statements.js";
import { prepareWriterStatements, type WriterStatements } from "../../src/store/writer-statements.js";
import { tempDir } from "../helpers.js";

const dir = tempDir("rankscope-statements-");
after(() => rmSync(dir, { recursive: true, force: true }));

/** Compile-time only: never called. */
export function typeChecks(sql: WriterStatements, read: ReaderStatements): void {
  // @ts-expect-error -- a misspelt statement name is a compile error, not a silent no-op
  sql.keyInsrt.run("loss", "scalar", null);
  // @ts-expect-error -- the parameters are typed: keyInsert takes (key, kind, reduce)
  sql.keyInsert.run("loss", "scalar");
  // @ts-expect-error -- a key kind outside KeyKind
  sql.keySelect.get("loss", "scalr");
  // @ts-expect-error -- rows are typed: keySelect selects id and reduce only
  void sql.keySelect.get("loss", "scalar")?.kind;
  // @ts-expect-error -- the reader's set too
  read.serie.all(1, -1, 0, 10);
}

describe("store statements", () => {
  it("every writer and reader statement prepares against the schema and runs", () => {
    const db = openForWriting(dir);
    try {
      const sql = prepareWriterStatements(db);
      assert.ok(Object.keys(sql).length >= 30, `the writer has its statements: ${Object.keys(sql).join(", ")}`);
      sql.keyInsert.run("loss", "scalar", "mean");
      const key = sql.keySelect.get("loss", "scalar");
      assert.deepEqual(key, { id: 1, reduce: "mean" });
      sql.seriesInsert.run(1, -1);
      sql.pointUpsert.run(1, -1, 5, 1000, 0.5);
      assert.deepEqual(sql.rowCount.get(1, -1), { n: 1 });
      assert.deepEqual(sql.pointsOfSeries.all(1, -1), [{ step: 5, wall: 1000, value: 0.5 }]);
    } finally {
      db.close();
    }
    const reader = openForReading(dir);
    try {
      const read = prepareReaderStatements(reader);
      assert.deepEqual(read.keys.all(), [{ key: "loss", kind: "scalar", reduce: "mean", ranks: "-1" }]);
      // Raw statements give tuples, plucked ones the column.
      assert.deepEqual(read.points.all(1, -1, -Infinity, Infinity), [[5, 1000, 0.5]]);
      assert.deepEqual(read.samples.all({ kind: "sample", after: -1, rank: null, limit: 10 }), []);
      assert.deepEqual(read.histogramsOfKey.all({ kind: "histogram", after: -1, rank: 0, limit: 10, key: "h" }), []);
    } finally {
      reader.close();
    }
  });
});
