/**
 * test/ mirrors src/ (CONTRIBUTING.md, "Tests"): the tests of `src/a/b/c.ts` live in `test/a/b/`
 * (`c.test.ts` or `<topic>.test.ts`), or in `test/a/b/c/` when one module has several test files
 * with their own fixtures. This test fails when a test folder matches nothing in src/ (a test left
 * in an old place, a folder misspelt), and keeps the list of src/ folders that have no test of
 * their own honest: a folder that loses its last test, or one on the list that gains a test, fails.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SRC = join(ROOT, "src");
const TEST = join(ROOT, "test");

/**
 * Folders that hold what the tests of the folder above them use, never tests: `fixtures/` (modules
 * run as ranks or children, data files), `golden/` (expected output compared byte for byte),
 * `python/` (scripts run in the test venv to read what a backend wrote).
 */
const SUPPORT_FOLDERS = new Set(["fixtures", "golden", "python"]);

/**
 * Top-level test folders with no src/ counterpart, each cross-cutting by nature:
 * `helpers/` — shared helpers (the Python venv kit) beside `test/helpers.ts`;
 * `fixtures/` — rank modules, fake `nvidia-smi`s and the consumer project shared by many folders.
 */
const CROSS_CUTTING = new Set(["helpers", "fixtures"]);

/**
 * src/ folders with no test file in their mirrored test folder, and why. Their code is exercised
 * by tests elsewhere (through the public API); a test of their own goes in `test/<folder>/`, and
 * then the folder comes off this list.
 */
const UNTESTED: Record<string, string> = {
  "backends/wandb/spool":
    "end to end in test/backends/wandb/faults.test.ts (an outage spools; syncSpool replays it once) and exit.test.ts",
  "backends/wandb/sync":
    "end to end in test/backends/wandb/faults.test.ts (syncSpool after outages, offline mode, shared runs)",
  "backends/wandb/writer":
    "end to end in test/backends/wandb/wandb.test.ts and faults.test.ts (send, resume, retry, spool, finish)",
  "ui/web/tabs": "pure parts in test/ui/web/web-helpers.test.ts, the tabs in the browser tests of test/ui/web",
};

/** Every folder below `dir` (relative paths with "/"), not descending into `skip(name)` folders. */
function folders(dir: string, skip: (relPath: string) => boolean = () => false): string[] {
  const out: string[] = [];
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const path = join(at, entry.name);
      const rel = relative(dir, path).split(sep).join("/");
      if (skip(rel)) continue;
      out.push(rel);
      walk(path);
    }
  };
  walk(dir);
  return out.sort();
}

/** The names of the files directly in `dir` matching `pattern`. */
function filesIn(dir: string, pattern: RegExp): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((name) => pattern.test(name) && statSync(join(dir, name)).isFile());
}

const lastSegment = (rel: string): string => rel.slice(rel.lastIndexOf("/") + 1);
const isSupport = (rel: string): boolean => SUPPORT_FOLDERS.has(lastSegment(rel)) || CROSS_CUTTING.has(rel);
const TEST_FILE = /\.test\.(ts|mts|js|mjs)$/;
const SOURCE_FILE = /^(?!.*\.d\.ts$).*\.ts$/;

/** The src/ counterpart of a test folder: a src folder, or a module (`test/core/lifecycle` ↔ `src/core/lifecycle.ts`). */
function mirrors(rel: string): boolean {
  return (existsSync(join(SRC, rel)) && statSync(join(SRC, rel)).isDirectory()) || existsSync(join(SRC, `${rel}.ts`));
}

test("every test folder mirrors a src/ folder or module (or is a named support folder)", () => {
  const testFolders = folders(TEST, isSupport);
  assert.ok(testFolders.length > 10, `found only ${testFolders.length} test folders under ${TEST}`);
  const orphans = testFolders.filter((rel) => !mirrors(rel));
  assert.deepEqual(
    orphans,
    [],
    `test folders with no src/ counterpart: ${orphans.map((o) => `test/${o}`).join(", ")}. Move their tests to the folder ` +
      `mirroring the source they test (test/a/b/ for src/a/b/c.ts), or, for a cross-cutting folder, add it with the reason to ` +
      `CROSS_CUTTING in test/layout.test.ts.`,
  );
});

test("no test file hides in a support folder (fixtures, golden, python, helpers)", () => {
  const misplaced = folders(TEST)
    .filter((rel) =>
      rel.split("/").some((part, i, all) => SUPPORT_FOLDERS.has(part) || (i === 0 && CROSS_CUTTING.has(all[0] ?? ""))),
    )
    .flatMap((rel) => filesIn(join(TEST, rel), TEST_FILE).map((name) => `test/${rel}/${name}`));
  assert.deepEqual(
    misplaced,
    [],
    "the test runner runs every *.test.ts: a test file belongs in the folder mirroring its source",
  );
});

test("the src/ folders without a test of their own are exactly the listed ones", (t) => {
  const sourceFolders = folders(SRC).filter((rel) => filesIn(join(SRC, rel), SOURCE_FILE).length > 0);
  /** A test of the folder itself: a test file in its mirror, or in the mirror of one of its modules. */
  const hasOwnTest = (rel: string): boolean =>
    filesIn(join(TEST, rel), TEST_FILE).length > 0 ||
    filesIn(join(SRC, rel), SOURCE_FILE).some(
      (module) => filesIn(join(TEST, rel, module.replace(/\.ts$/, "")), TEST_FILE).length > 0,
    );
  const untested = sourceFolders.filter((rel) => !hasOwnTest(rel));
  t.diagnostic(`src/ folders with no test of their own: ${untested.map((u) => `src/${u}`).join(", ") || "none"}`);
  const unlisted = untested.filter((rel) => !(rel in UNTESTED));
  assert.deepEqual(
    unlisted,
    [],
    `src/ folders with no test in their mirrored test/ folder: add one there (or, with the reason, to UNTESTED in test/layout.test.ts)`,
  );
  const stale = Object.keys(UNTESTED).filter((rel) => !untested.includes(rel));
  assert.deepEqual(
    stale,
    [],
    "these folders have tests now (or no longer exist): remove them from UNTESTED in test/layout.test.ts",
  );
});
