/**
 * `rankscope server token create`, `… list`, `… rotate` and `… revoke`: a project's tokens, kept in
 * PostgreSQL as hashes (docs/server.md, "Tokens").
 */
import type { Command } from "commander";
import type pg from "pg";
import { resolveSetting, textKind } from "../../core/settings.js";

/** The database URL: `--db`, else `RANKSCOPE_DB_URL`. */
export function dbUrl(given: string | undefined): string {
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

/** `rankscope server token …`. */
export function registerTokenCommands(token: Command): void {
  registerCreate(token);
  registerList(token);
  registerRotate(token);
  registerRevoke(token);
}

/** Runs `use` on a one-connection pool of `--db` (migrated first unless `migrated` is false), closed after. */
async function withPool<T>(db: string | undefined, use: (pool: pg.Pool) => Promise<T>, migrated = true): Promise<T> {
  const { createPool } = await import("../../server/db.js");
  const pool = createPool({ url: dbUrl(db), max: 1 });
  try {
    if (migrated) {
      const { migrate } = await import("../../server/schema.js");
      await migrate(pool);
    }
    return await use(pool);
  } finally {
    await pool.end();
  }
}

/** The token given to `rotate` or `revoke`: `--token`, else the command's environment variable. */
function givenToken(command: "rotate" | "revoke", option: string | undefined): string {
  const env = `RANKSCOPE_${command.toUpperCase()}_TOKEN`;
  const value = resolveSetting<string | undefined>(
    {
      owner: `rankscope server token ${command}`,
      option: "--token",
      env,
      kind: textKind(),
      fallback: undefined,
      secret: true,
    },
    option,
  );
  if (value === undefined) throw new Error(`give the token to ${command} with --token or ${env}`);
  return value;
}

/** `token create`: a new token, printed once. */
function registerCreate(token: Command): void {
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
      const scope = options.scope;
      if (scope !== "read" && scope !== "write")
        throw new Error(`--scope must be read or write, got ${JSON.stringify(scope)}`);
      const { createToken, parseDuration } = await import("../../server/tokens.js");
      const expiresAt =
        options.expires === undefined ? undefined : new Date(Date.now() + parseDuration(options.expires, "--expires"));
      const created = await withPool(options.db, (pool) =>
        createToken(pool, options.project, scope, options.label, expiresAt),
      );
      process.stdout.write(`${created}\n`);
      process.stderr.write(
        `a ${options.scope} token of project ${options.project}${expiresAt === undefined ? "" : `, valid until ${expiresAt.toISOString()}`}; it is shown only now\n`,
      );
    });
}

/** `token list`: every token's id, project, scope, state, expiry and label. */
function registerList(token: Command): void {
  token
    .command("list")
    .description("list the tokens (never the tokens themselves: only their hashes are kept)")
    .option("--project <name>", "only this project's")
    .option("--db <url>", "PostgreSQL URL (default: $RANKSCOPE_DB_URL)")
    .action(async (options: { project?: string; db?: string }) => {
      const { listTokens } = await import("../../server/tokens.js");
      const rows = await withPool(options.db, (pool) => listTokens(pool, options.project));
      const when = (d: Date | null): string => (d === null ? "-" : d.toISOString());
      process.stdout.write("id\tproject\tscope\tstate\tcreated\texpires\tlabel\n");
      for (const t of rows)
        process.stdout.write(
          `${t.id}\t${t.project}\t${t.scope}\t${t.state}\t${when(t.createdAt)}\t${t.expiresAt === null ? "never" : when(t.expiresAt)}\t${t.label ?? ""}\n`,
        );
    });
}

/** `token rotate`: a successor token; the old one stays valid for the grace period. */
function registerRotate(token: Command): void {
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
      const value = givenToken("rotate", options.token);
      const { parseDuration, rotateToken } = await import("../../server/tokens.js");
      const graceMs = parseDuration(options.grace, "--grace");
      const expiresAt =
        options.expires === undefined ? undefined : new Date(Date.now() + parseDuration(options.expires, "--expires"));
      const next = await withPool(options.db, (pool) => rotateToken(pool, value, graceMs, expiresAt));
      if (next === null) throw new Error("no such token (or it is revoked or expired): nothing rotated");
      process.stdout.write(`${next}\n`);
      process.stderr.write(
        `the new token is shown only now; the old one stays valid until ${new Date(Date.now() + graceMs).toISOString()} at the latest\n`,
      );
    });
}

/** `token revoke`: the token stops being valid at once. */
function registerRevoke(token: Command): void {
  token
    .command("revoke")
    .description("revoke a token (read from $RANKSCOPE_REVOKE_TOKEN or --token)")
    .option("--token <token>", "the token to revoke")
    .option("--db <url>", "PostgreSQL URL (default: $RANKSCOPE_DB_URL)")
    .action(async (options: { token?: string; db?: string }) => {
      const value = givenToken("revoke", options.token);
      const { revokeToken } = await import("../../server/tokens.js");
      const n = await withPool(options.db, (pool) => revokeToken(pool, value), false);
      process.stdout.write(n > 0 ? "revoked\n" : "no such token (or already revoked)\n");
    });
}
