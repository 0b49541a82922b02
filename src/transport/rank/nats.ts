/**
 * The rank's side of the NATS carrier: connect, listen on this rank's subject and the run's flush
 * subject, register with the controller. Loaded by `joinRun` only when it joins over NATS.
 */
import { connect, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { describeError } from "../../core/diagnostics.js";
import { decodeProtocolMessage } from "../protocol/messages.js";
import { RECONNECT, sleep, subjects } from "../protocol/nats.js";
import type { RankAgent } from "./rank-agent.js";

/** Options of the rank side. */
export interface NatsJoinOptions {
  readonly url: string;
  readonly runId: string;
  readonly joinDeadlineMs: number;
}

/**
 * The rank's side: connect, listen on this rank's subject and the run's flush subject, register
 * (retrying until the controller answers or the deadline passes). Returns the function that leaves.
 */
export async function joinOverNats(agent: RankAgent, options: NatsJoinOptions): Promise<(reason: string) => Promise<void>> {
  const { url, runId, joinDeadlineMs } = options;
  const deadline = Date.now() + joinDeadlineMs;
  const s = subjects(runId);
  let nc: NatsConnection | undefined;
  let lastError: unknown;
  while (nc === undefined) {
    try {
      nc = await connect({ servers: url, name: `rankscope-${runId}-${agent.rankName}`, timeout: Math.max(100, Math.min(2000, deadline - Date.now())), ...RECONNECT });
    } catch (error) {
      lastError = error;
      if (Date.now() >= deadline) {
        throw new Error(`joinRun(): cannot reach the NATS server at ${url} within ${joinDeadlineMs} ms: ${describeError(lastError)}. Start nats-server there, or pass the right URL (RANKSCOPE_NATS_URL)`, {
          cause: error,
        });
      }
      await sleep(200);
    }
  }
  const conn = nc;
  const onRequest = (err: Error | null, msg: Msg): void => {
    if (err !== null) return;
    const reply = (text: string): void => {
      if (msg.reply !== undefined) conn.publish(msg.reply, text);
    };
    void agent.receive(msg.data, reply, `NATS subject ${msg.subject}`);
  };
  conn.subscribe(s.rank(agent.rankName), { callback: onRequest });
  conn.subscribe(s.flush, { callback: onRequest });

  const register = agent.registerMessage();
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) {
      await conn.close();
      throw new Error(`joinRun(): no controller of run ${runId} answered on NATS at ${url} within ${joinDeadlineMs} ms (${describeError(lastError)}); is the controller serving ranks (serveRanksOverNats) with this run id?`);
    }
    try {
      const answer = await conn.request(s.register, register, { timeout: left });
      const message = decodeProtocolMessage(runId, answer.data, `NATS subject ${s.register}`);
      if (message === undefined || message.t !== "registered" || message.rankName !== agent.rankName) {
        await sleep(200);
        continue;
      }
      if (!message.ok) {
        await conn.close();
        throw new Error(`joinRun(): the controller refused rank ${agent.rankName}: ${message.error ?? "no reason given"}`);
      }
      break;
    } catch (error) {
      if (error instanceof Error && error.message.startsWith("joinRun():")) throw error;
      // No controller yet (no responders) or a timeout: try again until the deadline.
      lastError = error;
      await sleep(200);
    }
  }
  return async (reason) => {
    try {
      conn.publish(s.deregister, agent.deregisterMessage(reason));
      await conn.drain();
    } catch {
      await conn.close().catch(() => undefined);
    }
  };
}
