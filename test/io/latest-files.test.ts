/** LatestFileWrites: the latest content of each path reaches the disk, once; failures are reported, never thrown. */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { LatestFileWrites } from "../../src/io/latest-files.js";
import { tempDir } from "../helpers.js";

test("several writes to one path before the first ran: the file ends with the last content", async () => {
  const dir = tempDir();
  const errors: string[] = [];
  const files = new LatestFileWrites((path) => errors.push(path));
  const path = join(dir, "table.json");
  for (let i = 0; i < 50; i++) files.write(path, `v${i}`);
  files.write(join(dir, "other.txt"), "other");
  await files.drain();
  assert.equal(readFileSync(path, "utf8"), "v49");
  assert.equal(readFileSync(join(dir, "other.txt"), "utf8"), "other");
  assert.deepEqual(errors, []);
});

test("writeSync at exit writes what is still pending; a path that cannot be written is reported, the others written", async () => {
  const dir = tempDir();
  const errors: string[] = [];
  const files = new LatestFileWrites((path) => errors.push(path));
  // A path under a regular file: no directory can be made there (root or not).
  writeFileSync(join(dir, "plain"), "");
  const bad = join(dir, "plain", "x.txt");
  files.write(join(dir, "a.txt"), "a");
  files.write(bad, "x");
  files.writeSync();
  assert.equal(readFileSync(join(dir, "a.txt"), "utf8"), "a");
  assert.equal(existsSync(bad), false);
  assert.deepEqual(errors, [bad]);
  // The background writes find nothing left to do.
  await files.drain();
  assert.deepEqual(errors, [bad]);
});
