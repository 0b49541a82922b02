/**
 * The first module of every rank `spawnRanks` starts (worker thread or child process): join the
 * run over the parent's channel, then wait for the controller's requests (the rank module itself
 * is imported when the controller sends `start`).
 */
import { describeError } from "../core/diagnostics.js";
import { joinRun } from "./join.js";

// A child whose controller went away (crashed, or killed without shutdown) must not linger: its
// IPC channel closes then, whichever carrier it uses for messages.
if (process.send !== undefined) process.once("disconnect", () => setTimeout(() => process.exit(0), 50));

try {
  await joinRun();
} catch (error) {
  process.stderr.write(`[rankscope] rank could not join the run: ${describeError(error)}\n`);
  process.exit(1);
}
