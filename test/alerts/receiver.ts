/**
 * A real local webhook receiver for the alerts tests: an HTTP server on a free port that keeps
 * every POST it gets (its JSON body) and answers as told — a status, or never (a hanging
 * webhook). Waits go through the tests' `waitFor`, never here.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

/** How the receiver answers one request: a status, or `"hang"` (it reads the body and never answers). */
export type Answer = number | "hang";

/** One request the receiver got. */
export interface Received {
  readonly body: Record<string, unknown>;
  readonly contentType: string | undefined;
  /** Whether it was answered (false while a hanging request is held). */
  answered: boolean;
}

export class WebhookReceiver {
  readonly received: Received[] = [];
  /** Answers for the next requests, in order; once used up, `fallback`. */
  readonly answers: Answer[] = [];
  fallback: Answer = 200;
  private readonly held: ServerResponse[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<WebhookReceiver> {
    const made: { receiver?: WebhookReceiver } = {};
    const server = createServer((req, res) => made.receiver?.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("the webhook receiver has no TCP port");
    const receiver = new WebhookReceiver(server, `http://127.0.0.1:${address.port}/hook`);
    made.receiver = receiver;
    return receiver;
  }

  /** The bodies of the requests that were answered 2xx or not, in arrival order. */
  bodies(): Record<string, unknown>[] {
    return this.received.map((r) => r.body);
  }

  /** Requests held open (never answered) right now. */
  get hanging(): number {
    return this.held.length;
  }

  async close(): Promise<void> {
    for (const res of this.held.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const entry: Received = {
        body: parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? { ...parsed } : {},
        contentType: req.headers["content-type"],
        answered: false,
      };
      this.received.push(entry);
      const answer = this.answers.shift() ?? this.fallback;
      if (answer === "hang") {
        this.held.push(res);
        // The client gave up (its deadline, its shutdown): no longer held.
        res.on("close", () => {
          const i = this.held.indexOf(res);
          if (i >= 0) this.held.splice(i, 1);
        });
        return;
      }
      entry.answered = true;
      res.writeHead(answer, { "content-type": "text/plain" }).end(answer < 300 ? "ok" : "no");
    });
  }
}
