/**
 * `rankscope server`: the team server over PostgreSQL (docs/server.md), and `rankscope server
 * token create|list|rotate|revoke` for its project tokens.
 */
import type { Command } from "commander";
import { registerDrain } from "../../core/lifecycle.js";
import { resolveSetting, textKind } from "../../core/settings.js";

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
}

/** The database URL: `--db`, else `RANKSCOPE_DB_URL`. */
function dbUrl(given: string | undefined): string {
  const url = resolveSetting<string | undefined>(
    {
      owner: "rankscope server",
      option: "--db",
      env: "RANKSCOPE_DB_URL",
      kind: textKind(/^postgres(ql)?:\/\/\S+$/, "a postgres:// URL"),
      fallback: undefined,
      secret: true,
    },
    given,
  );
  if (url === undefined)
    throw new Error(
      "rankscope server needs its database: --db postgres://user:password@host:5432/rankscope, or RANKSCOPE_DB_URL",
    );
  return url;
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
    .option("--pool-size <n>", "PostgreSQL connections at most", "10")
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
      process.stderr.write(`rankscope server: ${running.url} (press Ctrl-C to stop)\n`);
    });
  registerTokenCommands(
    server.command("token").description("project tokens: write (jobs, rankscope sync) or read (the dashboard)"),
  );
}

/** `rankscope server token create`, `… list`, `… rotate` and `… revoke`. */
function registerTokenCommands(token: Command): void {
  token
    .command("create")
    .description(
      "create a token of a project (the project too when new); prints it once: the server keeps only its hash",
    )
    .requiredOption("--project <name>", "the project")
    .option("--scope <scope>", "write (send runs, and read) or read (the dashboard only)", "read")
    .option("--label <text>", "a note kept with the token's hash (who or what it is for)")
    .option("--expires <duration>", "the token stops being valid after this long: 30d, 12h, 2w (default: never)")
    .option("--db <url>", "PostgreSQL URL (default: $RANKSCOPE_DB_URL)")
    .action(async (options: { project: string; scope: string; label?: string; expires?: string; db?: string }) => {
      if (options.scope !== "read" && options.scope !== "write")
        throw new Error(`--scope must be read or write, got ${JSON.stringify(options.scope)}`);
      const { createPool } = await import("../../server/db.js");
      const { migrate } = await import("../../server/schema.js");
      const { createToken, parseDuration } = await import("../../server/tokens.js");
      const expiresAt =
        options.expires === undefined ? undefined : new Date(Date.now() + parseDuration(options.expires, "--expires"));
      const pool = createPool({ url: dbUrl(options.db), max: 1 });
      try {
        await migrate(pool);
        process.stdout.write(`${await createToken(pool, options.project, options.scope, options.label, expiresAt)}\n`);
        process.stderr.write(
          `a ${options.scope} token of project ${options.project}${expiresAt === undefined ? "" : `, valid until ${expiresAt.toISOString()}`}; it is shown only now\n`,
        );
      } finally {
        await pool.end();
      }
    });
  token
    .command("list")
    .description("list the tokens (never the tokens themselves: only their hashes are kept)")
    .option("--project <name>", "only this project's")
    .option("--db <url>", "PostgreSQL URL (default: $RANKSCOPE_DB_URL)")
    .action(async (options: { project?: string; db?: string }) => {
      const { createPool } = await import("../../server/db.js");
      const { migrate } = await import("../../server/schema.js");
      const { listTokens } = await import("../../server/tokens.js");
      const pool = createPool({ url: dbUrl(options.db), max: 1 });
      try {
        await migrate(pool);
        const rows = await listTokens(pool, options.project);
        const when = (d: Date | null): string => (d === null ? "-" : d.toISOString());
        process.stdout.write("id\tproject\tscope\tstate\tcreated\texpires\tlabel\n");
        for (const t of rows)
          process.stdout.write(
            `${t.id}\t${t.project}\t${t.scope}\t${t.state}\t${when(t.createdAt)}\t${t.expiresAt === null ? "never" : when(t.expiresAt)}\t${t.label ?? ""}\n`,
          );
      } finally {
        await pool.end();
      }
    });
  token
    .command("rotate")
    .description(
      "replace a token (read from $RANKSCOPE_ROTATE_TOKEN or --token): prints its successor (same project, scope, label); the old one stays valid for --grace so jobs holding it keep syncing",
    )
    .option("--token <token>", "the token to rotate")
    .option("--grace <duration>", "how long the old token stays valid", "1d")
    .option("--expires <duration>", "the new token stops being valid after this long (default: never)")
    .option("--db <url>", "PostgreSQL URL (default: $RANKSCOPE_DB_URL)")
    .action(async (options: { token?: string; grace: string; expires?: string; db?: string }) => {
      const value = resolveSetting<string | undefined>(
        {
          owner: "rankscope server token rotate",
          option: "--token",
          env: "RANKSCOPE_ROTATE_TOKEN",
          kind: textKind(),
          fallback: undefined,
          secret: true,
        },
        options.token,
      );
      if (value === undefined) throw new Error("give the token to rotate with --token or RANKSCOPE_ROTATE_TOKEN");
      const { createPool } = await import("../../server/db.js");
      const { migrate } = await import("../../server/schema.js");
      const { parseDuration, rotateToken } = await import("../../server/tokens.js");
      const graceMs = parseDuration(options.grace, "--grace");
      const expiresAt =
        options.expires === undefined ? undefined : new Date(Date.now() + parseDuration(options.expires, "--expires"));
      const pool = createPool({ url: dbUrl(options.db), max: 1 });
      try {
        await migrate(pool);
        const next = await rotateToken(pool, value, graceMs, expiresAt);
        if (next === null) throw new Error("no such token (or it is revoked or expired): nothing rotated");
        process.stdout.write(`${next}\n`);
        process.stderr.write(
          `the new token is shown only now; the old one stays valid until ${new Date(Date.now() + graceMs).toISOString()} at the latest\n`,
        );
      } finally {
        await pool.end();
      }
    });
  token
    .command("revoke")
    .description("revoke a token (read from $RANKSCOPE_REVOKE_TOKEN or --token)")
    .option("--token <token>", "the token to revoke")
    .option("--db <url>", "PostgreSQL URL (default: $RANKSCOPE_DB_URL)")
    .action(async (options: { token?: string; db?: string }) => {
      const value = resolveSetting<string | undefined>(
        {
          owner: "rankscope server token revoke",
          option: "--token",
          env: "RANKSCOPE_REVOKE_TOKEN",
          kind: textKind(),
          fallback: undefined,
          secret: true,
        },
        options.token,
      );
      if (value === undefined) throw new Error("give the token to revoke with --token or RANKSCOPE_REVOKE_TOKEN");
      const { createPool } = await import("../../server/db.js");
      const { revokeToken } = await import("../../server/tokens.js");
      const pool = createPool({ url: dbUrl(options.db), max: 1 });
      try {
        const n = await revokeToken(pool, value);
        process.stdout.write(n > 0 ? "revoked\n" : "no such token (or already revoked)\n");
      } finally {
        await pool.end();
      }
    });
}
