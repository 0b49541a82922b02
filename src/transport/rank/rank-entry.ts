/**
 * The first module of every rank `spawnRanks` starts (worker thread or child process): import the
 * rank module — so the backends and reductions it registers exist before the controller starts
 * this rank's per-rank backends — then join the run over the parent's channel and answer the
 * controller's requests.
 */
import { describeError } from "../../core/diagnostics.js";
import { setCurrentRank } from "../../pipeline/current-rank.js";
import { joinRun, readAssignment } from "./join.js";

// A child whose controller went away (crashed, or killed without shutdown) must not linger: its
// IPC channel closes then, whichever carrier it uses for messages.
if (process.send !== undefined) process.once("disconnect", () => setTimeout(() => process.exit(0), 50));

const assignment = readAssignment();
try {
  if (assignment?.module !== undefined) {
    // Who this rank is, before the module's top level runs (it may call currentRank()).
    setCurrentRank(assignment.identity);
    await import(assignment.module);
  }
} catch (error) {
  process.stderr.write(
    `[rankscope] rank ${assignment?.identity.rankName ?? "?"}: its module failed to load: ${describeError(error)}\n`,
  );
  process.exit(1);
}

try {
  await joinRun();
} catch (error) {
  process.stderr.write(
    `[rankscope] rank ${assignment?.identity.rankName ?? "?"} could not join the run: ${describeError(error)}\n`,
  );
  process.exit(1);
}
