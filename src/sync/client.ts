/**
 * The sync's HTTP calls to a team server, each with a deadline (an `AbortSignal` timer per
 * attempt) and retried through the one retry loop (`core/retry.ts`, jittered, a total deadline,
 * `Retry-After` honoured). What is worth retrying: the network, 5xx, 429, a timeout. What is not:
 * 400/401/403/413 (the batch or the token is wrong: retrying cannot help) and 409 (the server is
 * elsewhere than the sync thought: it re-reads the state).
 */
import { retry } from "../core/retry.js";

/** Where a sync sends. */
export interface SyncTarget {
  /** The server's base URL (`https://rankscope.example.org`). */
  readonly url: string;
  /** A write token of the project. */
  readonly token: string;
  /** The project, when the caller wants the server to check the token is that project's. */
  readonly project?: string;
  /** Deadline of one HTTP attempt (default 30 s). */
  readonly requestDeadlineMs?: number;
}

/** A refusal retrying cannot fix. */
class SyncRefused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The server answered 409: re-read its state and continue from there. */
export class SyncConflict extends Error {}

/** The calls could not get through within their deadline (network, server down, 5xx). */
class SyncUnreachable extends Error {}

type Attempt<T> =
  { ok: true; value: T } | { ok: false; retryable: boolean; reason: string; retryAfterMs?: number; status?: number };

/** The server's ingest API. */
export class SyncClient {
  constructor(
    private readonly target: SyncTarget,
    private readonly stop?: AbortSignal,
  ) {}

  private url(path: string, params: Record<string, string>): string {
    const u = new URL(path, this.target.url.endsWith("/") ? this.target.url : `${this.target.url}/`);
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
    if (this.target.project !== undefined) u.searchParams.set("project", this.target.project);
    return u.toString();
  }

  /** One request, retried until `totalMs` is spent; returns the JSON body of a 2xx. */
  async call(
    method: "GET" | "POST",
    path: string,
    params: Record<string, string>,
    body: Buffer | undefined,
    totalMs: number,
  ): Promise<unknown> {
    const perAttempt = this.target.requestDeadlineMs ?? 30_000;
    const attempt = async (): Promise<Attempt<unknown>> => {
      let answer: Response;
      try {
        answer = await fetch(this.url(path, params), {
          method,
          headers: {
            Authorization: `Bearer ${this.target.token}`,
            ...(body !== undefined
              ? { "Content-Type": "application/x-rankscope-batch", "Content-Encoding": "gzip" }
              : {}),
          },
          ...(body !== undefined ? { body: new Uint8Array(body) } : {}),
          signal:
            this.stop === undefined
              ? AbortSignal.timeout(perAttempt)
              : AbortSignal.any([AbortSignal.timeout(perAttempt), this.stop]),
        });
      } catch (error) {
        return {
          ok: false,
          retryable: true,
          reason: `no answer from ${new URL(this.target.url).host}: ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`,
        };
      }
      const text = await answer.text().catch(() => "");
      if (answer.ok) {
        try {
          return { ok: true, value: JSON.parse(text) };
        } catch {
          return { ok: false, retryable: true, reason: "the server's answer was not JSON" };
        }
      }
      const reason = `${answer.status}: ${text.slice(0, 500)}`;
      const retryAfter = Number(answer.headers.get("retry-after") ?? NaN);
      const retryable = answer.status >= 500 || answer.status === 429 || answer.status === 408;
      return {
        ok: false,
        retryable,
        reason,
        status: answer.status,
        ...(Number.isFinite(retryAfter) ? { retryAfterMs: retryAfter * 1000 } : {}),
      };
    };
    const result = await retry(attempt, {
      initialMs: 200,
      maxMs: 5_000,
      deadlineMs: totalMs,
      ...(this.stop !== undefined ? { stop: this.stop } : {}),
    });
    if (result.ok) return result.value;
    const last = result.last;
    if (last.status === 409) throw new SyncConflict(last.reason);
    if (result.why === "refused" && last.status !== undefined) throw new SyncRefused(last.status, last.reason);
    throw new SyncUnreachable(
      `${result.why === "stopped" ? "stopped" : `gave up after ${totalMs} ms`}: ${last.reason}`,
    );
  }
}
