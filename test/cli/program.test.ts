// Every option a subcommand's `--help` lists works where the help shows it: after that
// subcommand's name, never taken by a parent command first (`rankscope server token create --db`
// was refused "needs its database": `server`'s own `--db` took it). The program tree is walked
// from commander's own objects, so a command or option added later is covered without a list here.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isDeepStrictEqual } from "node:util";
import { CommanderError, type Command, type Option } from "commander";
import { rankscopeProgram } from "../../src/cli/program.js";
import { builtCli, runNode } from "../helpers.js";

/** Every command under `root` with its path of names (`["server", "token", "create"]`). */
function commandsOf(root: Command, path: string[] = []): { command: Command; path: string[] }[] {
  return root.commands.flatMap((command) => {
    const here = [...path, command.name()];
    return [{ command, path: here }, ...commandsOf(command, here)];
  });
}

/** The options a command's `--help` prints, `--help` and `--version` left out. */
function helpOptions(command: Command): Option[] {
  return command
    .createHelp()
    .visibleOptions(command)
    .filter((o) => o.long !== "--help" && o.long !== "--version");
}

/** The words that give `option` a value on the command line, and the value the action should see. */
function given(option: Option): { words: string[]; expected: unknown } {
  const flag = option.long ?? option.short ?? option.flags;
  if (option.negate) return { words: [flag], expected: false };
  if (!option.required && !option.optional) return { words: [flag], expected: true };
  const value = option.argChoices?.[0] ?? `given-${option.attributeName()}`;
  return { words: [flag, value], expected: option.variadic ? [value] : value };
}

/** What a stubbed action saw: the command it ran for and that command's options. */
interface Ran {
  command: Command;
  options: Record<string, unknown>;
}

/** A fresh program whose commands run nothing: each action records what it was given, output is kept. */
function stubbedProgram(): { program: Command; ran: Ran[]; output: string[] } {
  const program = rankscopeProgram();
  const ran: Ran[] = [];
  const output: string[] = [];
  for (const { command } of [{ command: program }, ...commandsOf(program)]) {
    command.exitOverride();
    command.configureOutput({ writeOut: (s) => void output.push(s), writeErr: (s) => void output.push(s) });
    if (command.commands.length === 0 || helpOptions(command).length > 0)
      command.action((...args: unknown[]) => {
        const self = args.at(-1);
        assert.ok(self !== null && typeof self === "object" && "opts" in self, "commander passes the command last");
        const that = commandsOf(program).find((c) => c.command === self)?.command;
        assert.ok(that !== undefined, "the command is in the program's tree");
        ran.push({ command: that, options: that.opts() });
      });
  }
  return { program, ran, output };
}

/** Positional arguments a command needs (one word each), and its mandatory options filled in. */
function needed(command: Command, except: Option): string[] {
  const options = command.options.filter((o) => o.mandatory && o !== except).flatMap((o) => given(o).words);
  const args = command.registeredArguments.filter((a) => a.required).map((a) => `arg-${a.name()}`);
  return [...options, ...args];
}

describe("rankscope's command line", () => {
  const cases = commandsOf(rankscopeProgram()).flatMap(({ command, path }) =>
    helpOptions(command).map((option) => ({ path, flags: option.flags, long: option.long })),
  );

  it("walks every subcommand and finds the options their help prints", () => {
    const paths = new Set(cases.map((c) => c.path.join(" ")));
    for (const path of ["server", "server token create", "server token list", "sync", "ui", "export"])
      assert.ok(paths.has(path), `${path} has options: ${[...paths].join(", ")}`);
    assert.ok(cases.length >= 30, `${cases.length} options found`);
  });

  it("gives every option a subcommand's help lists to that subcommand, where the help shows it", async () => {
    const failures: string[] = [];
    for (const { path, flags } of cases) {
      const { program, ran, output } = stubbedProgram();
      const command = commandsOf(program).find((c) => c.path.join(" ") === path.join(" "))!.command;
      const option = command.options.find((o) => o.flags === flags)!;
      const help = command.helpInformation();
      assert.ok(help.includes(flags), `rankscope ${path.join(" ")} --help prints ${flags}`);
      const { words, expected } = given(option);
      const argv = [...path, ...words, ...needed(command, option)];
      const line = `rankscope ${argv.join(" ")}`;
      try {
        await program.parseAsync(argv, { from: "user" });
      } catch (error) {
        failures.push(`${line}: ${error instanceof CommanderError ? error.message : String(error)} ${output.join("")}`);
        continue;
      }
      const last = ran.at(-1);
      if (ran.length !== 1 || last?.command !== command) {
        failures.push(`${line}: ran ${ran.map((r) => r.command.name()).join(", ") || "nothing"}`);
        continue;
      }
      const name = option.attributeName();
      // A repeatable option (`report --combine a --combine b`) collects its values in a list.
      const saw = last.options[name];
      const took = isDeepStrictEqual(saw, expected) || isDeepStrictEqual(saw, [expected]);
      if (!took || command.getOptionValueSource(name) !== "cli")
        failures.push(`${line}: ${path.join(" ")} saw ${name} = ${JSON.stringify(last.options[name])}`);
    }
    assert.deepEqual(failures, [], `of ${cases.length} options`);
  });

  it("refuses a parent's option given before its subcommand, saying where it goes", async () => {
    const { program, ran, output } = stubbedProgram();
    await assert.rejects(
      program.parseAsync(["server", "--db", "postgres://u@h/db", "token", "create", "--project", "p"], {
        from: "user",
      }),
      (error: unknown) => error instanceof CommanderError && error.code === "rankscope.optionBeforeSubcommand",
    );
    assert.equal(ran.length, 0, "nothing ran");
    assert.match(
      output.join(""),
      /--db before "token" is an option of "rankscope server" itself; give the options of "rankscope server token" after it/,
    );
  });

  it("the built CLI: server token create --db URL uses that database", async () => {
    const r = await runNode(
      [builtCli(), "server", "token", "create", "--project", "p", "--db", "postgres://nobody@127.0.0.1:1/none"],
      {},
      { raw: true, deadlineMs: 60_000 },
    );
    assert.equal(r.code, 1, r.stderr);
    assert.doesNotMatch(r.stderr, /needs its database/);
    assert.match(r.stderr, /ECONNREFUSED|connect/i, "it tried the database given");
  });
});
