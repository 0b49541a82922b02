/**
 * The `rankscope` command tree: each subcommand lives in `commands/` and registers itself here.
 *
 * Options are positional (commander's `enablePositionalOptions`): an option belongs to the
 * command it follows, so `rankscope server token create --db URL` gives `--db` to `token create`,
 * as its `--help` shows, and `server` never takes it first. An option of a command with
 * subcommands (`rankscope server --db URL`) given before one of them is refused with where it
 * goes, rather than taken by the parent and ignored by the subcommand that runs.
 */
import { Command, type Option } from "commander";
import { rankscopeVersion } from "../run/run-files.js";
import { registerDemoCommand } from "./commands/demo.js";
import { registerWandbCommand } from "./commands/wandb.js";
import { registerTracesCommand } from "./commands/traces.js";
import { registerExportCommand } from "./commands/export.js";
import { registerImportCommand } from "./commands/import.js";
import { registerReportCommand } from "./commands/report.js";
import { registerRunsCommand } from "./commands/runs.js";
import { registerTailCommand } from "./commands/tail.js";
import { registerUiCommand } from "./commands/ui.js";
import { registerServerCommand } from "./commands/server.js";
import { registerSyncCommand } from "./commands/sync.js";

/** The command's path from the program, `rankscope server token`. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c !== null; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/** The flag an option is written with: `--db`. */
function flagOf(option: Option): string {
  return option.long ?? option.short ?? option.flags;
}

/**
 * Refuse the options of `command` given on the command line before one of its subcommands: they
 * are the parent's own (`rankscope server --db` serves), and the subcommand would run without them.
 */
function refuseOptionsBeforeSubcommands(command: Command): void {
  for (const sub of command.commands) refuseOptionsBeforeSubcommands(sub);
  const own = command.options.filter((o) => o.long !== "--version");
  if (command.commands.length === 0 || own.length === 0) return;
  command.hook("preSubcommand", (parent, sub) => {
    const given = own.filter((o) => parent.getOptionValueSource(o.attributeName()) === "cli");
    if (given.length === 0) return;
    const flags = given.map(flagOf).join(", ");
    parent.error(
      `${commandPath(parent)}: ${flags} before "${sub.name()}" ${given.length === 1 ? "is an option" : "are options"} of "${commandPath(parent)}" itself; give the options of "${commandPath(sub)}" after it (see ${commandPath(sub)} --help)`,
      { code: "rankscope.optionBeforeSubcommand" },
    );
  });
}

/** The `rankscope` program, every subcommand registered; `main.ts` parses the command line with it. */
export function rankscopeProgram(): Command {
  const program = new Command()
    .name("rankscope")
    .description("Observability for distributed training and inference jobs")
    .version(rankscopeVersion())
    .enablePositionalOptions()
    .showHelpAfterError("(run rankscope --help for the commands)")
    .exitOverride();
  registerDemoCommand(program);
  registerWandbCommand(program);
  registerTracesCommand(program);
  registerRunsCommand(program);
  registerTailCommand(program);
  registerExportCommand(program);
  registerImportCommand(program);
  registerReportCommand(program);
  registerUiCommand(program);
  registerServerCommand(program);
  registerSyncCommand(program);
  refuseOptionsBeforeSubcommands(program);
  return program;
}
