/**
 * The rank's side of the NATS carrier: connect, listen on this rank's subject and the run's flush
 * subject, register with the controller. Loaded by `joinRun` only when it joins over NATS.
 *
 * Once joined, the rank registers again whenever its connection comes back after an outage, and
 * whenever a controller says `hello` (a controller restarted on the same run id, or one that no
 * longer knows this rank). Meanwhile its collector keeps accumulating, so what it records during
 * an outage of any length goes into its next flush.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { nats } from "../protocol/nats-client.js";
import { describeError, warn } from "../../core/diagnostics.js";
import { decodeProtocolMessage } from "../protocol/messages.js";
import { RunKey } from "../protocol/seal.js";
import { SealedNats, type OpenedMessage } from "../protocol/sealed-nats.js";
import { backoffDelay, sleep } from "../../core/retry.js";
import { subjects } from "../protocol/nats.js";
import {
  isNatsAuthError,
  natsConnectError,
  natsConnectionOptions,
  reportNatsRefusals,
  resolveNatsAuth,
  type NatsAuth,
} from "../protocol/nats-auth.js";
import type { RankAgent } from "./rank-agent.js";

/** Waits between a joining rank's tries (jittered, so ranks started together spread out). */
const JOIN_BACKOFF = { initialMs: 100, maxMs: 1000 };
/** Waits between a joined rank's tries to register again (no deadline: until it is answered or leaves). */
const REJOIN_BACKOFF = { initialMs: 250, maxMs: 5000 };
/**
 * How long one registration try waits for its answer. A controller that died between taking a
 * registration and answering it leaves the try unanswered: the next try reaches whichever
 * controller serves the run now (one restarted on the same run id), instead of the rank waiting out
 * its whole join deadline. A controller still admitting the rank answers every try alike.
 */
const REGISTER_ANSWER_MS = 5000;

/** Options of the rank side. */
interface NatsJoinOptions {
  readonly url: string;
  /** The NATS settings (`resolveNatsAuth`); default: those of `url` and the environment. */
  readonly auth?: NatsAuth;
  readonly runId: string;
  readonly joinDeadlineMs: number;
  /** The run secret every message is sealed with (the controller's `runSecret`). */
  readonly runSecret: string;
  /** Join the agent of this host (its host id) instead of the controller (docs/scale.md). */
  readonly scope?: string;
}

/**
 * The rank's side: connect, listen on this rank's subject and the run's flush subject, register
 * (retrying until the controller answers or the deadline passes). Returns the function that leaves.
 */
export async function joinOverNats(
  agent: RankAgent,
  options: NatsJoinOptions,
): Promise<(reason: string) => Promise<void>> {
  const { runId, joinDeadlineMs } = options;
  const auth = options.auth ?? resolveNatsAuth("joinRun", options.url);
  const client = { name: `rankscope-${runId}-${agent.rankName}`, runId, role: "rank", timeoutMs: 2000 } as const;
  const deadline = Date.now() + joinDeadlineMs;
  let tries = 0;
  // Waits between tries use the one backoff (jittered); the sleep is ref'd, so a retrying rank's
  // process stays alive. The first join is bounded by the join deadline.
  const pause = (): Promise<void> =>
    sleep(Math.min(backoffDelay(tries++, JOIN_BACKOFF), Math.max(0, deadline - Date.now())));
  const { conn, lastError } = await connectUntil(auth, client, deadline, joinDeadlineMs, pause);
  reportNatsRefusals(conn, client);
  const rank = new NatsRank(
    agent,
    conn,
    new SealedNats(conn, RunKey.derive(options.runSecret, runId)),
    runId,
    subjects(runId, options.scope),
  );
  rank.lastError = lastError;
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      await conn.close();
      throw new Error(
        `joinRun(): no controller of run ${runId} answered on NATS at ${auth.url} within ${joinDeadlineMs} ms (${describeError(rank.lastError)}); is the controller serving ranks (serveRanksOverNats) with this run id?`,
      );
    }
    const result = await rank.attempt(Math.min(remaining, REGISTER_ANSWER_MS));
    if (result.outcome === "ok") break;
    if (result.outcome === "refused") {
      await conn.close();
      throw new Error(`joinRun(): the controller refused rank ${agent.rankName}: ${result.error}`);
    }
    await pause();
  }
  rank.keepRegistered();
  return (reason) => rank.leave(reason);
}

/**
 * Connect to NATS, trying again (with `pause` between tries) until `deadline`; refused credentials
 * fail at once. Returns the connection and why the last failed try failed (undefined if none did).
 */
async function connectUntil(
  auth: NatsAuth,
  client: NatsClientName,
  deadline: number,
  joinDeadlineMs: number,
  pause: () => Promise<void>,
): Promise<{ conn: NatsConnection; lastError: unknown }> {
  let lastError: unknown;
  for (;;) {
    try {
      return {
        conn: await nats.connect(
          natsConnectionOptions(auth, { ...client, timeoutMs: Math.max(100, Math.min(2000, deadline - Date.now())) }),
        ),
        lastError,
      };
    } catch (error) {
      lastError = error;
      // Refused credentials stay refused: say so now rather than at the deadline.
      if (isNatsAuthError(error)) throw natsConnectError("joinRun()", auth, error);
      if (Date.now() >= deadline) throw natsConnectError(`joinRun() (within ${joinDeadlineMs} ms)`, auth, error);
      await pause();
    }
  }
}

type NatsClientName = {
  readonly name: string;
  readonly runId: string;
  readonly role: "rank";
  readonly timeoutMs: number;
};

/** A registration attempt's outcome: "ok", "refused" (with the controller's reason), or "retry" (no controller answered yet). */
type Registered = { outcome: "ok" | "retry" } | { outcome: "refused"; error: string };

/** A rank connected to NATS: its subscriptions, its registrations, and its leaving. */
class NatsRank {
  /** Why the last registration attempt got no answer. */
  lastError: unknown;
  private left = false;
  private registering = false;
  private readonly onRequest = (msg: OpenedMessage): void => {
    const reply = (payload: string | Uint8Array): void => void this.sealed.respond(msg, payload);
    void this.agent.receive(msg.data, reply, `NATS subject ${msg.subject}`, reply);
  };

  constructor(
    private readonly agent: RankAgent,
    private readonly conn: NatsConnection,
    private readonly sealed: SealedNats,
    private readonly runId: string,
    private readonly s: ReturnType<typeof subjects>,
  ) {
    sealed.subscribe(s.rank(agent.rankName), this.onRequest);
    sealed.subscribe(s.flush, this.onRequest);
  }

  /** One registration attempt, the same for the first join and every later one (`lastError` says why of a "retry"). */
  async attempt(timeoutMs: number): Promise<Registered> {
    const { agent, s } = this;
    try {
      const answer = await this.sealed.request(s.register, agent.registerMessage(), timeoutMs);
      const message = decodeProtocolMessage(this.runId, answer.data, `NATS subject ${s.register}`);
      if (message === undefined || message.t !== "registered" || message.rankName !== agent.rankName)
        return { outcome: "retry" };
      return message.ok ? { outcome: "ok" } : { outcome: "refused", error: message.error ?? "no reason given" };
    } catch (error) {
      // No controller yet (no responders), a timeout, or the connection is closing.
      this.lastError = error;
      return { outcome: "retry" };
    }
  }

  /** Once joined: register again when a controller says hello and when the connection comes back. */
  keepRegistered(): void {
    const { agent, conn } = this;
    agent.onHello((controller) => {
      // That controller does not know this rank: its flushes are answered empty until it does.
      agent.holdFlushes(true);
      void this.registerAgain(`${controller} said hello`);
    });
    this.sealed.subscribe(this.s.hello, this.onRequest);
    void (async () => {
      for await (const status of conn.status()) {
        if (status.type === "reconnect") void this.registerAgain("its NATS connection came back");
      }
    })();
  }

  /** Register again until a controller answers (single flight; backs off to 5 s; stops when the rank leaves). */
  private async registerAgain(why: string): Promise<void> {
    if (this.registering || this.left) return;
    this.registering = true;
    let again = 0;
    try {
      while (!this.left && !this.conn.isClosed()) {
        const result = await this.attempt(REGISTER_ANSWER_MS);
        if (result.outcome === "ok") return;
        if (result.outcome === "refused") {
          warn(
            `rank.refused:${this.agent.rankName}`,
            `rank ${this.agent.rankName} registered again (${why}) and the controller refused it: ${result.error}; trying again`,
          );
        }
        await sleep(backoffDelay(again++, REJOIN_BACKOFF));
      }
    } finally {
      this.registering = false;
      this.agent.holdFlushes(false);
    }
  }

  async leave(reason: string): Promise<void> {
    this.left = true;
    try {
      this.sealed.publish(this.s.deregister, this.agent.deregisterMessage(reason));
      await this.conn.drain();
    } catch {
      await this.conn.close().catch(() => undefined);
    }
  }
}
