/**
 * Who may ask the dashboard. Off the default loopback bind every request carries the token (an
 * `Authorization: Bearer` header, the cookie set when the page was opened with `?token=`, or
 * `?token=` itself); on loopback without a token, only requests addressed to a loopback host are
 * answered (DNS rebinding).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { HttpError, generateToken, hostHeaderAllowed, tokenMatches } from "./security.js";

/** Whether a bind address is one of the defaults that need no token. */
function isDefaultLocalBind(host: string): boolean {
  return host === "127.0.0.1" || host === "::1" || host === "localhost";
}

/** The token to require for a bind: the given one (at least 8 characters), else a fresh one off loopback. */
export function requiredToken(host: string, given: string | undefined): string | undefined {
  const token = given ?? (isDefaultLocalBind(host) ? undefined : generateToken());
  if (token !== undefined && token.length < 8) throw new Error("the token must be at least 8 characters long");
  return token;
}

function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0) cookies.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  return cookies;
}

/** Checks every request; `port` names the cookie once the server listens. */
export class DashboardAuth {
  /** Cookies are shared across ports of one host; ours is named by port so two dashboards don't clash. */
  private cookieName = "rankscope_token";

  constructor(readonly token: string | undefined) {}

  set port(port: number) {
    this.cookieName = `rankscope_token_${port}`;
  }

  /** Throws a 401 / 403 HttpError when the request may not be answered; sets the cookie when the token came in the URL. */
  check(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const token = this.token;
    if (token === undefined) {
      if (!hostHeaderAllowed(req.headers.host))
        throw new HttpError(403, "this dashboard answers only requests addressed to localhost / 127.0.0.1 / [::1]");
      return;
    }
    const auth = req.headers.authorization;
    const bearer = auth !== undefined && auth.startsWith("Bearer ") ? auth.slice(7) : undefined;
    const fromQuery = url.searchParams.get("token") ?? undefined;
    const ok =
      tokenMatches(token, bearer) ||
      tokenMatches(token, parseCookies(req.headers.cookie).get(this.cookieName)) ||
      tokenMatches(token, fromQuery);
    if (!ok)
      throw new HttpError(
        401,
        "this dashboard needs its token: open the URL rankscope ui printed (…?token=…) or send Authorization: Bearer TOKEN",
      );
    // Later requests (scripts, API calls, downloads) carry the token as a cookie.
    if (tokenMatches(token, fromQuery))
      res.setHeader("Set-Cookie", `${this.cookieName}=${token}; HttpOnly; SameSite=Strict; Path=/`);
  }
}
