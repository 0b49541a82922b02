/**
 * Projects and their tokens. A token is 32 random bytes (base64url, prefixed `rsk_`), shown once
 * when created; the database keeps only its SHA-256, so a leaked database or backup holds no
 * usable token. A token belongs to one project and has one scope: `write` (ingest, and read) or
 * `read` (the dashboard and its API only). It may expire (`expires_at`): past it, it is refused
 * as a revoked one is. Rotating a token creates its successor (same project, scope and label) and
 * lets the old one live on for a grace period, so a job still holding it keeps syncing while the
 * new one is deployed.
 *
 * A token ends in check digits (8 base64url characters of a SHA-256 of the rest), so a token this
 * server cannot have made is refused without asking the database. Tokens made before check digits
 * (format 1, `rsk_` and 43 characters) are looked up only while one of them is still valid.
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
/** `rsk_`, 32 random bytes in base64url, 8 check characters. */
const TOKEN_FORMAT = /^rsk_[A-Za-z0-9_-]{43}([A-Za-z0-9_-]{8})?$/;
/** How long the answer to "is a token without check digits still valid?" is kept. */
const LEGACY_RECHECK_MS = 60_000;

/** The check characters of a token's body (`rsk_` and its random part). */
function checkDigits(body: string): string {
  return createHash("sha256").update(`rankscope-token:${body}`).digest("base64url").slice(0, 8);
}

/**
 * The token's format as the server can tell without the database: 2 (check digits that match),
 * 1 (made before check digits), or null (no token this server makes).
 */
export function tokenFormat(token: string): 1 | 2 | null {
  const m = TOKEN_FORMAT.exec(token);
  if (m === null) return null;
  if (m[1] === undefined) return 1;
  return checkDigits(token.slice(0, -8)) === m[1] ? 2 : null;
}

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

const DURATION_UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `30d`, `12h`, `90m`, `2w`, `45s` in milliseconds; a TypeError saying what is valid. */
export function parseDuration(text: string, what: string): number {
  const m = /^(\d{1,6})([smhdw])$/.exec(text.trim());
  const n = m === null ? NaN : Number(m[1]) * (DURATION_UNITS[m[2] ?? ""] ?? NaN);
  if (!Number.isFinite(n) || n <= 0)
    throw new TypeError(`${what} must be a duration such as 30d, 12h, 90m, 2w or 45s, got ${JSON.stringify(text)}`);
  return n;
}

/** What a new token is. */
interface NewToken {
  readonly scope: TokenScope;
  readonly label?: string | undefined;
  /** When it stops being valid (absent: never, until revoked). */
  readonly expiresAt?: Date | undefined;
}

/** Create a token for `project` (creating the project if new); returns the token, which is not stored. */
export async function createToken(
  pool: pg.Pool,
  project: string,
  scope: TokenScope,
  label?: string,
  expiresAt?: Date,
): Promise<string> {
  checkProjectName(project);
  if (scope !== "read" && scope !== "write")
    throw new TypeError(`scope must be read or write, got ${JSON.stringify(scope)}`);
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", [project]);
    const token = await insertToken(client, project, { scope, label, expiresAt });
    await client.query("COMMIT");
    return token;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

async function insertToken(client: pg.ClientBase, project: string, t: NewToken): Promise<string> {
  const body = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const token = body + checkDigits(body);
  await client.query(
    "INSERT INTO tokens (project_id, scope, hash, label, expires_at, format) SELECT id, $2, $3, $4, $5, 2 FROM projects WHERE name = $1",
    [project, t.scope, tokenHash(token), t.label ?? null, t.expiresAt ?? null],
  );
  return token;
}

/**
 * Rotate a token: a new one of the same project, scope and label (expiring at `expiresAt`, else
 * never), and the old one expiring `graceMs` from now (or sooner, if it already would). Returns
 * the new token, or null when the old one is unknown, revoked or expired.
 */
export async function rotateToken(
  pool: pg.Pool,
  token: string,
  graceMs: number,
  expiresAt?: Date,
): Promise<string | null> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const old = await client.query<{ id: number; name: string; scope: string; label: string | null }>(
      `SELECT t.id, p.name, t.scope, t.label FROM tokens t JOIN projects p ON p.id = t.project_id
       WHERE t.hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()) FOR UPDATE`,
      [tokenHash(token)],
    );
    const row = old.rows[0];
    if (row === undefined) {
      await client.query("ROLLBACK");
      return null;
    }
    const next = await insertToken(client, row.name, {
      scope: row.scope === "write" ? "write" : "read",
      label: row.label ?? undefined,
      expiresAt,
    });
    await client.query(
      "UPDATE tokens SET expires_at = LEAST(COALESCE(expires_at, 'infinity'), now() + $2 * interval '1 millisecond') WHERE id = $1",
      [row.id, graceMs],
    );
    await client.query("COMMIT");
    return next;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** A token as `token list` shows it (never the token: the database has only its hash). */
export interface TokenInfo {
  readonly id: number;
  readonly project: string;
  readonly scope: string;
  readonly label: string | null;
  readonly createdAt: Date;
  readonly expiresAt: Date | null;
  readonly revokedAt: Date | null;
  /** `valid`, `expired` or `revoked`. */
  readonly state: string;
}

/** Every token (of `project` when given), oldest first. */
export async function listTokens(pool: pg.Pool, project?: string): Promise<TokenInfo[]> {
  const r = await pool.query<{
    id: string;
    name: string;
    scope: string;
    label: string | null;
    created_at: Date;
    expires_at: Date | null;
    revoked_at: Date | null;
    expired: boolean;
  }>(
    `SELECT t.id, p.name, t.scope, t.label, t.created_at, t.expires_at, t.revoked_at,
       (t.expires_at IS NOT NULL AND t.expires_at <= now()) AS expired
     FROM tokens t JOIN projects p ON p.id = t.project_id WHERE $1::text IS NULL OR p.name = $1 ORDER BY t.id`,
    [project ?? null],
  );
  return r.rows.map((t) => ({
    id: Number(t.id),
    project: t.name,
    scope: t.scope,
    label: t.label,
    createdAt: t.created_at,
    expiresAt: t.expires_at,
    revokedAt: t.revoked_at,
    state: t.revoked_at !== null ? "revoked" : t.expired ? "expired" : "valid",
  }));
}

/** Revoke every token whose hash matches; returns how many were revoked. */
export async function revokeToken(pool: pg.Pool, token: string): Promise<number> {
  const result = await pool.query("UPDATE tokens SET revoked_at = now() WHERE hash = $1 AND revoked_at IS NULL", [
    tokenHash(token),
  ]);
  return result.rowCount ?? 0;
}

/** Why a token is refused: not a token this server could have made, none such, revoked, or expired. */
type TokenRefusal = "format" | "unknown" | "revoked" | "expired";

/** A token's check: its principal, or why it is refused. */
export type TokenCheck = { readonly principal: Principal } | { readonly refused: TokenRefusal };

/** How long a checked token is trusted without asking the database again. */
export const TOKEN_CACHE_MS = 5_000;
const CACHE_MAX = 10_000;

/**
 * Checks tokens against the database, keeping each answer a few seconds (a revocation takes
 * effect within `TOKEN_CACHE_MS` on every server) so a dashboard's polling does not query per request.
 */
export class TokenChecker {
  private readonly cache = new Map<string, { answer: TokenCheck; until: number; expiresAt: number }>();

  /** Whether a valid token without check digits exists, and until when that answer holds. */
  private legacy: { valid: Promise<boolean>; until: number } | null = null;

  /** `onLookup`: called for each query of the tokens table (the server counts them). */
  constructor(
    private readonly pool: pg.Pool,
    private readonly onLookup: () => void = () => undefined,
  ) {}

  /** The token's principal, or why it is refused. */
  async check(token: string): Promise<TokenCheck> {
    const format = tokenFormat(token);
    if (format === null) return { refused: "format" };
    const key = tokenHash(token).toString("base64");
    const now = Date.now();
    const known = this.cache.get(key);
    if (known !== undefined && known.until > now) return known.expiresAt <= now ? { refused: "expired" } : known.answer;
    if (format === 1 && !(await this.legacyValid(now))) return { refused: "format" };
    this.onLookup();
    const result = await this.pool.query<{
      project_id: number;
      name: string;
      scope: string;
      revoked: boolean;
      expires_ms: number | null;
    }>(
      `SELECT t.project_id, p.name, t.scope, t.revoked_at IS NOT NULL AS revoked,
         extract(epoch FROM t.expires_at) * 1000 AS expires_ms
       FROM tokens t JOIN projects p ON p.id = t.project_id WHERE t.hash = $1`,
      [tokenHash(token)],
    );
    const row = result.rows[0];
    const expiresAt = row?.expires_ms === null || row === undefined ? Infinity : Number(row.expires_ms);
    const answer: TokenCheck =
      row === undefined
        ? { refused: "unknown" }
        : row.revoked
          ? { refused: "revoked" }
          : {
              principal: {
                projectId: row.project_id,
                project: row.name,
                scope: row.scope === "write" ? "write" : "read",
              },
            };
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(key, { answer, until: now + TOKEN_CACHE_MS, expiresAt });
    return expiresAt <= now ? { refused: "expired" } : answer;
  }

  /** Whether any token without check digits is still valid (asked at most once a minute). */
  private legacyValid(now: number): Promise<boolean> {
    if (this.legacy === null || this.legacy.until <= now) {
      this.onLookup();
      const valid = this.pool
        .query<{ any: boolean }>(
          "SELECT EXISTS (SELECT 1 FROM tokens WHERE format = 1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS any",
        )
        .then((r) => r.rows[0]?.any === true);
      this.legacy = { valid, until: now + LEGACY_RECHECK_MS };
      valid.catch(() => (this.legacy = null));
    }
    return this.legacy.valid;
  }

  /** The principal for a trusted proxy's user header: read access to `project` (which must exist). */
  async project(name: string): Promise<Principal | null> {
    if (!PROJECT_NAME.test(name)) return null;
    const result = await this.pool.query<{ id: number }>("SELECT id FROM projects WHERE name = $1", [name]);
    const row = result.rows[0];
    return row === undefined ? null : { projectId: row.id, project: name, scope: "read" };
  }
}
