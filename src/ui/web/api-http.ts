/**
 * How the app asks its server: GET JSON (`api/…`, same-origin, never cached by the browser), or
 * revalidated with the last answer's ETag so an unchanged answer costs nothing; a refusal thrown as
 * an `ApiError` with its status and the server's message; and the strings the server sends for
 * NaN and ±Infinity (JSON has no such numbers) turned back into numbers.
 */
import { isRecord } from "../../core/json.js";
import { frozenAnswer, reportData } from "./frozen.js";

export function toNumber(v: unknown): number {
  if (typeof v === "number") return v;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  return NaN;
}

export function decodeNumbers(values: unknown[]): number[] {
  return values.map(toNumber);
}

/** Build an API URL with query parameters. */
export function apiUrl(path: string, params: Record<string, string | number | undefined> = {}): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) search.set(k, String(v));
  const q = search.toString();
  return `api/${path}${q === "" ? "" : `?${q}`}`;
}

export async function getJson<T>(
  path: string,
  params: Record<string, string | number | undefined> | URLSearchParams = {},
): Promise<T> {
  const url = params instanceof URLSearchParams ? `api/${path}?${params.toString()}` : apiUrl(path, params);
  const response = await request(url);
  await failUnlessOk(response);
  const text = await response.text();
  received += text.length;
  // The one unchecked type in the app: the answer of this package's own server, whose types
  // (source.ts, the store's read-types.ts) are the ones named here.
  return JSON.parse(text) as T;
}

/**
 * GET `url` (`api/…`) from the server; in a report (frozen.ts), from the answers the page carries,
 * so nothing leaves the page.
 */
async function request(url: string, headers: Record<string, string> = {}): Promise<Response> {
  const report = reportData();
  if (report === null) return fetch(url, { credentials: "same-origin", cache: "no-store", headers });
  const parsed = new URL(url, "http://report/");
  const answer = frozenAnswer(await report, parsed.pathname.replace(/^\/api\//, ""), parsed.searchParams);
  return new Response(answer.text, { status: answer.status, headers: { "Content-Type": "application/json" } });
}

/** The last answer of each revalidated URL and its ETag. */
const revalidated = new Map<string, { etag: string; value: unknown }>();

/**
 * GET JSON that is asked for again and again (the runs list, every few seconds): the request
 * names the ETag of the last answer, and a `304 Not Modified` (nothing downloaded) returns the
 * same object as before, so callers can tell "unchanged" by identity.
 */
export async function getRevalidated<T>(path: string, params: URLSearchParams): Promise<T> {
  const url = `api/${path}?${params.toString()}`;
  const known = revalidated.get(url);
  const response = await request(url, known === undefined ? {} : { "If-None-Match": known.etag });
  if (response.status === 304 && known !== undefined) {
    notModified++;
    // This URL's last answer, parsed from this server's JSON: the type it was asked as.
    return known.value as T;
  }
  await failUnlessOk(response);
  const text = await response.text();
  received += text.length;
  const value: unknown = JSON.parse(text);
  const etag = response.headers.get("etag");
  if (etag !== null) {
    if (revalidated.size > 200) revalidated.clear();
    revalidated.set(url, { etag, value });
  }
  return value as T;
}

/** Answers that came back 304 (for tests and the benchmark). */
let notModified = 0;

/** Answers that came back 304 so far. */
export function notModifiedCount(): number {
  return notModified;
}

async function failUnlessOk(response: Response): Promise<void> {
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body: unknown = await response.json();
      if (isRecord(body) && typeof body["error"] === "string") message = body["error"];
    } catch {
      // keep the status line
    }
    throw new ApiError(message, response.status);
  }
}

/** Characters of JSON received so far (what polls cost, for the live benchmark). */
let received = 0;

/** Characters of JSON received so far. */
export function bytesReceived(): number {
  return received;
}

/** An answer with an HTTP status, so callers can tell "not supported here" (400/404) from a fault. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}
