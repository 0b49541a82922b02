import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { errorCode } from "../../src/core/errors.js";

test('errorCode reads the code of whatever was thrown, and "" from what has none', () => {
  let thrown: unknown;
  try {
    readFileSync(new URL("./no-such-file.txt", import.meta.url));
  } catch (error) {
    thrown = error;
  }
  assert.equal(errorCode(thrown), "ENOENT", "Node's fs errors");
  assert.equal(errorCode(Object.assign(new Error("busy"), { code: "SQLITE_BUSY" })), "SQLITE_BUSY");
  assert.equal(errorCode(new Error("plain")), "");
  assert.equal(errorCode({ code: 42 }), "", "a code that is not a string");
  for (const value of [null, undefined, "ENOENT", 3]) assert.equal(errorCode(value), "", String(value));
});
