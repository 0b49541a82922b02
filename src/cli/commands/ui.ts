/** `rankscope ui`: serve the local web dashboard over the runs under a root directory. */
import type { Command } from "commander";
import { registerDrain } from "../../core/lifecycle.js";
import { stopWithNpmLauncher } from "../launcher.js";
import { resolveSetting, textKind } from "../../core/settings.js";
import { defaultRoot } from "../run-arg.js";

interface UiOptions {
  root?: string;
  port: string;
  host: string;
  token?: string;
}

export function registerUiCommand(program: Command): void {
  program
    .command("ui")
    .description(
      "serve the web dashboard over the runs under a root directory (read-only; binds 127.0.0.1 unless --host is given)",
    )
    .option("--root <dir>", "folder holding {experiment}/{trial} run directories (default: $RANKSCOPE_ROOT or ./runs)")
    .option("--port <n>", "TCP port (0 picks a free one)", "7007")
    .option(
      "--host <address>",
      "address to bind; anything but 127.0.0.1 / ::1 / localhost requires a token",
      "127.0.0.1",
    )
    .option(
      "--token <token>",
      "the token to require (default: generated when --host is not loopback; also $RANKSCOPE_UI_TOKEN)",
    )
    .action(async (options: UiOptions) => {
      const port = Number(options.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new Error(`--port must be an integer from 0 to 65535, got ${options.port}`);
      const { startDashboard } = await import("../../ui/server.js");
      const token = resolveSetting<string | undefined>(
        {
          owner: "rankscope ui",
          option: "--token",
          env: "RANKSCOPE_UI_TOKEN",
          kind: textKind(),
          fallback: undefined,
          secret: true,
        },
        options.token,
      );
      const dashboard = await startDashboard({
        root: options.root ?? defaultRoot(),
        port,
        host: options.host,
        ...(token !== undefined && token !== "" ? { token } : {}),
      });
      // Ctrl-C / SIGTERM stop it through the one lifecycle: the server closes, then exit code 0.
      registerDrain({
        name: "rankscope ui dashboard",
        stopsCleanlyOnSignal: true,
        drain: (context) => (context.reason === "beforeExit" ? undefined : dashboard.close()),
      });
      stopWithNpmLauncher();
      process.stdout.write(`rankscope dashboard: ${dashboard.url}\n`);
      if (dashboard.token !== undefined)
        process.stdout.write("anyone with this URL (it carries the token) can read these runs; share it with care\n");
      process.stdout.write("press Ctrl-C to stop\n");
    });
}
