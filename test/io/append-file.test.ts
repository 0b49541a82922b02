/** AppendFile's exit path, which the trace writers rely on: nothing lost, nothing written twice. */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { AppendFile } from "../../src/io/append-file.js";
import { tempDir } from "../helpers.js";

describe("AppendFile with bytes", () => {
  it("writes strings and encoded bytes in order, async and at exit", async () => {
    const path = join(tempDir(), "f.jsonl");
    const file = new AppendFile(path);
    file.append("a\n");
    file.append(Buffer.from("é\n"));
    file.append("c\n");
    await file.drain();
    file.append(Buffer.from("d\n"));
    file.writeQueuedSync(Buffer.from("ü\n"));
    await file.drain();
    assert.equal(readFileSync(path, "utf8"), "a\né\nc\nd\nü\n");
  });
});

describe("AppendFile.writeQueuedSync", () => {
  it("writes a batch still waiting for its directory, which the async loop then skips", async () => {
    const path = join(tempDir(), "sub", "dir", "f.jsonl");
    const file = new AppendFile(path);
    file.append("a\n");
    file.append("b\n");
    file.writeQueuedSync("c\n");
    await file.drain();
    assert.equal(readFileSync(path, "utf8"), "a\nb\nc\n");
  });

  it("writes a batch whose append was not issued yet exactly once", async () => {
    const path = join(tempDir(), "f.jsonl");
    const file = new AppendFile(path);
    file.append("first\n");
    await file.drain();
    file.append("second\n");
    file.writeQueuedSync();
    await file.drain();
    file.append("third\n");
    await file.drain();
    assert.equal(readFileSync(path, "utf8"), "first\nsecond\nthird\n");
  });

  it("writes only the missing tail of a batch whose append was issued", async () => {
    const path = join(tempDir(), "f.jsonl");
    writeFileSync(path, "");
    const file = new AppendFile(path);
    const internals = file as unknown as {
      inFlight: { text: string; issued: boolean; sizeBefore: number; taken: boolean } | null;
    };
    // As if the process were exiting while the OS had written 4 of the batch's bytes.
    internals.inFlight = { text: "12345678\n", issued: true, sizeBefore: 0, taken: false };
    writeFileSync(path, "1234");
    file.writeQueuedSync("next\n");
    assert.equal(readFileSync(path, "utf8"), "12345678\nnext\n");
  });
});
