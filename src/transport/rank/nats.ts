/**
 * The rank's side of the NATS carrier: connect, listen on this rank's subject and the run's flush
 * subject, register with the controller. Loaded by `joinRun` only when it joins over NATS.
 *
 * Once joined, the rank registers again whenever its connection comes back after an outage, and
 * whenever a controller says `hello` (a controller restarted on the same run id, or one that no
 * longer knows this rank). Meanwhile its collector keeps accumulating, so what it records during
 * an outage of any length goes into its next flush.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { describeError, warn } from "../../core/diagnostics.js";
import { decodeProtocolMessage } from "../protocol/messages.js";
import { RunKey } from "../protocol/seal.js";
import { SealedNats, type OpenedMessage } from "../protocol/sealed-nats.js";
import { backoffDelay, sleep } from "../../core/retry.js";
import { subjects } from "../protocol/nats.js";
import { isNatsAuthError, natsConnectError, natsConnectionOptions, reportNatsRefusals, resolveNatsAuth, type NatsAuth } from "../protocol/nats-auth.js";
import type { RankAgent } from "./rank-agent.js";

/** Waits between a joining rank's tries (jittered, so ranks started together spread out). */
const JOIN_BACKOFF = { initialMs: 100, maxMs: 1000 };
/** How long a registration waits for the flush answers being made, so that it lists them (`RankAgent.answersSettled`). */
const ANSWERS_SETTLE_MS = 5000;
/** Waits between a joined rank's tries to register again (no deadline: until it is answered or leaves). */
const REJOIN_BACKOFF = { initialMs: 250, maxMs: 5000 };

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
export async function joinOverNats(agent: RankAgent, options: NatsJoinOptions): Promise<(reason: string) => Promise<void>> {
  const { runId, joinDeadlineMs } = options;
  const auth = options.auth ?? resolveNatsAuth("joinRun", options.url);
  const url = auth.url;
  const client = { name: `rankscope-${runId}-${agent.rankName}`, runId, role: "rank", timeoutMs: 2000 } as const;
  const deadline = Date.now() + joinDeadlineMs;
  const s = subjects(runId, options.scope);
  let nc: NatsConnection | undefined;
  let lastError: unknown;
  // Waits between tries use the one backoff (jittered); the sleep is ref'd, so a retrying rank's
  // process stays alive. The first join is bounded by the join deadline.
  const pause = (attempt: number): Promise<void> => sleep(Math.min(backoffDelay(attempt, JOIN_BACKOFF), Math.max(0, deadline - Date.now())));
  let tries = 0;
  while (nc === undefined) {
    try {
      nc = await connect(natsConnectionOptions(auth, { ...client, timeoutMs: Math.max(100, Math.min(2000, deadline - Date.now())) }));
    } catch (error) {
      lastError = error;
      // Refused credentials stay refused: say so now rather than at the deadline.
      if (isNatsAuthError(error)) throw natsConnectError("joinRun()", auth, error);
      if (Date.now() >= deadline) throw natsConnectError(`joinRun() (within ${joinDeadlineMs} ms)`, auth, error);
      await pause(tries++);
    }
  }
  reportNatsRefusals(nc, client);
  const conn = nc;
  const sealed = new SealedNats(conn, RunKey.derive(options.runSecret, runId));
  const onRequest = (msg: OpenedMessage): void => {
    const reply = (payload: string | Uint8Array): void => void sealed.respond(msg, payload);
    void agent.receive(msg.data, reply, `NATS subject ${msg.subject}`, reply);
  };
  sealed.subscribe(s.rank(agent.rankName), onRequest);
  sealed.subscribe(s.flush, onRequest);

  /**
   * One registration attempt, the same for the first join and every later one: "ok", "refused"
   * (with the controller's reason), or "retry" (no controller answered yet; `lastError` says why).
   */
  const attempt = async (timeoutMs: number): Promise<{ outcome: "ok" | "retry" } | { outcome: "refused"; error: string }> => {
    try {
      // Built at each try: it lists the answers no controller acknowledged yet (a new controller asks
      // for them), once the answers being made are kept.
      if (!(await agent.answersSettled(ANSWERS_SETTLE_MS))) {
        warn(`rank.answersUnsettled:${agent.rankName}`, `rank ${agent.rankName}: a flush answer was still being made ${ANSWERS_SETTLE_MS} ms into a registration; the registration goes without it, so if its controller is gone its values may be lost (the rank reports it if it is never acknowledged)`);
      }
      const answer = await sealed.request(s.register, agent.registerMessage(), timeoutMs);
      const message = decodeProtocolMessage(runId, answer.data, `NATS subject ${s.register}`);
      if (message === undefined || message.t !== "registered" || message.rankName !== agent.rankName) return { outcome: "retry" };
      return message.ok ? { outcome: "ok" } : { outcome: "refused", error: message.error ?? "no reason given" };
    } catch (error) {
      // No controller yet (no responders), a timeout, or the connection is closing.
      lastError = error;
      return { outcome: "retry" };
    }
  };

  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      await conn.close();
      throw new Error(`joinRun(): no controller of run ${runId} answered on NATS at ${url} within ${joinDeadlineMs} ms (${describeError(lastError)}); is the controller serving ranks (serveRanksOverNats) with this run id?`);
    }
    const result = await attempt(remaining);
    if (result.outcome === "ok") break;
    if (result.outcome === "refused") {
      await conn.close();
      throw new Error(`joinRun(): the controller refused rank ${agent.rankName}: ${result.error}`);
    }
    await pause(tries++);
  }

  let left = false;
  let registering = false;
  /** Register again until a controller answers (single flight; backs off to 5 s; stops when the rank leaves). */
  const registerAgain = async (why: string): Promise<void> => {
    if (registering || left) return;
    registering = true;
    let again = 0;
    try {
      while (!left && !conn.isClosed()) {
        const result = await attempt(10_000);
        if (result.outcome === "ok") return;
        if (result.outcome === "refused") {
          warn(`rank.refused:${agent.rankName}`, `rank ${agent.rankName} registered again (${why}) and the controller refused it: ${result.error}; trying again`);
        }
        await sleep(backoffDelay(again++, REJOIN_BACKOFF));
      }
    } finally {
      registering = false;
      agent.holdFlushes(false);
    }
  };
  agent.onHello((controller) => {
    // That controller does not know this rank: its flushes are answered empty until it does.
    agent.holdFlushes(true);
    void registerAgain(`${controller} said hello`);
  });
  sealed.subscribe(s.hello, onRequest);
  void (async () => {
    for await (const status of conn.status()) {
      if (status.type === "reconnect") void registerAgain("its NATS connection came back");
    }
  })();

  return async (reason) => {
    left = true;
    try {
      sealed.publish(s.deregister, agent.deregisterMessage(reason));
      await conn.drain();
    } catch {
      await conn.close().catch(() => undefined);
    }
  };
}
