/** W&B's offline run format, in small pieces: the transaction log's framing and the attempts' directories. */
import assert from "node:assert/strict";
import { closeSync, fstatSync, openSync, readdirSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  ATTEMPT_FILE,
  attemptOf,
  frameTransactionLog,
  makeAttemptDir,
  offlineRunDirs,
} from "../../../../src/backends/wandb/offline/offline-run.js";
import { tempDir } from "../../../helpers.js";
import { decodeTransactionLog } from "../wandb-helpers.js";

describe("wandb transaction log framing", () => {
  it("frames records of every size around block ends: full, first/middle/last chunks, zero padding when under 7 bytes are left", () => {
    // For each gap of 0..8 bytes: a record ending exactly `gap` bytes before its block's end (sized
    // from where the framed prefix ends), then an empty and a small record; then records spanning blocks.
    const records: Buffer[] = [];
    const add = (n: number): void => void records.push(Buffer.alloc(n, records.length % 251));
    for (let gap = 0; gap <= 8; gap++) {
      const at = frameTransactionLog(records).length % 32768;
      add((32768 - at - 7 - gap + 32768) % 32768);
      add(0);
      add(5);
    }
    add(70_000);
    add(32768 - 7);
    add(1);
    const sizes = records.map((r) => r.length);
    const framed = frameTransactionLog(records);
    const decoded = decodeTransactionLog(framed);
    assert.equal(decoded.records.length, records.length);
    decoded.records.forEach((r, i) =>
      assert.ok(r.equals(records[i] as Buffer), `record ${i} (${sizes[i]} bytes) comes back`),
    );
    assert.ok(decoded.spanned >= 2, "records span blocks");
    assert.ok(decoded.padded >= 1, "a block end with under 7 bytes left is padded");
  });
});

describe("wandb offline run directories", () => {
  it("replaces an attempt's note whole (src/io's atomic write): a reader that opened the old note reads it in full, and no temporary file is left", () => {
    const wandbDir = tempDir("offline-note-");
    const dir = makeAttemptDir(wandbDir, "run1", Date.UTC(2026, 0, 1), 0);
    const note = join(dir, ATTEMPT_FILE);
    const before = readFileSync(note, "utf8");
    const fd = openSync(note, "r");
    try {
      // The same attempt again (a restarted writer): the same directory, its note written anew —
      // into a new file renamed over the old, never by truncating the file a reader has open.
      assert.equal(makeAttemptDir(wandbDir, "run1", Date.UTC(2026, 0, 1), 0), dir);
      assert.notEqual(statSync(note).ino, fstatSync(fd).ino, "the note was rewritten in place, not replaced");
      const size = fstatSync(fd).size;
      const buffer = Buffer.alloc(size);
      readSync(fd, buffer, 0, size, 0);
      assert.equal(
        buffer.toString("utf8"),
        before,
        "the old note, read through a descriptor opened before the rewrite, is whole",
      );
    } finally {
      closeSync(fd);
    }
    assert.equal(attemptOf(dir), 0);
    assert.deepEqual(readdirSync(dir), [ATTEMPT_FILE]);
    // Another attempt in the same second takes the next second's directory; the first keeps its note.
    const second = makeAttemptDir(wandbDir, "run1", Date.UTC(2026, 0, 1), 40);
    assert.notEqual(second, dir);
    assert.equal(attemptOf(second), 40);
    assert.equal(attemptOf(dir), 0);
    assert.deepEqual(offlineRunDirs(wandbDir, "run1"), [dir, second]);
  });
});
