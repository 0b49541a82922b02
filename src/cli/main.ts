#!/usr/bin/env node
/**
 * The `rankscope` command. Each subcommand lives in `commands/` and registers itself here.
 */
import { Command, CommanderError } from "commander";
import { rankscopeVersion } from "../run/run-files.js";
import { registerDemoCommand } from "./commands/demo.js";
import { registerWandbCommand } from "./commands/wandb.js";
import { registerTracesCommand } from "./commands/traces.js";
import { registerExportCommand } from "./commands/export.js";
import { registerImportCommand } from "./commands/import.js";
import { registerRunsCommand } from "./commands/runs.js";
import { registerTailCommand } from "./commands/tail.js";
import { registerUiCommand } from "./commands/ui.js";
import { registerServerCommand } from "./commands/server.js";
import { registerSyncCommand } from "./commands/sync.js";
import { describeError } from "../core/diagnostics.js";

const program = new Command()
  .name("rankscope")
  .description("Observability for distributed training and inference jobs")
  .version(rankscopeVersion())
  .showHelpAfterError("(run rankscope --help for the commands)")
  .exitOverride();

registerDemoCommand(program);
registerWandbCommand(program);
registerTracesCommand(program);
registerRunsCommand(program);
registerTailCommand(program);
registerExportCommand(program);
registerImportCommand(program);
registerUiCommand(program);
registerServerCommand(program);
registerSyncCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    process.exitCode = error.exitCode === 0 ? 0 : 2;
  } else {
    process.stderr.write(`rankscope: ${describeError(error)}\n`);
    process.exitCode = 1;
  }
}
