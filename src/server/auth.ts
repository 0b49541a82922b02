/**
 * Who may ask the team server. Every request but `/healthz`, `/readyz` and `/metrics` carries a
 * project token: an `Authorization: Bearer` header (jobs, scripts), or the cookie the dashboard
 * sets when it is opened with `?token=` (as `rankscope ui --host` does), which a small login form
 * on `/` asks for once. Optionally (off by default) a trusted reverse proxy that did single
 * sign-on may vouch for a user with a header of its choosing; such requests read one configured
 * project. No token: 401; a token of another project or a read token writing: 403.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { HttpError } from "../ui/security.js";
import type { Principal, TokenChecker } from "./tokens.js";

/** The trusted-proxy rule: requests with a non-empty `header` read `project`. */
export interface ProxyAuth {
  /** Lower-case header name the proxy sets after sign-on (e.g. `x-forwarded-user`); clients must not be able to set it. */
  readonly header: string;
  readonly project: string;
}

const COOKIE = "rankscope_server_token";

/** What a 401 says, by why the token was refused. */
const TOKEN_REFUSALS = {
  format: "the token is not valid here (not a token this server makes)",
  unknown: "the token is not valid here (unknown or revoked)",
  revoked: "the token is not valid here (unknown or revoked)",
  expired: "the token has expired; create a new one (rankscope server token create, or token rotate before it expires)",
} as const;

/** A 401 for a presented token, with why (the server counts it as `token_<why>`). */
export class AuthRefused extends HttpError {
  constructor(
    readonly why: keyof typeof TOKEN_REFUSALS,
    message: string,
  ) {
    super(401, message);
  }
}

function cookie(header: string | undefined): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === COOKIE) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** The token a request presents, and whether it came in the URL (then it becomes a cookie). */
function presented(req: IncomingMessage, url: URL): { token: string | undefined; fromQuery: boolean } {
  const auth = req.headers.authorization;
  if (auth !== undefined && auth.startsWith("Bearer ")) return { token: auth.slice(7).trim(), fromQuery: false };
  const fromQuery = url.searchParams.get("token");
  if (fromQuery !== null && fromQuery !== "") return { token: fromQuery, fromQuery: true };
  return { token: cookie(req.headers.cookie), fromQuery: false };
}

/** The login page: one field, sent to `/` as `?token=` (its own CSP allows that one form). */
export function sendLoginPage(res: ServerResponse, message: string): void {
  const body = `<!doctype html><html><head><meta charset="utf-8"><title>rankscope</title></head><body style="font-family:sans-serif;max-width:32em;margin:4em auto">
<h1>rankscope</h1><p>${message}</p><form method="get" action="/"><label>Project token <input name="token" type="password" autocomplete="off" size="48"></label> <button>Open</button></form></body></html>`;
  res.writeHead(401, {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
  });
  res.end(body);
}

/** Checks each request's credentials. */
export class ServerAuth {
  constructor(
    private readonly tokens: TokenChecker,
    private readonly proxy: ProxyAuth | undefined,
    private readonly secureCookie: boolean,
  ) {}

  /**
   * The request's principal; a 401 HttpError without credentials or with an unknown token. Sets
   * the cookie when the token came in the URL.
   */
  async principal(req: IncomingMessage, res: ServerResponse, url: URL): Promise<Principal> {
    const { token, fromQuery } = presented(req, url);
    if (token === undefined || token === "") {
      const user = this.proxy === undefined ? undefined : req.headers[this.proxy.header];
      if (this.proxy !== undefined && typeof user === "string" && user !== "") {
        const p = await this.tokens.project(this.proxy.project);
        if (p !== null) return p;
      }
      throw new HttpError(
        401,
        "this server needs a project token: send Authorization: Bearer TOKEN, or open the dashboard with ?token=TOKEN (rankscope server token create --project P --scope read)",
      );
    }
    const checked = await this.tokens.check(token);
    if ("refused" in checked) throw new AuthRefused(checked.refused, TOKEN_REFUSALS[checked.refused]);
    const p = checked.principal;
    if (fromQuery)
      res.setHeader(
        "Set-Cookie",
        `${COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/${this.secureCookie ? "; Secure" : ""}`,
      );
    return p;
  }
}

/** A 403 unless the principal may write. */
export function requireWrite(p: Principal): void {
  if (p.scope !== "write")
    throw new HttpError(
      403,
      `this is a read token of project ${p.project}; sending runs needs a write token (rankscope server token create --project ${p.project} --scope write)`,
    );
}
