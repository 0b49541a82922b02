/**
 * Projects and their tokens. A token is 32 random bytes (base64url, prefixed `rsk_`), shown once
 * when created; the database keeps only its SHA-256, so a leaked database or backup holds no
 * usable token. A token belongs to one project and has one scope: `write` (ingest, and read) or
 * `read` (the dashboard and its API only).
 */
import { createHash, randomBytes } from "node:crypto";
import type pg from "pg";

/** What a token may do. */
type TokenScope = "read" | "write";

/** Who a request is, once its token is checked. */
export interface Principal {
  readonly projectId: number;
  readonly project: string;
  readonly scope: TokenScope;
}

/** A project name: letters, digits, `.`, `_`, `-`, 1 to 100 characters. */
const PROJECT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

const TOKEN_PREFIX = "rsk_";

/** The stored form of a token. */
export function tokenHash(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Check a project name; a TypeError saying what is valid. */
function checkProjectName(name: string): string {
  if (!PROJECT_NAME.test(name))
    throw new TypeError(
      `project names are 1 to 100 letters, digits, '.', '_' or '-' (starting with a letter or digit), got ${JSON.stringify(name.slice(0, 120))}`,
    );
  return name;
}

/** Create a token for `project` (creating the project if new); returns the token, which is not stored. */
export async function createToken(pool: pg.Pool, project: string, scope: TokenScope, label?: string): Promise<string> {
  checkProjectName(project);
  if (scope !== "read" && scope !== "write")
    throw new TypeError(`scope must be read or write, got ${JSON.stringify(scope)}`);
  const token = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", [project]);
    await client.query(
      "INSERT INTO tokens (project_id, scope, hash, label) SELECT id, $2, $3, $4 FROM projects WHERE name = $1",
      [project, scope, tokenHash(token), label ?? null],
    );
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
  return token;
}

/** Revoke every token whose hash matches; returns how many were revoked. */
export async function revokeToken(pool: pg.Pool, token: string): Promise<number> {
  const result = await pool.query("UPDATE tokens SET revoked_at = now() WHERE hash = $1 AND revoked_at IS NULL", [
    tokenHash(token),
  ]);
  return result.rowCount ?? 0;
}

/** How long a checked token is trusted without asking the database again. */
const CACHE_MS = 5_000;
const CACHE_MAX = 10_000;

/**
 * Checks tokens against the database, keeping each answer a few seconds (a revocation takes
 * effect within `CACHE_MS` on every server) so a dashboard's polling does not query per request.
 */
export class TokenChecker {
  private readonly cache = new Map<string, { principal: Principal | null; until: number }>();

  constructor(private readonly pool: pg.Pool) {}

  /** The token's principal, or null for an unknown or revoked token. */
  async check(token: string): Promise<Principal | null> {
    if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return null;
    const key = tokenHash(token).toString("base64");
    const now = Date.now();
    const known = this.cache.get(key);
    if (known !== undefined && known.until > now) return known.principal;
    const result = await this.pool.query<{ project_id: number; name: string; scope: string }>(
      "SELECT t.project_id, p.name, t.scope FROM tokens t JOIN projects p ON p.id = t.project_id WHERE t.hash = $1 AND t.revoked_at IS NULL",
      [tokenHash(token)],
    );
    const row = result.rows[0];
    const principal: Principal | null =
      row === undefined
        ? null
        : { projectId: row.project_id, project: row.name, scope: row.scope === "write" ? "write" : "read" };
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(key, { principal, until: now + CACHE_MS });
    return principal;
  }

  /** The principal for a trusted proxy's user header: read access to `project` (which must exist). */
  async project(name: string): Promise<Principal | null> {
    if (!PROJECT_NAME.test(name)) return null;
    const result = await this.pool.query<{ id: number }>("SELECT id FROM projects WHERE name = $1", [name]);
    const row = result.rows[0];
    return row === undefined ? null : { projectId: row.id, project: name, scope: "read" };
  }
}
