/**
 * No file in src/ is over 400 lines (docs/DESIGN.md, "Layout") unless DESIGN.md's list "Files over
 * 400 lines" names it with its reason: a file is one idea a reader can hold, and a longer one is
 * split by concept (not cut at line 400), or kept whole with the reason written down. Lines are
 * counted as `wc -l` counts them. The list is kept honest both ways: a file over the limit and not
 * listed fails, and so does a listed file that no longer exists or is no longer over the limit.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SRC = join(ROOT, "src");
const DESIGN = join(ROOT, "docs", "DESIGN.md");
const MAX_LINES = 400;
const HEADING = "### Files over 400 lines";

/** Every TypeScript source below `dir`, as a path relative to the repository ("src/…", "/"-separated). */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")
      ? [relative(ROOT, path).split(sep).join("/")]
      : [];
  });
}

/** The number of lines of a file, as `wc -l` counts them (its newlines). */
const lineCount = (path: string): number => readFileSync(join(ROOT, path), "utf8").split("\n").length - 1;

/**
 * The files DESIGN.md's "Files over 400 lines" list names, each with its reason: the list items
 * (`` - `src/a/b.ts`: reason ``) between that heading and the next heading.
 */
function listedFiles(markdown: string): Map<string, string> {
  const start = markdown.indexOf(`\n${HEADING}\n`);
  if (start < 0) return new Map();
  const rest = markdown.slice(start + HEADING.length + 2);
  const end = rest.search(/^#/m);
  const section = end < 0 ? rest : rest.slice(0, end);
  const listed = new Map<string, string>();
  for (const match of section.matchAll(/^- `(src\/[^`]+\.ts)`:?\s*(.*)$/gm)) {
    listed.set(match[1] ?? "", (match[2] ?? "").trim());
  }
  return listed;
}

const design = readFileSync(DESIGN, "utf8");
const listed = listedFiles(design);
const measured = sources(SRC).map((path) => ({ path, lines: lineCount(path) }));

test(`no file in src/ is over ${MAX_LINES} lines unless DESIGN.md says why`, () => {
  assert.ok(measured.length > 200, `found only ${measured.length} files under ${SRC}`);
  assert.ok(design.includes(`\n${HEADING}\n`), `docs/DESIGN.md has the section "${HEADING}"`);
  const unlisted = measured
    .filter((file) => file.lines > MAX_LINES && !listed.has(file.path))
    .sort((a, b) => b.lines - a.lines)
    .map((file) => `${file.path} (${file.lines} lines)`);
  assert.deepEqual(
    unlisted,
    [],
    `split these by concept (one idea a reader can hold per file), or name each with its reason in ` +
      `docs/DESIGN.md's "${HEADING}":\n${unlisted.join("\n")}`,
  );
});

test("every file DESIGN.md lists as over 400 lines is, and has a reason", () => {
  const lines = new Map(measured.map((file) => [file.path, file.lines]));
  const stale = [...listed.keys()].filter((path) => (lines.get(path) ?? 0) <= MAX_LINES);
  assert.deepEqual(
    stale,
    [],
    `these are gone or no longer over ${MAX_LINES} lines: remove them from docs/DESIGN.md's "${HEADING}"`,
  );
  const unexplained = [...listed].filter(([, reason]) => reason.length < 10).map(([path]) => path);
  assert.deepEqual(unexplained, [], `give each its reason in one line after the path`);
});

test("the list is read from DESIGN.md as written: paths in backticks, a reason after each", () => {
  const sample = [
    "intro",
    HEADING,
    "Some words.",
    "- `src/a/b.ts`: one state machine whose parts share private state",
    "- `src/c.ts`: to be split (issue 35)",
    "- not a path",
    "",
    "## Next",
    "- `src/d.ts`: after the section, not read",
  ].join("\n");
  assert.deepEqual(
    [...listedFiles(sample)],
    [
      ["src/a/b.ts", "one state machine whose parts share private state"],
      ["src/c.ts", "to be split (issue 35)"],
    ],
  );
});
