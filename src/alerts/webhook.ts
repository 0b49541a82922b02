/**
 * Alerts to a webhook: a bounded queue with one sender, so a slow or hanging receiver costs only
 * its own queue, never a flush. Each alert is one HTTP POST of JSON with a deadline, retried
 * through the one retry helper (jittered backoff, `Retry-After` honoured, a total budget); what
 * cannot be delivered — refused, out of retries, dropped from a full queue, still queued at the
 * end — is counted and named in a warning. The URL is never printed (Slack's hold a token).
 */
import type { AlertEvent } from "../core/alert.js";
import { DEADLINE, withDeadline } from "../core/deadline.js";
import { describeError, reportError } from "../core/diagnostics.js";
import { jsonNumber } from "../core/json.js";
import { retry, type AttemptOutcome } from "../core/retry.js";

/** How the webhook is reached. */
interface WebhookOptions {
  readonly url: string;
  /** `slack` adds `text`, the line Slack's incoming webhooks show. */
  readonly format: "json" | "slack";
  /** One POST's deadline. */
  readonly deadlineMs: number;
  /** One alert's retries in all. */
  readonly retryMs: number;
  /** Alerts waiting at most. */
  readonly capacity: number;
}

/** What the webhook got and did not get, since the start. */
export interface WebhookStats {
  /** Alerts the receiver accepted (a 2xx answer). */
  readonly delivered: number;
  /** Alerts it did not get: refused, out of retries, dropped from the full queue, or left at the end. */
  readonly undelivered: number;
  /** Of those, dropped because the queue was full. */
  readonly dropped: number;
  /** Alerts waiting or being sent now. */
  readonly queued: number;
  /** Attempts that failed and were retried. */
  readonly retries: number;
}

const EMOJI: Record<AlertEvent["level"], string> = { info: "ℹ️", warning: "⚠️", error: "🚨" };

/** The body POSTed for an alert: the event (NaN and ±Infinity as strings), plus `text` in the Slack format. */
function webhookBody(event: AlertEvent, format: "json" | "slack"): string {
  const body: Record<string, unknown> = { ...event };
  if (event.value !== undefined) body["value"] = jsonNumber(event.value);
  if (format === "slack")
    body["text"] =
      `${EMOJI[event.level]} [${event.run}] ${event.state === "firing" ? "FIRING" : event.state} ${event.rule}: ${event.message}`;
  return JSON.stringify(body);
}

/** Sends alerts to one webhook, one at a time, from a bounded queue. */
export class WebhookSender {
  private queue: AlertEvent[] = [];
  private sending: Promise<void> | null = null;
  private readonly stop = new AbortController();
  private delivered = 0;
  private undelivered = 0;
  private undeliveredSinceTaken = 0;
  private dropped = 0;
  private retries = 0;
  private closed = false;

  constructor(private readonly options: WebhookOptions) {}

  get stats(): WebhookStats {
    return {
      delivered: this.delivered,
      undelivered: this.undelivered,
      dropped: this.dropped,
      queued: this.queue.length + (this.sending === null ? 0 : 1),
      retries: this.retries,
    };
  }

  /** Alerts not delivered since the last call (for `rankscope/alerts_undelivered`). */
  takeUndelivered(): number {
    const n = this.undeliveredSinceTaken;
    this.undeliveredSinceTaken = 0;
    return n;
  }

  /** Queue an alert and start sending if idle. Never waits, never throws. */
  push(event: AlertEvent): void {
    if (this.closed) {
      this.lose(event, "closed", "it was raised after the webhook was closed (the logger shut down)");
      return;
    }
    this.queue.push(event);
    if (this.queue.length > this.options.capacity) {
      const oldest = this.queue.shift();
      if (oldest !== undefined) {
        this.dropped++;
        this.lose(
          oldest,
          "queueFull",
          `the webhook queue was full (${this.options.capacity} alerts waiting: the receiver is slow or down); the oldest was dropped`,
        );
      }
    }
    this.sending ??= this.sendAll().finally(() => {
      this.sending = null;
    });
  }

  /**
   * Send what is queued within `deadlineMs`, then stop: requests still running are aborted and
   * alerts still queued are counted undelivered and named.
   */
  async close(deadlineMs: number): Promise<void> {
    this.closed = true;
    const end = Date.now() + deadlineMs;
    while (this.sending !== null && (await withDeadline(this.sending, Math.max(0, end - Date.now()))) !== DEADLINE);
    if (this.sending === null && this.queue.length === 0) return;
    this.stop.abort();
    await withDeadline(this.sending ?? Promise.resolve(), 1000);
    this.abandonQueue("shutdown", `the logger shut down before the webhook took it (waited ${deadlineMs} ms)`);
  }

  /** At exit, where nothing can be awaited: what is still queued is counted undelivered. */
  closeSync(reason: string): void {
    this.closed = true;
    this.stop.abort();
    this.abandonQueue("exit", reason);
  }

  private abandonQueue(kind: string, reason: string): void {
    for (const event of this.queue.splice(0)) this.lose(event, kind, reason);
  }

  /** Count an alert the webhook did not get and name it (printed once per `kind`, counted every time). */
  private lose(event: AlertEvent, kind: string, reason: string): void {
    this.undelivered++;
    this.undeliveredSinceTaken++;
    reportError(
      `alerts.undelivered:${kind}`,
      `alert ${event.id} (${event.rule}, ${event.state}) was not delivered to the webhook: ${reason}; ${this.undelivered} undelivered so far (rankscope/alerts_undelivered, alertStats())`,
    );
  }

  private async sendAll(): Promise<void> {
    for (let event = this.queue.shift(); event !== undefined; event = this.queue.shift()) {
      if (this.stop.signal.aborted) {
        this.lose(event, "shutdown", "the logger shut down before the webhook took it");
        continue;
      }
      const body = webhookBody(event, this.options.format);
      const result = await retry(() => this.post(body), {
        initialMs: 250,
        maxMs: 5000,
        deadlineMs: this.options.retryMs,
        stop: this.stop.signal,
        onRetry: () => {
          this.retries++;
        },
      });
      if (result.ok) this.delivered++;
      else {
        const why =
          result.why === "deadline"
            ? ` (retried for ${this.options.retryMs} ms)`
            : result.why === "stopped"
              ? " (the logger shut down meanwhile)"
              : "";
        this.lose(event, result.why === "stopped" ? "shutdown" : result.why, `${result.last.reason}${why}`);
      }
    }
  }

  private async post(body: string): Promise<AttemptOutcome<void>> {
    const { deadlineMs } = this.options;
    try {
      const response = await fetch(this.options.url, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": "rankscope" },
        body,
        signal: AbortSignal.any([AbortSignal.timeout(deadlineMs), this.stop.signal]),
      });
      // The body is read under the same deadline (a receiver may send headers and then hang).
      await response.arrayBuffer().catch(() => undefined);
      if (response.ok) return { ok: true, value: undefined };
      const retryable = response.status >= 500 || response.status === 429 || response.status === 408;
      const retryAfter = Number(response.headers.get("retry-after"));
      return {
        ok: false,
        retryable,
        reason: `the webhook answered HTTP ${response.status}`,
        ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterMs: retryAfter * 1000 } : {}),
      };
    } catch (error) {
      if (this.stop.signal.aborted)
        return { ok: false, retryable: false, reason: "the logger shut down before the webhook answered" };
      const timedOut = error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
      return {
        ok: false,
        retryable: true,
        reason: timedOut
          ? `the webhook did not answer within ${deadlineMs} ms`
          : `the webhook could not be reached: ${describeError(error)}`,
      };
    }
  }
}
