/**
 * `rankscope server`: the team server over PostgreSQL (docs/server.md), and `rankscope server
 * token create|list|rotate|revoke` for its project tokens.
 */
import type { Command } from "commander";
import { registerDrain } from "../../core/lifecycle.js";
import { stopWithNpmLauncher } from "../launcher.js";
import { dbUrl, registerTokenCommands } from "./server-tokens.js";

interface ServerOptions {
  db?: string;
  host: string;
  port: string;
  tlsCert?: string;
  tlsKey?: string;
  proxyUserHeader?: string;
  proxyProject?: string;
  rateLimit: string;
  authFailures: string;
  poolSize: string;
  ingestPoolSize?: string;
}

function integer(name: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`);
  return n;
}

export function registerServerCommand(program: Command): void {
  const server = program
    .command("server")
    .description("serve the team dashboard and the ingest API over PostgreSQL (docs/server.md)")
    .option("--db <url>", "PostgreSQL URL, postgres://user:password@host:5432/db (default: $RANKSCOPE_DB_URL)")
    .option("--host <address>", "address to bind", "127.0.0.1")
    .option("--port <n>", "TCP port (0 picks a free one)", "7008")
    .option("--tls-cert <file>", "PEM certificate: serve HTTPS (with --tls-key)")
    .option("--tls-key <file>", "PEM private key of --tls-cert")
    .option(
      "--proxy-user-header <name>",
      "trust this header, set by a reverse proxy after sign-on, as a reader of --proxy-project (off by default)",
    )
    .option("--proxy-project <name>", "the project that --proxy-user-header's users read")
    .option("--rate-limit <n>", "requests per second per client", "200")
    .option("--auth-failures <n>", "failed authentications per minute per client address, then 429", "30")
    .option("--pool-size <n>", "PostgreSQL connections for reads (the dashboard, the API) at most", "10")
    .option(
      "--ingest-pool-size <n>",
      "PostgreSQL connections for ingest at most, also the batches worked on at once; the rest wait, then 503 (default 4: docs/server.md)",
    )
    .action(async (options: ServerOptions) => {
      const { startTeamServer } = await import("../../server/server.js");
      if ((options.tlsCert === undefined) !== (options.tlsKey === undefined))
        throw new Error("--tls-cert and --tls-key go together");
      if ((options.proxyUserHeader === undefined) !== (options.proxyProject === undefined))
        throw new Error("--proxy-user-header and --proxy-project go together");
      const running = await startTeamServer({
        db: dbUrl(options.db),
        host: options.host,
        port: integer("--port", options.port, 0, 65535),
        rateLimit: integer("--rate-limit", options.rateLimit, 1, 1_000_000),
        authFailuresPerMinute: integer("--auth-failures", options.authFailures, 1, 1_000_000),
        poolSize: integer("--pool-size", options.poolSize, 1, 1000),
        ...(options.ingestPoolSize !== undefined
          ? { ingestPoolSize: integer("--ingest-pool-size", options.ingestPoolSize, 1, 1000) }
          : {}),
        ...(options.tlsCert !== undefined && options.tlsKey !== undefined
          ? { tlsCert: options.tlsCert, tlsKey: options.tlsKey }
          : {}),
        ...(options.proxyUserHeader !== undefined && options.proxyProject !== undefined
          ? { proxy: { header: options.proxyUserHeader.toLowerCase(), project: options.proxyProject } }
          : {}),
      });
      // SIGTERM / Ctrl-C: stop taking connections, let requests in flight finish, close the pool.
      registerDrain({
        name: "rankscope server",
        stopsCleanlyOnSignal: true,
        drain: (context) => (context.reason === "beforeExit" ? undefined : running.close()),
      });
      stopWithNpmLauncher();
      process.stderr.write(`rankscope server: ${running.url} (press Ctrl-C to stop)\n`);
    });
  registerTokenCommands(
    server.command("token").description("project tokens: write (jobs, rankscope sync) or read (the dashboard)"),
  );
}
