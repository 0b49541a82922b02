/**
 * Requests per client per second, as a token bucket per client (a well-formed token's hash, else
 * the address): a client past its rate gets a 429 with `Retry-After` instead of the server's time.
 * The server keeps a second one of failed authentications per address. Buckets are per server
 * process (several servers behind a balancer each allow the rate).
 */

/** A bucket per client: `rate` requests a second on average, `burst` at once. */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly rate: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** `take` without taking: 0 when a request of `client` could go ahead now, else the milliseconds until it could. */
  peek(client: string): number {
    const b = this.buckets.get(client);
    if (b === undefined) return 0;
    const tokens = Math.min(this.burst, b.tokens + ((this.now() - b.at) / 1000) * this.rate);
    return tokens >= 1 ? 0 : Math.ceil(((1 - tokens) / this.rate) * 1000);
  }

  /** 0 when the request may go ahead, else the milliseconds until it may. */
  take(client: string): number {
    const now = this.now();
    const b = this.buckets.get(client) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.rate);
    b.at = now;
    if (this.buckets.size > 100_000) this.buckets.clear();
    this.buckets.set(client, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - b.tokens) / this.rate) * 1000);
  }
}
