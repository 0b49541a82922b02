/**
 * `rankscope sync RUN_DIR… --server URL --token T`: send runs to a team server later (an
 * air-gapped cluster, a laptop, what a job's live sync left behind). It continues from what the
 * server already has, so repeating it sends nothing twice and an interrupted sync completes.
 */
import type { Command } from "commander";
import { resolveSetting } from "../../core/settings.js";
import { SYNC_SETTINGS } from "../../sync/settings.js";
import { resolveRunArg } from "../run-arg.js";
import { describeError } from "../../core/diagnostics.js";

interface SyncOptions {
  server?: string;
  token?: string;
  project?: string;
  root?: string;
}

export function registerSyncCommand(program: Command): void {
  program
    .command("sync")
    .description("send runs to a team server (rankscope server); repeating it sends nothing twice")
    .argument("<runs...>", "run directories (or experiment/trial under --root)")
    .option("--server <url>", "the team server (default: $RANKSCOPE_SERVER_URL)")
    .option("--token <token>", "a write token of the project (default: $RANKSCOPE_SERVER_TOKEN)")
    .option("--project <name>", "the project the token must belong to (default: $RANKSCOPE_SERVER_PROJECT)")
    .option("--root <dir>", "runs root for experiment/trial (default: $RANKSCOPE_ROOT or ./runs)")
    .action(async (runs: string[], options: SyncOptions) => {
      const url = resolveSetting<string | undefined>(
        { ...SYNC_SETTINGS.server, owner: "rankscope sync", option: "--server" },
        options.server,
      );
      const token = resolveSetting<string | undefined>(
        { ...SYNC_SETTINGS.serverToken, owner: "rankscope sync", option: "--token" },
        options.token,
      );
      const project = resolveSetting<string | undefined>(
        { ...SYNC_SETTINGS.serverProject, owner: "rankscope sync", option: "--project" },
        options.project,
      );
      if (url === undefined || token === undefined)
        throw new Error(
          "rankscope sync needs --server URL and --token T (or RANKSCOPE_SERVER_URL and RANKSCOPE_SERVER_TOKEN)",
        );
      const { RunSync } = await import("../../sync/run-sync.js");
      const { closeStores } = await import("../../store/reader.js");
      let failed = 0;
      for (const run of runs) {
        const runDir = resolveRunArg(run, options.root);
        try {
          const sync = new RunSync({ runDir, url, token, ...(project !== undefined ? { project } : {}) });
          const result = await sync.pass(true);
          process.stdout.write(
            `${sync.runId}: ${result.points} point(s), ${result.records} record(s), ${result.fileBytes} file byte(s) sent in ${result.batches} batch(es)${result.batches === 0 ? " (the server had it all)" : ""}\n`,
          );
          if (sync.totals.refused > 0)
            process.stderr.write(
              `rankscope sync: ${sync.runId}: ${sync.totals.refused} part(s) left out, past the server's string limits (docs/server.md):\n${sync.refusedParts.map((p) => `  ${p}\n`).join("")}`,
            );
        } catch (error) {
          failed++;
          process.stderr.write(`rankscope sync: ${runDir}: ${describeError(error)}\n`);
        }
      }
      closeStores();
      if (failed > 0)
        throw new Error(
          `${failed} of ${runs.length} run(s) could not be sent; run the same command again to continue where it stopped`,
        );
    });
}
