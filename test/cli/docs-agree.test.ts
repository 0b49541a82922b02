// The docs and the CLI agree: every command and flag `rankscope --help` (and each command's
// `--help`) lists is in the README's command table, every one the table lists exists, and every
// `rankscope …` command line quoted anywhere in the README or docs/*.md names a real command with
// flags that command has.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { EXPORT_FORMATS } from "../../src/cli/commands/export.js";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLI = join(REPO, "dist", "cli", "main.js");

function help(...command: string[]): string {
  // scripts/test.sh builds first; a direct run of this file builds when dist is missing.
  if (!existsSync(CLI)) spawnSync("npm", ["run", "build", "--silent"], { cwd: REPO, stdio: "inherit" });
  const r = spawnSync(process.execPath, [CLI, ...command, "--help"], { cwd: REPO, encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, `rankscope ${command.join(" ")} --help failed: ${r.stderr}`);
  return r.stdout;
}

/** The lines of one section (`Commands:`, `Options:`) of commander's help. */
function section(text: string, title: string): string[] {
  const lines = text.split("\n");
  const start = lines.indexOf(`${title}:`);
  if (start < 0) return [];
  const out: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === "") break;
    out.push(line);
  }
  return out;
}

/** Names in a `Commands:` section (the first word of each entry), `help` left out. */
function commandsOf(text: string): string[] {
  return section(text, "Commands")
    .filter((line) => /^ {2}\S/.test(line))
    .map((line) => line.trim().split(/\s+/)[0] ?? "")
    .filter((name) => name !== "help");
}

/** Flags in an `Options:` section (`-o`, `--out`, `--no-progress`…), `--help`/`-h` left out. */
function flagsOf(text: string): Set<string> {
  const flags = new Set<string>();
  for (const line of section(text, "Options")) {
    // `  -o, --out <file>  output file …`: the flags are before the description's two spaces.
    if (!/^ {2}-/.test(line)) continue;
    const spec = line.trim().split(/\s{2,}/)[0] ?? "";
    for (const token of spec.split(/,?\s+/))
      if (token.startsWith("-") && token !== "-h" && token !== "--help") flags.add(token);
  }
  return flags;
}

/**
 * Every runnable command of the CLI (`ui`, `traces merge`, `server`, `server token create`…) with
 * its flags, from `--help`: a command with subcommands counts too when it has flags of its own.
 */
function cliCommands(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const walk = (path: string[]): void => {
    const text = help(...path);
    const subcommands = commandsOf(text);
    const flags = flagsOf(text);
    if (path.length > 0 && (subcommands.length === 0 || flags.size > 0)) out.set(path.join(" "), flags);
    for (const sub of subcommands) walk([...path, sub]);
  };
  walk([]);
  return out;
}

const FLAG = /(?<![\w-])(--?[a-zA-Z][\w-]*)/g;

/** `rankscope …` command lines quoted in a markdown text (inline code and code blocks), with where they are. */
function quotedCommandLines(file: string, text: string): { where: string; line: string }[] {
  const out: { where: string; line: string }[] = [];
  const fences = text.split("```");
  fences.forEach((chunk, i) => {
    const candidates = i % 2 === 1 ? chunk.split("\n") : [...chunk.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] ?? "");
    for (const candidate of candidates) {
      // A command line starts with it (after a prompt or npx); HELP texts (`rankscope key "…"`) are not commands.
      const match = /^(?:\$ |npx |[A-Z_]+=\S* )*(rankscope [a-z].*)$/.exec(candidate.trim());
      const line = match?.[1]?.split(" #")[0]?.trim();
      if (line === undefined || line.startsWith('rankscope key "')) continue;
      out.push({ where: `${file}: ${candidate.trim()}`, line });
    }
  });
  return out;
}

/** The command a quoted line names (`server token create`, `traces merge`, `ui`…: the longest), or undefined when it names none. */
function commandOf(line: string, commands: Map<string, Set<string>>): string | undefined {
  const words = line.split(/\s+/).slice(1, 4);
  for (let n = words.length; n > 0; n--) {
    const name = words.slice(0, n).join(" ");
    if (commands.has(name)) return name;
  }
  return undefined;
}

function markdownFiles(): { file: string; text: string }[] {
  const docs = readdirSync(join(REPO, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => join("docs", f));
  return ["README.md", ...docs].map((file) => ({ file, text: readFileSync(join(REPO, file), "utf8") }));
}

test("the README's command table lists every command and flag of the CLI, and nothing else", () => {
  const commands = cliCommands();
  assert.ok(
    commands.has("export") && commands.has("traces merge") && commands.has("wandb sync"),
    `the CLI's --help lists ${[...commands.keys()].join(", ")}`,
  );
  const readme = readFileSync(join(REPO, "README.md"), "utf8");
  const rows = readme.split("\n").filter((line) => line.startsWith("| `rankscope "));
  const table = new Map<string, Set<string>>();
  for (const row of rows) {
    const cell = /^\| `([^`]+)`/.exec(row)?.[1] ?? "";
    const name = commandOf(cell, commands);
    assert.ok(
      name !== undefined,
      `README row "${cell}" names no command of the CLI (it has: ${[...commands.keys()].join(", ")})`,
    );
    table.set(name, new Set([...cell.matchAll(FLAG)].map((m) => m[1] ?? "")));
  }
  assert.deepEqual([...table.keys()].sort(), [...commands.keys()].sort(), "the README table has one row per command");
  for (const [name, flags] of commands) {
    assert.deepEqual(
      [...(table.get(name) ?? [])].sort(),
      [...flags].sort(),
      `README row of "rankscope ${name}" against its --help`,
    );
  }
});

test("every rankscope command line quoted in the README and docs/ names a real command with its real flags", () => {
  const commands = cliCommands();
  const quoted = markdownFiles().flatMap(({ file, text }) => quotedCommandLines(file, text));
  assert.ok(quoted.length > 10, `found ${quoted.length} quoted command lines`);
  const problems: string[] = [];
  for (const { where, line } of quoted) {
    const name = commandOf(line, commands);
    if (name === undefined) {
      problems.push(`${where}: no such command (the CLI has ${[...commands.keys()].join(", ")})`);
      continue;
    }
    const known = commands.get(name) ?? new Set<string>();
    for (const [, flag] of line.matchAll(FLAG)) {
      if (flag !== undefined && !known.has(flag))
        problems.push(`${where}: "rankscope ${name}" has no ${flag} (it has ${[...known].join(", ")})`);
    }
  }
  assert.deepEqual(problems, []);
});

test("export's formats are the ones documented, and the docs say why there is no tensorboard format", () => {
  assert.match(help("export"), new RegExp(`--format <format>\\s+output format: ${EXPORT_FORMATS.join(" or ")}`));
  assert.ok(!EXPORT_FORMATS.map(String).includes("tensorboard"));
  const readme = readFileSync(join(REPO, "README.md"), "utf8");
  assert.ok(
    readme.includes(`\`rankscope export RUN --format ${EXPORT_FORMATS.join("\\|")} `),
    "the README's export row lists the formats the CLI takes",
  );
  for (const file of ["README.md", join("docs", "DESIGN.md"), join("docs", "tensorboard.md")]) {
    const text = readFileSync(join(REPO, file), "utf8").replace(/\s+/g, " ");
    assert.match(text, /tensorboard` backend/, `${file} says TensorBoard's files come from the tensorboard backend`);
    assert.ok(
      /no (`rankscope export )?`?--format tensorboard|export --format csv\|jsonl` \(for TensorBoard use the `tensorboard` backend/i.test(
        text,
      ),
      `${file} says export has no tensorboard format`,
    );
  }
});
