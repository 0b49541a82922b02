#!/usr/bin/env node
/**
 * The `rankscope` command: the program of `program.ts`, run on the command line.
 */
import { CommanderError } from "commander";
import { rankscopeProgram } from "./program.js";
import { describeError } from "../core/diagnostics.js";

try {
  await rankscopeProgram().parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    process.exitCode = error.exitCode === 0 ? 0 : 2;
  } else {
    process.stderr.write(`rankscope: ${describeError(error)}\n`);
    process.exitCode = 1;
  }
}
