/**
 * The HTTP side of the W&B client: one attempt of a request, classified, and a retry loop with
 * exponential backoff and jitter that honours `Retry-After`.
 *
 * Authentication is HTTP basic with the user `api` and the API key as password, as W&B's clients
 * do. The key lives only in the `Authorization` header built here; it is never part of a URL,
 * a message or an error (errors name the endpoint and the status, nothing else).
 */
import { isRecord } from "../../../core/json.js";
import { backoffDelay as coreBackoffDelay, retry, sleep } from "../../../core/retry.js";
import type { SenderLimits } from "../options.js";

/** The result of one request attempt. */
export type Attempt<T> =
  | { readonly ok: true; readonly value: T }
  | {
      readonly ok: false;
      /** Worth retrying: a network error, a timeout, 429 or 5xx. */
      readonly retryable: boolean;
      /** From a `Retry-After` header, in milliseconds. */
      readonly retryAfterMs: number | undefined;
      /** What went wrong, without any secret. */
      readonly reason: string;
      /** The HTTP status, when there was a response. */
      readonly status: number | undefined;
    };

/** Where and how to reach a W&B server. */
export interface Endpoint {
  readonly baseUrl: string;
  /** Never logged; used only for the Authorization header. */
  readonly apiKey: string | undefined;
}

/** `Authorization: Basic base64("api:KEY")`. */
export function authHeader(apiKey: string): string {
  return `Basic ${Buffer.from(`api:${apiKey}`, "utf8").toString("base64")}`;
}

/** A `Retry-After` value (seconds or an HTTP date) in milliseconds. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const secondsValue = Number(value);
  if (Number.isFinite(secondsValue)) return Math.max(0, secondsValue * 1000);
  const date = Date.parse(value);
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined;
}

function describeFetchError(error: unknown): string {
  if (error instanceof Error) {
    if (error.name === "TimeoutError" || error.name === "AbortError") return "timed out";
    const cause = error.cause;
    const code = isRecord(cause) ? cause["code"] : undefined;
    return typeof code === "string" ? `${error.message} (${code})` : error.message;
  }
  return String(error);
}

/** POST a JSON body once; parse a JSON answer. Never throws. */
export async function postJson(
  endpoint: Endpoint,
  path: string,
  body: string,
  timeoutMs: number,
  headers: Readonly<Record<string, string>> = {},
  stop?: AbortSignal,
): Promise<Attempt<unknown>> {
  const url = `${endpoint.baseUrl}${path}`;
  const all: Record<string, string> = { "content-type": "application/json", ...headers };
  if (endpoint.apiKey !== undefined) all["authorization"] = authHeader(endpoint.apiKey);
  let response: Response;
  try {
    // `stop` (the writer switching to its spool, or finishing) cancels a request in flight.
    const signal =
      stop === undefined ? AbortSignal.timeout(timeoutMs) : AbortSignal.any([AbortSignal.timeout(timeoutMs), stop]);
    response = await fetch(url, { method: "POST", headers: all, body, signal });
  } catch (error) {
    return {
      ok: false,
      retryable: true,
      retryAfterMs: undefined,
      reason: `POST ${url}: ${describeFetchError(error)}`,
      status: undefined,
    };
  }
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    return {
      ok: false,
      retryable: true,
      retryAfterMs: undefined,
      reason: `POST ${url}: reading the answer failed: ${describeFetchError(error)}`,
      status: response.status,
    };
  }
  if (!response.ok) {
    const retryable = response.status === 429 || response.status >= 500 || response.status === 408;
    const detail = text.length > 200 ? `${text.slice(0, 200)}…` : text;
    return {
      ok: false,
      retryable,
      retryAfterMs: parseRetryAfter(response.headers.get("retry-after")),
      reason: `POST ${url}: HTTP ${response.status}${detail.length > 0 ? ` ${detail}` : ""}`,
      status: response.status,
    };
  }
  try {
    const value: unknown = text.length === 0 ? {} : JSON.parse(text);
    return { ok: true, value };
  } catch {
    return {
      ok: false,
      retryable: true,
      retryAfterMs: undefined,
      reason: `POST ${url}: the answer is not JSON`,
      status: response.status,
    };
  }
}

/**
 * PUT a file's bytes to an upload URL (`CreateRunFiles` hands these out; in W&B's cloud they are
 * signed storage URLs, so no W&B auth header is sent), with the headers the server asked for.
 */
export async function putFile(
  url: string,
  body: string,
  timeoutMs: number,
  headers: Readonly<Record<string, string>> = {},
  stop?: AbortSignal,
): Promise<Attempt<null>> {
  let response: Response;
  try {
    const signal =
      stop === undefined ? AbortSignal.timeout(timeoutMs) : AbortSignal.any([AbortSignal.timeout(timeoutMs), stop]);
    response = await fetch(url, { method: "PUT", headers: { ...headers }, body, signal });
    await response.arrayBuffer();
  } catch (error) {
    return {
      ok: false,
      retryable: true,
      retryAfterMs: undefined,
      reason: `PUT ${url}: ${describeFetchError(error)}`,
      status: undefined,
    };
  }
  if (!response.ok) {
    const retryable = response.status === 429 || response.status >= 500 || response.status === 408;
    return {
      ok: false,
      retryable,
      retryAfterMs: parseRetryAfter(response.headers.get("retry-after")),
      reason: `PUT ${url}: HTTP ${response.status}`,
      status: response.status,
    };
  }
  return { ok: true, value: null };
}

/** The W&B limits as the one backoff policy (`core/retry.ts`). */
export function backoffDelay(
  attempt: number,
  limits: Pick<SenderLimits, "retryInitialMs" | "retryMaxMs">,
  random: () => number = Math.random,
): number {
  return coreBackoffDelay(attempt, { initialMs: limits.retryInitialMs, maxMs: limits.retryMaxMs }, random);
}

export { sleep };

/** What the retry loop reports, for counting. */
export interface RetryObserver {
  onRetry?(reason: string, delayMs: number): void;
}

/** Why a retried request gave up. */
type GiveUp = {
  readonly ok: false;
  readonly reason: string;
  readonly retryable: boolean;
  readonly status: number | undefined;
};

/**
 * Run `attempt` until it succeeds, fails for good (not retryable), the retry budget is spent, or
 * `stop` is signalled: the one retry loop (`core/retry.ts`) with the W&B limits. A `Retry-After`
 * answer waits at least what the server asked.
 */
export async function withRetry<T>(
  attempt: () => Promise<Attempt<T>>,
  limits: Pick<SenderLimits, "retryInitialMs" | "retryMaxMs" | "retryBudgetMs">,
  stop?: AbortSignal,
  observer: RetryObserver = {},
): Promise<{ ok: true; value: T } | GiveUp> {
  const result = await retry(attempt, {
    initialMs: limits.retryInitialMs,
    maxMs: limits.retryMaxMs,
    deadlineMs: limits.retryBudgetMs,
    ...(stop === undefined ? {} : { stop }),
    onRetry: (reason, delayMs) => observer.onRetry?.(reason, delayMs),
  });
  if (result.ok) return result;
  const { last, why } = result;
  const reason = why === "stopped" ? `${last.reason} (stopped while waiting to retry)` : last.reason;
  return { ok: false, reason, retryable: why !== "refused", status: last.status };
}
