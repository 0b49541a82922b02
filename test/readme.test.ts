// Every README example runs as written and prints exactly the output the README shows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { TS_LOADER } from "./helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const readme = readFileSync(`${root}README.md`, "utf8");
const EXAMPLE = /<!-- example: (\S+) -->\n```ts\n([\s\S]*?)```\n\nOutput:\n\n```text\n([\s\S]*?)```/g;
const examples = [...readme.matchAll(EXAMPLE)].map((m) => ({
  file: m[1] as string,
  code: m[2] as string,
  output: m[3] as string,
}));

test("the README has examples with their output", () => {
  assert.ok(examples.length >= 2, `found ${examples.length}`);
});

for (const example of examples) {
  test(`README example ${example.file} is the file, runs, and prints what the README shows`, () => {
    assert.equal(
      readFileSync(`${root}${example.file}`, "utf8"),
      example.code,
      "the README shows the example file as it is",
    );
    // Examples import "rankscope" itself, which resolves to the built package (npm test builds first).
    const run = spawnSync(process.execPath, ["--import", TS_LOADER, example.file], {
      cwd: root,
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout, example.output);
  });
}

// Files an example needs (a rank's module) are shown too, as they are.
const FILE = /<!-- file: (\S+) -->\n```ts\n([\s\S]*?)```/g;
const files = [...readme.matchAll(FILE)].map((m) => ({ file: m[1] as string, code: m[2] as string }));

test("the README shows every file its examples need, as it is", () => {
  assert.ok(files.length >= 1, `found ${files.length}`);
  for (const { file, code } of files)
    assert.equal(readFileSync(`${root}${file}`, "utf8"), code, `the README shows ${file} as it is`);
});

test("the reductions table writes each reduction in full, as code calls it (Reduce.MEAN, Reduce.quantiles([...]))", async () => {
  const { Reduce } = await import("../src/index.js");
  const table = /\n(\| reduction \|[\s\S]*?)\n\n/.exec(readme);
  assert.ok(table !== null, "the README has a reductions table headed `| reduction |`");
  const rows = (table[1] ?? "").split("\n").slice(2);
  assert.ok(rows.length >= 5, `found ${rows.length} rows`);
  const members: string[] = Object.keys(Reduce);
  for (const row of rows) {
    const first = row.split("|")[1] ?? "";
    const names = [...first.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? "");
    assert.ok(names.length >= 1, `a row names no reduction: ${row}`);
    for (const name of names) {
      const member = /^Reduce\.(\w+)/.exec(name)?.[1];
      assert.ok(member !== undefined && members.includes(member), `${name} is not a member of Reduce`);
    }
  }
});
